/**
 * @module
 * Re-drive a recorded session against an edge: every completion's `original_request` (the harness's body
 * as received) is sent again, in order, with a new session's token, on the API path its record names;
 * then the new captures are compared with the recorded ones token by token. A matching prompt proves
 * the normalization + chat template are deterministic for that traffic; a matching response proves the
 * engine is (same weights, same seed).
 *
 * The new session has new completion ids, so every id the gateway derived from one (`resp_<id>` in
 * `previous_response_id`, the tool-call ids `call_<id>_<i>` / `toolu_…` / `fc_…` / `ctc_…` anywhere in the body)
 * is rewritten to the replayed completion's id: the edge finds a replayed assistant turn's sampled form by
 * those ids (`src/normalize/replay-restore.ts`), and with the recorded session's ids it would find nothing
 * and leave the turn as the harness re-sent it (the Qwen3 template then renders `content\n\n<tool_call>`
 * where the model sampled `content\n<tool_call>`). Ids are not part of the rendered prompt, so the mapping
 * changes no token by itself.
 */
import type { CompletionRecord } from '../../src/contract/completion-record.ts'
import { completionIdOfToolCall } from '../../src/normalize/replay-restore.ts'

export interface ReplayTarget {
  edge: string
  /** The new session's token. */
  token: string
}

export interface TokenDiff {
  seq: number
  api: string
  status: string
  prompt_equal: boolean
  response_equal: boolean
  /** First index where the prompts differ (null when equal). */
  prompt_divergence: number | null
  response_divergence: number | null
  recorded_prompt_tokens: number
  replayed_prompt_tokens: number
  /** Why the prompt differs, as far as the two records show (absent when equal). */
  prompt_cause?: string
  error?: string
}

type RecordLike = Pick<
  CompletionRecord,
  | 'seq'
  | 'api'
  | 'agent'
  | 'stream'
  | 'model_requested'
  | 'original_request'
  | 'prompt_token_ids'
  | 'response_token_ids'
  | 'status'
  | 'completion_id'
> &
  Partial<Pick<CompletionRecord, 'request' | 'warnings'>>

/** The edge path a record's API is served on (Gemini: the model is part of the path). */
export function replayPath(record: RecordLike): string {
  switch (record.api) {
    case 'openai-chat':
      return '/v1/chat/completions'
    case 'openai-responses':
      return '/v1/responses'
    case 'anthropic':
      return '/v1/messages'
    case 'google':
      return `/v1beta/models/${record.model_requested}:${record.stream ? 'streamGenerateContent?alt=sse' : 'generateContent'}`
  }
}

export function firstDivergence(a: readonly number[], b: readonly number[]): number | null {
  const n = Math.min(a.length, b.length)
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return i
  return a.length === b.length ? null : n
}

/** A gateway tool-call id of a recorded completion, renamed to the replayed completion's; any other value as is. */
function mappedToolCallId(value: string, completionIds: ReadonlyMap<string, string>): string {
  const recorded = completionIdOfToolCall(value)
  const replayed = recorded === null ? undefined : completionIds.get(recorded)
  if (recorded === null || replayed === undefined) return value
  // `<prefix>_<completion id>_<index>`: the prefix and index stay, the completion id is swapped.
  const prefix = value.slice(0, value.indexOf('_'))
  return `${prefix}_${replayed}${value.slice(prefix.length + 1 + recorded.length)}`
}

/**
 * `body` with every gateway-derived id of a recorded completion (whole string values only: tool-call ids and
 * `previous_response_id`) renamed through `completionIds` (recorded → replayed completion id). Pure; the
 * same object when nothing was renamed.
 */
export function mapGatewayIds(body: unknown, completionIds: ReadonlyMap<string, string>): unknown {
  if (completionIds.size === 0) return body
  const walk = (value: unknown, key: string | null): unknown => {
    if (typeof value === 'string') {
      if (key === 'previous_response_id' && value.startsWith('resp_')) {
        const mapped = completionIds.get(value.slice(5))
        return mapped ? `resp_${mapped}` : value
      }
      return mappedToolCallId(value, completionIds)
    }
    if (Array.isArray(value)) {
      let out: unknown[] | null = null
      value.forEach((item, i) => {
        const next = walk(item, null)
        if (next === item) return
        out ??= [...value]
        out[i] = next
      })
      return out ?? value
    }
    if (typeof value === 'object' && value !== null) {
      let out: Record<string, unknown> | null = null
      for (const [k, item] of Object.entries(value)) {
        const next = walk(item, k)
        if (next === item) continue
        out ??= { ...(value as Record<string, unknown>) }
        out[k] = next
      }
      return out ?? value
    }
    return value
  }
  return walk(body, null)
}

