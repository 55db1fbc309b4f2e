/**
 * @module
 * Re-drive a recorded session against an edge: every completion's `original_request` (the harness's body
 * as received) is sent again, in order, with a new session's token, on the API path its record names;
 * then the new captures are compared with the recorded ones token by token. A matching prompt proves
 * the normalization + chat template are deterministic for that traffic; a matching response proves the
 * engine is (same weights, same seed).
 */
import type { CompletionRecord } from '../../src/contract/completion-record.ts'

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
>

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

/**
 * Send one recorded request with the new token. `previous_response_id` values are rewritten through
 * `responseIds` (recorded completion id → replayed completion id), since the new session has new ids.
 */
export async function replayOne(target: ReplayTarget, record: RecordLike, completionIds: Map<string, string>): Promise<Response> {
  let body = record.original_request as Record<string, unknown>
  const previous = typeof body?.previous_response_id === 'string' ? body.previous_response_id : null
  if (previous?.startsWith('resp_')) {
    const mapped = completionIds.get(previous.slice(5))
    if (mapped) body = { ...body, previous_response_id: `resp_${mapped}` }
  }
  const agent = record.agent && record.agent !== 'main' ? `/a/${encodeURIComponent(record.agent)}` : ''
  return fetch(`${target.edge}/s/${target.token}${agent}${replayPath(record)}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  })
}

export function diffRecords(recorded: RecordLike, replayed: RecordLike | null, error?: string): TokenDiff {
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
    ...(error ? { error } : {}),
  }
}
