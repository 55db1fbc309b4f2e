/**
 * @module
 * What the edge hands the session to record (`CompletionInput`), and the persisted session config.
 * The served shape is `CompletionRecord` in `src/contract/completion-record.ts`.
 */
import type { ApiId, CompletionStatus, ResponseMessage, UpstreamKind, Warning } from '../../contract/completion-record.ts'
import type { TextDelta } from './text-delta.ts'

export interface CompletionInput {
  completion_id: string
  timestamp: string
  api: ApiId
  agent: string
  model_requested: string
  model_used: string
  stream: boolean
  status: CompletionStatus
  prompt_token_ids: Uint32Array | null
  /**
   * The prompt ids as the engine's JSON text of the array (UTF-8 bytes: a string is encoded first), when
   * the edge left them unparsed: the session parses only what differs from its previous prompt
   * (`prompt-ids.ts`) and holds the bytes, off the V8 heap. `prompt_token_ids` is then null.
   */
  prompt_token_text?: Uint8Array | string | null
  response_token_ids: Uint32Array | null
  response_logprobs: Float64Array | null
  finish_reason: string | null
  stop_reason: string | number | null
  /** The body sent upstream, as sent (JSON text); empty when `request_delta` carries it. */
  request_text: string
  /**
   * The body sent upstream as a delta of `original_text` (the edge appends its capture keys to the harness's
   * own bytes): the RPC then carries a large body once, not twice.
   */
  request_delta?: TextDelta | null
  /** The harness's raw body (JSON text). */
  original_text: string
  response_message: ResponseMessage | null
  usage: Record<string, unknown> | null
  warnings: Warning[]
  error: string | null
  timing: { started_at: string; upstream_ms: number; total_ms: number }
  provenance: {
    upstream_kind: UpstreamKind
    upstream_url: string
    sampling_params: Record<string, unknown>
    logprobs_mode: string | null
    policy_version: string | number | null
    route: string
  }
  metadata: Record<string, unknown>
}

export interface UpstreamConfig {
  url: string
  kind: UpstreamKind
  /** Model name sent upstream; null passes the harness's model through. */
  served_model: string | null
  /** The engine's context window (vLLM `/v1/models` `max_model_len`); output budgets are clamped to fit. */
  max_model_len?: number | null
}

export interface SessionConfig {
  session_id: string
  task_id: string | null
  created_at: string
  upstream: UpstreamConfig
  policy_version: string | number | null
  metadata: Record<string, unknown>
}
