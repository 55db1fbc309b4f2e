/**
 * @module
 * Reward attachment (Polar `node.py::_merge_eval_result`, §17). Pure: returns a new trajectory.
 * - `trace_rewards` given: exactly one entry per trace, else the trajectory becomes `ERROR` with a
 *   clear error and no reward is assigned;
 * - otherwise a non-null `outcome_reward` is broadcast to every trace;
 * - `metadata.evaluation = {strategy, outcome_reward, trace_rewards, ...eval metadata}`;
 * - `reward_components` (an evaluator that scores by components) are copied to every trace's
 *   `reward_components` and recorded in `metadata.evaluation.reward_components`; without them
 *   traces keep `{}`.
 */
import type { EvalResult, Trajectory } from '../contract/trajectory.ts'

export interface ApplyEvalOptions {
  /** Evaluator strategy name recorded in `metadata.evaluation.strategy`. */
  strategy?: string | null
}

export function applyEvalResult(trajectory: Trajectory, evalResult: EvalResult, options: ApplyEvalOptions = {}): Trajectory {
  const evaluation = {
    strategy: options.strategy ?? null,
    outcome_reward: evalResult.outcome_reward,
    trace_rewards: evalResult.trace_rewards,
    ...evalResult.metadata,
    ...(evalResult.reward_components ? { reward_components: evalResult.reward_components } : {}),
  }
  const metadata = { ...trajectory.metadata, evaluation }
  const components = evalResult.reward_components ?? null
  const withComponents = (trace: Trajectory['traces'][number]) =>
    components === null ? trace : { ...trace, reward_components: { ...components } }
  const traceRewards = evalResult.trace_rewards
  if (traceRewards !== null) {
    if (traceRewards.length !== trajectory.traces.length) {
      return {
        ...trajectory,
        metadata,
        status: 'ERROR',
        error: `evaluator returned ${traceRewards.length} trace_rewards but trajectory has ` + `${trajectory.traces.length} traces`,
      }
    }
    return {
      ...trajectory,
      metadata,
      traces: trajectory.traces.map((trace, index) => ({
        ...withComponents(trace),
        reward: traceRewards[index] ?? null,
      })),
    }
  }
  const outcome = evalResult.outcome_reward
  if (outcome !== null && trajectory.traces.length > 0) {
    return {
      ...trajectory,
      metadata,
      traces: trajectory.traces.map((trace) => ({ ...withComponents(trace), reward: outcome })),
    }
  }
  return { ...trajectory, metadata, traces: trajectory.traces.map(withComponents) }
}
