/**
 * @module
 * Submit-time check that someone can run a task's evaluator. `session_completed` runs on the edge;
 * every other strategy runs on the runner after the agent exits. A connected, non-draining runner
 * that reported it in `register.evaluators` offers it; a runner that reported nothing is unknown.
 * When none offers it the task is still accepted (a runner may connect later), with a warning: a
 * session whose evaluator then does not run ends `ERROR`, never with a silent zero reward.
 */
import { EDGE_EVALUATORS, type RunnerInfo, type TaskRequest } from '../../contract/rollout.ts'

export interface SubmitWarning {
  code: string
  message: string
}

export function evaluatorWarnings(task: Pick<TaskRequest, 'evaluator'>, runners: readonly RunnerInfo[]): SubmitWarning[] {
  const strategy = task.evaluator?.strategy
  if (!strategy || (EDGE_EVALUATORS as readonly string[]).includes(strategy)) return []
  const live = runners.filter((runner) => runner.connected && !runner.draining)
  if (live.some((runner) => runner.evaluators?.includes(strategy))) return []
  const silent = live.filter((runner) => runner.evaluators === null).length
  const detail =
    live.length === 0
      ? 'no runner is connected'
      : silent > 0
        ? `no connected runner reports it (${silent} of ${live.length} report no evaluator list)`
        : 'no connected runner offers it'
  return [
    {
      code: 'evaluator_not_offered',
      message:
        `evaluator ${strategy} runs on a runner and ${detail}; sessions whose evaluator does not run end ERROR ` +
        '(masked for training) instead of getting a reward',
    },
  ]
}