/**
 * Send one recorded request with the new token, its gateway-derived ids renamed through `completionIds`
 * (recorded completion id → replayed completion id; `mapGatewayIds`), since the new session has new ids.
 */
export async function replayOne(target: ReplayTarget, record: RecordLike, completionIds: Map<string, string>): Promise<Response> {
  const body = mapGatewayIds(record.original_request, completionIds)
  const agent = record.agent && record.agent !== 'main' ? `/a/${encodeURIComponent(record.agent)}` : ''
  return fetch(`${target.edge}/s/${target.token}${agent}${replayPath(record)}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  })
}

const FIELD_ORDER = ['role', 'content', 'tool_calls', 'tool_call_id', 'reasoning_content', 'reasoning', 'name']

/** `message k (role) field f`: the first engine-body message that differs between the two records, or null. */
function firstMessageDifference(recorded: RecordLike, replayed: RecordLike): string | null {
  const a = recorded.request?.messages
  const b = replayed.request?.messages
  if (!Array.isArray(a) || !Array.isArray(b)) return null
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    const left = a[i] as Record<string, unknown> | undefined
    const right = b[i] as Record<string, unknown> | undefined
    if (JSON.stringify(left) === JSON.stringify(right)) continue
    if (!left || !right) return `engine-body message ${i} is ${left ? 'missing from the replay' : 'new in the replay'}`
    const keys = [...new Set([...FIELD_ORDER, ...Object.keys(left), ...Object.keys(right)])]
    const field = keys.find((key) => JSON.stringify(left[key]) !== JSON.stringify(right[key]))
    return `engine-body message ${i} (${String(left.role)}) differs in ${field ?? 'key order'}`
  }
  const tools = JSON.stringify(recorded.request?.tools) !== JSON.stringify(replayed.request?.tools)
  return tools ? 'engine-body tools differ' : null
}

/** The `replay_restored` warning texts of a record, with completion ids masked (they differ by design). */
function restoredTurns(record: RecordLike): string {
  const warning = record.warnings?.find((w) => w.code === 'replay_restored')
  return warning ? warning.message.replace(/(message \d+) \([^()]*\)/g, '$1') : 'none'
}

/**
 * Why a prompt differs, from what the records hold: the first engine-body message and field that differ, a
 * replayed-turn restore that happened on one side only, and the earlier calls the engine answered
 * differently in the replay (the harness's recorded request re-sends the recorded answer, which is then not
 * the replayed session's sample, so the edge leaves that turn as the harness sent it: inherent, not a capture
 * fault).
 */
export function explainPromptDivergence(recorded: RecordLike, replayed: RecordLike, earlierResponseDiffs: readonly number[]): string {
  const parts: string[] = []
  const message = firstMessageDifference(recorded, replayed)
  if (message) parts.push(message)
  const before = restoredTurns(recorded)
  const after = restoredTurns(replayed)
  if (recorded.warnings && replayed.warnings && before !== after) {
    parts.push(`replayed-turn restore differs (recorded: ${before}; replay: ${after})`)
  }
  if (earlierResponseDiffs.length > 0) {
    parts.push(
      `the engine answered call(s) #${earlierResponseDiffs.join(', #')} differently in the replay, and this request re-sends the recorded answer (inherent unless the engine is deterministic)`,
    )
  }
  return parts.length > 0
    ? parts.join('; ')
    : 'same engine body and restores: the tokens differ past the messages (chat template, tokenizer, or an edited record)'
}

export function diffRecords(
  recorded: RecordLike,
  replayed: RecordLike | null,
  error?: string,
  earlierResponseDiffs: readonly number[] = [],
): TokenDiff {
  if (!replayed) {
    return {
      seq: recorded.seq,
      api: recorded.api,
      status: 'missing',
      prompt_equal: false,
      response_equal: false,
      prompt_divergence: 0,
      response_divergence: 0,
      recorded_prompt_tokens: recorded.prompt_token_ids.length,
      replayed_prompt_tokens: 0,
      ...(error ? { error } : {}),
    }
  }
  const prompt = firstDivergence(recorded.prompt_token_ids, replayed.prompt_token_ids)
  const response = firstDivergence(recorded.response_token_ids, replayed.response_token_ids)
  return {
    seq: recorded.seq,
    api: recorded.api,
    status: replayed.status,
    prompt_equal: prompt === null,
    response_equal: response === null,
    prompt_divergence: prompt,
    response_divergence: response,
    recorded_prompt_tokens: recorded.prompt_token_ids.length,
    replayed_prompt_tokens: replayed.prompt_token_ids.length,
    ...(prompt === null ? {} : { prompt_cause: explainPromptDivergence(recorded, replayed, earlierResponseDiffs) }),
    ...(error ? { error } : {}),
  }
}
