/**
 * @module
 * Trajectory-level metadata shared by both builders (Polar §16.2): `builder, session_id, task_id,
 * api_type, model_requested, model_used, record_count, task_metadata, trace_count`, plus
 * `group_id`, `policy_version`, `rollout_step` lifted from the task metadata when present, and
 * Rollgate's `capture_timing` (from the log: first call start, last call end, model time).
 */
import { type CompletionRecord, POLAR_API_TYPE } from '../contract/completion-record.ts'

/** Session facts the caller knows better than the records (Polar's `CompletionSession`). */
export interface SessionInfo {
  session_id?: string | null
  task_id?: string | null
  /** Task metadata (`TaskRequest.metadata`). */
  metadata?: Record<string, unknown>
}

/** Keys Polar lifts from the task metadata to the top level (`_top_level_scheduler_metadata`). */
export const SCHEDULER_KEYS = ['group_id', 'policy_version', 'rollout_step'] as const

export function schedulerMetadata(taskMetadata: Record<string, unknown>): Record<string, unknown> {
  const lifted: Record<string, unknown> = {}
  for (const key of SCHEDULER_KEYS) {
    if (key in taskMetadata) lifted[key] = taskMetadata[key]
  }
  return lifted
}

function firstNonEmpty(records: readonly CompletionRecord[], pick: (r: CompletionRecord) => string) {
  for (const record of records) {
    const value = pick(record)
    if (value) return value
  }
  return null
}

/**
 * Without `session.metadata`, the task metadata is recovered from the first record's metadata
 * (Polar stores session metadata + `session_id` + `task_id` on every record).
 */
export function resolveSession(records: readonly CompletionRecord[], session: SessionInfo | undefined) {
  const first = records[0]
  const recordMetadata = first?.metadata ?? {}
  const taskMetadata: Record<string, unknown> = session?.metadata
    ? { ...session.metadata }
    : Object.fromEntries(Object.entries(recordMetadata).filter(([key]) => key !== 'session_id' && key !== 'task_id'))
  const recordTaskId = recordMetadata.task_id
  return {
    session_id: session?.session_id ?? first?.session_id ?? null,
    task_id: session?.task_id ?? (typeof recordTaskId === 'string' ? recordTaskId : null),
    task_metadata: taskMetadata,
  }
}

/**
 * When the session's model calls happened, from the records' own timing: `first_completion_at`
 * (earliest call start), `last_completion_at` (latest call end = start + total), `wall_ms` between
 * them, `model_ms` (summed engine time) and `completions`. Null without records.
 */
export function captureTiming(records: readonly CompletionRecord[]) {
  let first = Number.POSITIVE_INFINITY
  let last = Number.NEGATIVE_INFINITY
  let modelMs = 0
  for (const record of records) {
    if (record.timing === undefined) continue
    const start = Date.parse(record.timing.started_at)
    if (!Number.isFinite(start)) continue
    first = Math.min(first, start)
    last = Math.max(last, start + Math.max(0, record.timing.total_ms))
    modelMs += Math.max(0, record.timing.upstream_ms)
  }
  if (!Number.isFinite(first)) return null
  return {
    first_completion_at: new Date(first).toISOString(),
    last_completion_at: new Date(last).toISOString(),
    wall_ms: last - first,
    model_ms: Math.round(modelMs * 1000) / 1000,
    completions: records.length,
  }
}

/** Polar's trajectory metadata, in Polar's key order. */
export function trajectoryMetadata(
  builder: string,
  records: readonly CompletionRecord[],
  session: SessionInfo | undefined,
  traceCount: number,
): Record<string, unknown> {
  const resolved = resolveSession(records, session)
  const api = firstNonEmpty(records, (r) => r.api)
  return {
    builder,
    session_id: resolved.session_id,
    task_id: resolved.task_id,
    api_type: api === null ? null : (POLAR_API_TYPE[api as keyof typeof POLAR_API_TYPE] ?? api),
    model_requested: firstNonEmpty(records, (r) => r.model_requested),
    model_used: firstNonEmpty(records, (r) => r.model_used),
    record_count: records.length,
    task_metadata: resolved.task_metadata,
    trace_count: traceCount,
    ...schedulerMetadata(resolved.task_metadata),
    capture_timing: captureTiming(records),
  }
}

/**
 * The two merge ratios of `reconstruction_stats` (docs/harness-matrix.md):
 * - `merged_turn_ratio`: continued turns ÷ trainable completions. At most (n−1)/n for a session that is one
 *   trace (its first turn is never "continued"), so it can never reach 1.
 * - `mergeable_merged_ratio`: continued turns ÷ mergeable turns, where a mergeable turn is every turn after the
 *   first of its conversation (agent branch or side call: every turn but the root of a chain). 1 when every
 *   conversation is one trace; 1 also when nothing was mergeable.
 */
export function mergeRatios(completions: number, roots: number, continued: number) {
  const mergeable = Math.max(0, completions - roots)
  return {
    turns_mergeable: mergeable,
    merged_turn_ratio: completions === 0 ? 0 : continued / completions,
    mergeable_merged_ratio: mergeable === 0 ? 1 : continued / mergeable,
  }
}
