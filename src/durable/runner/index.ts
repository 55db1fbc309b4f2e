/** @module Runner hub Durable Object (registry, dispatch, events), the per-runner link (socket, inference tunnel) and their plain classes. */
export { RunnerHub } from './runner-hub.ts'
export type { RunnerHubRpc } from './runner-hub.ts'
export { RunnerLink } from './runner-link.ts'
export type { RunnerLinkRpc } from './runner-link.ts'
export { INFERENCE_GATE_NAME, RUNNER_HUB_NAME } from './names.ts'
