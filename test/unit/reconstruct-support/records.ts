/**
 * @module
 * Test helpers: build complete `CompletionRecord`s from token ids, and attach `prompt_delta` the
 * way storage would (longest common prefix against a chosen parent).
 */
import type { CompletionRecord } from '../../../src/contract/completion-record.ts'

export interface RecordSpec {
  seq: number
  prompt: number[]
  response: number[]
  logprobs?: number[] | null
  finish?: string | null
  agent?: string
  status?: CompletionRecord['status']
  trainable?: boolean
  messages?: Record<string, unknown>[]
  tools?: Record<string, unknown>[] | null
  responseMessage?: CompletionRecord['response_message']
  upstream?: CompletionRecord['provenance']['upstream_kind']
  metadata?: Record<string, unknown>
  id?: string
  stopReason?: string | number | null
}

/** Deterministic fake logprob for a token at a position (distinct per record and position). */
export function fakeLogprob(seq: number, position: number): number {
  return -((seq * 1000 + position) % 997) / 100 - 0.01
}

export function makeRecord(spec: RecordSpec): CompletionRecord {
  const logprobs = spec.logprobs === undefined ? spec.response.map((_, i) => fakeLogprob(spec.seq, i)) : spec.logprobs
  const request: Record<string, unknown> = {
    model: 'qwen3',
    messages: spec.messages ?? [{ role: 'user', content: `turn ${spec.seq}` }],
  }
  if (spec.tools !== null) {
    request.tools = spec.tools ?? [{ type: 'function', function: { name: 'bash', parameters: {} } }]
  }
  return {
    completion_id: spec.id ?? `msg_${String(spec.seq).padStart(12, '0')}`,
    session_id: 'sess-1',
    seq: spec.seq,
    timestamp: new Date(Date.UTC(2026, 0, 1, 0, 0, spec.seq)).toISOString(),
    api: 'openai-chat',
    agent: spec.agent ?? 'main',
    model_requested: 'qwen3',
    model_used: 'Qwen/Qwen3-8B',
    stream: false,
    status: spec.status ?? 'ok',
    trainable: spec.trainable ?? true,
    prompt_token_ids: spec.prompt,
    prompt_delta: null,
    response_token_ids: spec.response,
    response_logprobs: logprobs,
    finish_reason: spec.finish === undefined ? 'stop' : spec.finish,
    stop_reason: spec.stopReason ?? null,
    request,
    response_message: spec.responseMessage === undefined ? { role: 'assistant', content: `answer ${spec.seq}` } : spec.responseMessage,
    original_request: {},
    usage: null,
    warnings: [],
    error: null,
    timing: { started_at: '2026-01-01T00:00:00.000Z', upstream_ms: 1, total_ms: 2 },
    provenance: {
      upstream_kind: spec.upstream ?? 'vllm',
      upstream_url: 'http://engine.test',
      sampling_params: {},
      logprobs_mode: null,
      policy_version: null,
      route: 'direct',
    },
    metadata: spec.metadata ?? { task_id: 'task-1', session_id: 'sess-1' },
  }
}

function lcp(a: readonly number[], b: readonly number[]): number {
  const n = Math.min(a.length, b.length)
  let i = 0
  while (i < n && a[i] === b[i]) i++
  return i
}

/**
 * Attach `prompt_delta` against an explicit parent (by seq) per record, with the true longest
 * common prefix. `parents[seq] === undefined` → `prompt_delta: null`.
 */
export function withDeltas(records: CompletionRecord[], parents: Record<number, number | undefined>): CompletionRecord[] {
  const bySeq = new Map(records.map((record) => [record.seq, record]))
  return records.map((record) => {
    const parentSeq = parents[record.seq]
    const parent = parentSeq === undefined ? undefined : bySeq.get(parentSeq)
    if (parent === undefined) return record
    return {
      ...record,
      prompt_delta: {
        parent_seq: parent.seq,
        shared_prefix_len: lcp(parent.prompt_token_ids, record.prompt_token_ids),
      },
    }
  })
}

/** Delta against the earlier record sharing the longest prefix (a storage's best choice). */
export function withBestDeltas(records: CompletionRecord[]): CompletionRecord[] {
  const parents: Record<number, number | undefined> = {}
  records.forEach((record, index) => {
    let best = -1
    let bestSeq: number | undefined
    for (const earlier of records.slice(0, index)) {
      const shared = lcp(earlier.prompt_token_ids, record.prompt_token_ids)
      if (shared > best) {
        best = shared
        bestSeq = earlier.seq
      }
    }
    parents[record.seq] = bestSeq
  })
  return withDeltas(records, parents)
}

/** Delta against the previous record in arrival order (a naive storage). */
export function withPreviousDeltas(records: CompletionRecord[]): CompletionRecord[] {
  const parents: Record<number, number | undefined> = {}
  records.forEach((record, index) => {
    parents[record.seq] = records[index - 1]?.seq
  })
  return withDeltas(records, parents)
}
