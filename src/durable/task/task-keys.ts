/**
 * @module
 * R2 key layout for rollout results (Polar's `{save_dir}/task_{task_id}/ses_{session_id}.json`):
 *
 *   rollout/task_<task_id>/ses_<session_id>.json   SessionResult of one sample (full, with trajectory)
 *   rollout/task_<task_id>/task_result.json        TaskResult of the task's latest run
 *   rollout/task_<task_id>/run_<run_id>.json       the same, per run (what the trainer callback sends)
 *
 * Task and session ids are restricted to `[A-Za-z0-9_.:@-]` at submission, so they never add path
 * segments; they are still percent-encoded here as a second line of defence.
 */

export const ROLLOUT_KEY_PREFIX = 'rollout/'

export function sessionResultKey(taskId: string, sessionId: string): string {
  return `${ROLLOUT_KEY_PREFIX}task_${encodeURIComponent(taskId)}/ses_${encodeURIComponent(sessionId)}.json`
}

export function taskResultKey(taskId: string): string {
  return `${ROLLOUT_KEY_PREFIX}task_${encodeURIComponent(taskId)}/task_result.json`
}

export function runResultKey(taskId: string, runId: string): string {
  return `${ROLLOUT_KEY_PREFIX}task_${encodeURIComponent(taskId)}/run_${encodeURIComponent(runId)}.json`
}
