/** @module Runner hub Durable Object (registry, dispatch, inference tunnel, events) and its plain classes. */
export { RunnerHub } from './runner-hub.ts'
export type { RunnerHubRpc } from './runner-hub.ts'
export { INFERENCE_GATE_NAME, RUNNER_HUB_NAME } from './names.ts'
