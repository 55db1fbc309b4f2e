/**
 * @module
 * Polar wire results: `SessionResult` (per session, what a gateway node POSTs to the rollout
 * server) and `TaskResult` (per task, what the rollout server returns / POSTs to the trainer).
 * Output is validated against `src/contract/trajectory.ts`, so it parses with Polar's models.
 */
import {
  type SessionResult,
  type SessionStatus,
  type SessionTiming,
  sessionResultSchema,
  TERMINAL_SESSION_STATUSES,
  type TaskResult,
  type TaskStatusValue,
  type Trajectory,
  taskResultSchema,
} from '../../contract/trajectory.ts'

export interface SessionResultOptions {
  session_id?: string
  task_id?: string
  /** Defaults to the trajectory status (`COMPLETED` / `ERROR` / `TIMEOUT`). */
  status?: SessionStatus
  /** Rollout sessions pass their lifecycle timing; otherwise `run_ms` is the span of the model calls. */
  timing?: Partial<SessionTiming>
  /** The runner that ran a rollout session; null for a session outside a task (no runner ran it). */
  node_id?: string | null
  error?: string | null
  /** Session metadata; defaults to the trajectory's `task_metadata`. */
  metadata?: Record<string, unknown>
}

/**
 * `task_id` of a session created without one (`POST /v1/sessions` without `task_id`): Polar's `SessionResult`
 * requires a string, so exports of bare sessions carry this placeholder (the edge and the offline script alike).
 */
export const UNKNOWN_TASK_ID = 'unknown-task'

function stringOrNull(value: unknown): string | null {
  return typeof value === 'string' ? value : null
}

/**
 * A session outside a task has no lifecycle stages: its `run_ms` is the span of its model calls
 * (`metadata.capture_timing.wall_ms`, first call start to last call end); the other stages are 0.
 */
function timingFromCapture(capture: unknown): Partial<SessionTiming> {
  const wall = (capture as { wall_ms?: unknown } | null | undefined)?.wall_ms
  return typeof wall === 'number' && Number.isFinite(wall) ? { run_ms: wall } : {}
}

export function toSessionResult(trajectory: Trajectory, options: SessionResultOptions = {}): SessionResult {
  const meta = trajectory.metadata
  const sessionId = options.session_id ?? stringOrNull(meta.session_id)
  const taskId = options.task_id ?? stringOrNull(meta.task_id) ?? UNKNOWN_TASK_ID
  if (sessionId === null) throw new Error('toSessionResult: session_id unknown (pass it in options)')
  const taskMetadata = meta.task_metadata
  return sessionResultSchema.parse({
    session_id: sessionId,
    task_id: taskId,
    status: options.status ?? trajectory.status,
    trajectory,
    timing: options.timing ?? timingFromCapture(meta.capture_timing),
    node_id: options.node_id ?? null,
    error: options.error ?? trajectory.error,
    metadata: options.metadata ?? (taskMetadata !== null && typeof taskMetadata === 'object' ? taskMetadata : {}),
  })
}

/**
 * Task status: `running` while any session is not terminal, `failed` when every session ended in
 * `ERROR`/`TIMEOUT` (or there are none), else `completed`. (Polar only documents the vocabulary;
 * this mapping is Rollgate's.)
 */
export function taskStatusOf(results: readonly Pick<SessionResult, 'status'>[]): TaskStatusValue {
  if (results.some((result) => !TERMINAL_SESSION_STATUSES.includes(result.status))) return 'running'
  if (results.every((result) => result.status !== 'COMPLETED')) return 'failed'
  return 'completed'
}

export function toTaskResult(
  taskId: string,
  results: readonly SessionResult[],
  options: { result_paths?: string[]; status?: TaskStatusValue } = {},
): TaskResult {
  return taskResultSchema.parse({
    task_id: taskId,
    status: options.status ?? taskStatusOf(results),
    results,
    result_paths: options.result_paths ?? [],
  })
}
