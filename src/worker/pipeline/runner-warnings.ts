/**
 * @module
 * Submit-time check that a runner can take the task's sessions. A task is accepted either way (a runner may
 * connect later), but the submitter is told when its sessions will wait in REGISTERED: the runner API is
 * disabled (no `ROLLGATE_RUNNER_TOKEN`), or no connected runner accepts work.
 */
import type { RunnerInfo } from '../../contract/rollout.ts'
import type { SubmitWarning } from './evaluator-warnings.ts'

export function runnerWarnings(runnerApiEnabled: boolean, runners: readonly RunnerInfo[], timeoutSeconds: number): SubmitWarning[] {
  const wait = `its sessions wait in REGISTERED and end TIMEOUT after timeout_seconds (${timeoutSeconds} s) unless one connects`
  if (!runnerApiEnabled) {
    return [{ code: 'runner_api_disabled', message: `the runner API is disabled (ROLLGATE_RUNNER_TOKEN is not set): ${wait}` }]
  }
  if (runners.some((runner) => runner.connected && !runner.draining)) return []
  const draining = runners.filter((runner) => runner.connected && runner.draining).length
  const detail = draining > 0 ? `no runner connected that takes work (${draining} draining)` : 'no runner connected'
  return [{ code: 'no_runner_connected', message: `${detail}: ${wait}` }]
}
