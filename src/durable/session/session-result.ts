/**
 * @module
 * A rollout session's terminal `SessionResult`, rebuilt deterministically from the durable log and
 * the lifecycle row: build (Polar POSTRUN BUILDING) → agent outcome → evaluate (EVALUATING) →
 * reward merge (§17). Pure: the same records and state always give the same result, so a retried
 * delivery never needs a stored copy.
 */
import { EDGE_EVALUATORS } from '../../contract/rollout.ts'
import type { SessionResult, SessionTiming, Trajectory, TrajectoryStatus } from '../../contract/trajectory.ts'
import { applyEvalResult, reconstructTrajectory, toSessionResult } from '../../reconstruct/index.ts'
import type { CompletionLog } from './completion-log.ts'
import { LogReadError } from './log-records.ts'
import type { LifecycleState } from './session-lifecycle.ts'
import { buildTrajectory } from './trajectory-stream.ts'

/**
 * Build the trajectory of the run (completions up to `built_through_seq`) with the agent outcome applied,
 * from the durable log (tolerant prefix_merging reads it lazily: `buildTrajectory`). A failure reading the
 * log propagates (`LogReadError`: retried); a failure of the builder is this trajectory's error.
 */
export async function buildRunTrajectory(sessionId: string, log: CompletionLog, state: LifecycleState): Promise<Trajectory> {
  const { spec } = state
  const through = state.built_through_seq ?? Number.POSITIVE_INFINITY
  const session = { session_id: sessionId, task_id: spec.task_id, metadata: spec.metadata }
  const request = { builder: spec.builder.strategy, ...(spec.builder.config ? { config: spec.builder.config } : {}) }
  let built: { trajectory: Trajectory; late: number }
  try {
    built = state.build
      ? await buildTrajectory(log, request, session, through)
      : { trajectory: reconstructTrajectory([], { ...request, session }), late: 0 }
  } catch (error) {
    if (error instanceof LogReadError) throw error
    return {
      status: 'ERROR',
      metadata: { builder: spec.builder.strategy, session_id: sessionId, task_id: spec.task_id, task_metadata: spec.metadata },
      traces: [],
      error: `trajectory build failed: ${(error as Error).message}`,
    }
  }
  const { trajectory, late } = built
  const status: TrajectoryStatus = state.build ? agentStatus(state) : (state.final_status ?? 'ERROR')
  return {
    ...trajectory,
    status,
    error: status === 'COMPLETED' ? null : (state.error ?? trajectory.error),
    metadata: {
      ...trajectory.metadata,
      agent_result: state.agent_result,
      ...(late ? { late_completions: late } : {}),
    },
  }
}

/** Agent `timeout` → TIMEOUT, `failed` → ERROR (Polar §17); a completed agent → COMPLETED. */
export function agentStatus(state: LifecycleState): TrajectoryStatus {
  switch (state.agent_result?.status) {
    case 'completed':
      return 'COMPLETED'
    case 'timeout':
      return 'TIMEOUT'
    default:
      return 'ERROR'
  }
}

/**
 * Run the evaluator: edge evaluators here, runtime-bound ones came with the runner's report.
 * A runner-side evaluator that did not run (no `eval_result`) or gave no reward at all (null
 * `outcome_reward` and `trace_rewards`) ends the session `ERROR` with the reason: Polar's bridge would
 * read the missing reward as 0.0 and train on it. A trajectory already `TIMEOUT`/`ERROR` keeps its
 * status; the reason is recorded in `metadata.evaluation.error` either way.
 */
export function evaluate(trajectory: Trajectory, state: LifecycleState): Trajectory {
  const evaluator = state.spec.evaluator
  if (!evaluator || !state.build) return trajectory
  if ((EDGE_EVALUATORS as readonly string[]).includes(evaluator.strategy)) {
    const result = { outcome_reward: trajectory.status === 'COMPLETED' ? 1 : 0, trace_rewards: null, metadata: {} }
    return applyEvalResult(trajectory, result, { strategy: evaluator.strategy })
  }
  const reported = state.eval_result
  const missing =
    reported === null
      ? `evaluator ${evaluator.strategy} did not run: the runner reported no eval_result${state.error ? ` (${state.error})` : ''}`
      : reported.outcome_reward === null && reported.trace_rewards === null
        ? `evaluator ${evaluator.strategy} gave no reward (outcome_reward and trace_rewards are null)`
        : null
  if (missing === null && reported !== null) return applyEvalResult(trajectory, reported, { strategy: evaluator.strategy })
  const errorMetadata = { ...(reported?.metadata ?? {}), error: missing }
  const evaluated = applyEvalResult(
    trajectory,
    { outcome_reward: null, trace_rewards: null, metadata: errorMetadata },
    { strategy: evaluator.strategy },
  )
  if (evaluated.status !== 'COMPLETED') return evaluated
  return { ...evaluated, status: 'ERROR', error: missing }
}

export function sessionResult(sessionId: string, trajectory: Trajectory, state: LifecycleState, timing: SessionTiming): SessionResult {
  return toSessionResult(trajectory, {
    session_id: sessionId,
    task_id: state.spec.task_id,
    status: trajectory.status,
    timing,
    node_id: state.runner_id,
    error: trajectory.error,
    metadata: state.spec.metadata,
  })
}
