/**
 * @module
 * Record → trace extraction (Polar `record_utils.py::build_trace_from_completion`, §16.1) and the
 * trainability filter shared by all builders.
 *
 * Aligned-logprob rule: a completion's logprobs are used only when they align 1:1 with its
 * sampled token ids (same length, every value a finite number); otherwise the trace gets
 * `response_logprobs: null`. Nothing is padded or guessed.
 *
 * Trainability: records with `status !== 'ok'` (abandoned, failed) or `trainable === false` are
 * never turned into tokens. They are not dropped silently: every builder lists them in
 * `metadata.excluded_completions` with a reason and counts them in its stats.
 */
import type { CompletionRecord } from '../contract/completion-record.ts'
import type { ExcludedCompletion, Trace } from '../contract/trajectory.ts'

type JsonObject = Record<string, unknown>

/** The record's logprobs when aligned 1:1 with its sampled ids, else null. */
export function alignedLogprobs(record: CompletionRecord): readonly number[] | null {
  const logprobs = record.response_logprobs
  if (logprobs === null || logprobs.length !== record.response_token_ids.length) return null
  for (const value of logprobs) {
    if (typeof value !== 'number' || !Number.isFinite(value)) return null
  }
  return logprobs
}

/** `request.messages` as sent upstream (Polar's `prompt_messages`). */
export function promptMessages(record: CompletionRecord): JsonObject[] {
  const messages = record.request.messages
  return Array.isArray(messages) ? (messages as JsonObject[]) : []
}

/**
 * How many messages the request holds. A streamed build drops a routed record's messages and keeps
 * their count as `prompt_message_count` (see `src/durable/session/log-records.ts`).
 */
export function promptMessageCount(record: CompletionRecord): number {
  const messages = record.request.messages
  if (Array.isArray(messages)) return messages.length
  const count = (record as { prompt_message_count?: unknown }).prompt_message_count
  return typeof count === 'number' ? count : 0
}

/** `request.tools`, or null when absent or empty-shaped (Polar: `request.tools or None`). */
export function requestTools(record: CompletionRecord): JsonObject[] | null {
  const tools = record.request.tools
  return Array.isArray(tools) && tools.length > 0 ? (tools as JsonObject[]) : null
}

/** The sampled assistant message as a one-element list (empty when the record has none). */
export function responseMessages(record: CompletionRecord): JsonObject[] {
  return record.response_message === null ? [] : [record.response_message as JsonObject]
}

/** Identity keys added to every trace's metadata so each record can be traced back. */
export function recordIdentity(record: CompletionRecord): JsonObject {
  return { completion_id: record.completion_id, seq: record.seq, agent: record.agent }
}

/**
 * One completion as one trace (all response tokens trainable). Token arrays are shared with the
 * record, not copied: treat records and traces as immutable.
 */
export function traceFromRecord(record: CompletionRecord): Trace {
  const responseIds = record.response_token_ids
  return {
    prompt_ids: record.prompt_token_ids,
    response_ids: responseIds,
    loss_mask: new Array<number>(responseIds.length).fill(1),
    prompt_messages: promptMessages(record),
    response_messages: responseMessages(record),
    tools: requestTools(record),
    finish_reason: record.finish_reason,
    response_logprobs: alignedLogprobs(record)?.slice() ?? null,
    reward: null,
    reward_components: {},
    metadata: { ...record.metadata, ...recordIdentity(record) },
  }
}

/** Why a record cannot be trained on, or null when it can. */
export function exclusionReason(record: CompletionRecord): string | null {
  if (record.status !== 'ok') return record.status
  if (!record.trainable) return 'not_trainable'
  return null
}

export function excludedEntry(record: CompletionRecord, reason: string): ExcludedCompletion {
  return {
    completion_id: record.completion_id,
    seq: record.seq,
    agent: record.agent,
    status: record.status,
    reason,
  }
}

/** Arrival order (`seq`, then `completion_id`): Rollgate's authoritative order. */
export function compareBySeq(a: CompletionRecord, b: CompletionRecord): number {
  return a.seq - b.seq || (a.completion_id < b.completion_id ? -1 : a.completion_id > b.completion_id ? 1 : 0)
}

/** Polar's order: `(timestamp, completion_id)` as strings (`CompletionSession` sorting). */
export function compareByTimestamp(a: CompletionRecord, b: CompletionRecord): number {
  if (a.timestamp !== b.timestamp) return a.timestamp < b.timestamp ? -1 : 1
  return a.completion_id < b.completion_id ? -1 : a.completion_id > b.completion_id ? 1 : 0
}

export interface PartitionedRecords {
  /** Trainable records, sorted. */
  trainable: CompletionRecord[]
  /** Everything else, in the same order, with a reason. */
  excluded: ExcludedCompletion[]
}

/** Split records into trainable ones and the explicit exclusion list. */
export function partitionRecords(
  records: readonly CompletionRecord[],
  order: (a: CompletionRecord, b: CompletionRecord) => number = compareBySeq,
): PartitionedRecords {
  const sorted = [...records].sort(order)
  const trainable: CompletionRecord[] = []
  const excluded: ExcludedCompletion[] = []
  for (const record of sorted) {
    const reason = exclusionReason(record)
    if (reason === null) trainable.push(record)
    else excluded.push(excludedEntry(record, reason))
  }
  return { trainable, excluded }
}
