/**
 * @module
 * Whether a runner can take a task's sessions, said where the trainer looks: in the submit answer (a task is
 * accepted either way, a runner may connect later) and in task status while the task has unfinished sessions
 * (`GET /rollout/task/:id` `warnings`, gone once a runner that takes work is connected). The reasons: the
 * runner API is disabled (no `ROLLGATE_RUNNER_TOKEN`), or no connected runner accepts work.
 */
import type { RunnerInfo } from '../../contract/rollout.ts'
import type { SubmitWarning } from './evaluator-warnings.ts'

/** Why no runner takes work now (code and the first half of the message), or null when one does. */
function noRunner(runnerApiEnabled: boolean, runners: readonly RunnerInfo[]): { code: string; detail: string } | null {
  if (!runnerApiEnabled) return { code: 'runner_api_disabled', detail: 'the runner API is disabled (ROLLGATE_RUNNER_TOKEN is not set)' }
  if (runners.some((runner) => runner.connected && !runner.draining)) return null
  const draining = runners.filter((runner) => runner.connected && runner.draining).length
  return {
    code: 'no_runner_connected',
    detail: draining > 0 ? `no runner connected that takes work (${draining} draining)` : 'no runner connected',
  }
}

/** At submit: the task's sessions will wait. */
export function runnerWarnings(runnerApiEnabled: boolean, runners: readonly RunnerInfo[], timeoutSeconds: number): SubmitWarning[] {
  const why = noRunner(runnerApiEnabled, runners)
  if (!why) return []
  const wait = `its sessions wait in REGISTERED and end TIMEOUT after timeout_seconds (${timeoutSeconds} s) unless one connects`
  return [{ code: why.code, message: `${why.detail}: ${wait}` }]
}

/**
 * In task status: the task has `unfinished` sessions and no runner would take them now. (The task's own
 * session list moves only as sessions resolve, so unfinished is what it knows; a session that has not
 * started cannot start, and one whose runner left cannot be re-dispatched.)
 */
export function waitingSessionWarnings(runnerApiEnabled: boolean, runners: readonly RunnerInfo[], unfinished: number): SubmitWarning[] {
  if (unfinished === 0) return []
  const why = noRunner(runnerApiEnabled, runners)
  if (!why) return []
  const sessions = unfinished === 1 ? '1 unfinished session' : `${unfinished} unfinished sessions`
  return [
    {
      code: why.code,
      message: `${why.detail}: ${sessions} cannot start until one connects (sessions in REGISTERED end TIMEOUT at timeout_seconds)`,
    },
  ]
}
