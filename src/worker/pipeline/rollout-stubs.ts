/**
 * @module
 * Typed stubs of the rollout Durable Objects, for routes and the proxy pipeline.
 */
import type { InferenceGateRpc } from '../../durable/gate/inference-gate.ts'
import { INFERENCE_GATE_NAME, RUNNER_HUB_NAME } from '../../durable/runner/names.ts'
import type { RunnerHubRpc } from '../../durable/runner/runner-hub.ts'
import type { RunnerLinkRpc } from '../../durable/runner/runner-link.ts'
import type { SessionRolloutRpc } from '../../durable/session/session-rollout.ts'
import type { TaskRpc } from '../../durable/task/task-object.ts'

export function taskStub(env: Env, taskId: string): TaskRpc {
  return env.TASKS.get(env.TASKS.idFromName(taskId)) as unknown as TaskRpc
}

export function hubStub(env: Env): RunnerHubRpc {
  return env.RUNNERS.get(env.RUNNERS.idFromName(RUNNER_HUB_NAME)) as unknown as RunnerHubRpc
}

/** A runner's own link object (its socket and inference tunnel). */
export function linkStub(env: Env, runnerId: string): RunnerLinkRpc {
  return env.RUNNER_LINKS.get(env.RUNNER_LINKS.idFromName(runnerId)) as unknown as RunnerLinkRpc
}

export function gateStub(env: Env): InferenceGateRpc {
  return env.INFERENCE_GATE.get(env.INFERENCE_GATE.idFromName(INFERENCE_GATE_NAME)) as unknown as InferenceGateRpc
}

export function sessionRolloutStub(env: Env, sessionId: string): SessionRolloutRpc {
  return env.SESSIONS.get(env.SESSIONS.idFromName(sessionId)) as unknown as SessionRolloutRpc
}
