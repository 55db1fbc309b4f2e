/**
 * @module
 * The completion record as the edge serves it (`GET /v1/sessions/:id/completions`) and as
 * reconstruction, exports and the runner consume it. Runtime-neutral: no bindings, no hono.
 *
 * Field names follow Polar's CompletionRecord where one exists (`completion_id`, `request`,
 * `original_request`, `metadata`), flattened so token data needs no engine-specific digging.
 */
import { z } from 'zod'

/** The provider wire format a harness spoke for this completion. */
export const apiIdSchema = z.enum(['openai-chat', 'anthropic', 'openai-responses', 'google'])
export type ApiId = z.infer<typeof apiIdSchema>

/** Polar's names for the same APIs (`api_type` in trajectory metadata). */
export const POLAR_API_TYPE: Record<ApiId, string> = {
  'openai-chat': 'openai_chat',
  anthropic: 'anthropic',
  'openai-responses': 'openai_responses',
  google: 'google',
}

export const upstreamKindSchema = z.enum(['vllm', 'sglang', 'openai'])
export type UpstreamKind = z.infer<typeof upstreamKindSchema>

/**
 * `ok`: answered and trainable when token ids are present.
 * `abandoned`: the client disconnected before the answer; kept for audit, never trainable.
 * `failed`: the upstream failed; kept for audit, never trainable.
 */
export const completionStatusSchema = z.enum(['ok', 'abandoned', 'failed'])
export type CompletionStatus = z.infer<typeof completionStatusSchema>

export const toolCallSchema = z.looseObject({
  id: z.string(),
  type: z.literal('function'),
  function: z.object({ name: z.string(), arguments: z.string() }),
})
export type ToolCall = z.infer<typeof toolCallSchema>

/** The sampled assistant message, OpenAI chat shape; `reasoning_content` is the canonical reasoning field. */
export const responseMessageSchema = z.looseObject({
  role: z.literal('assistant'),
  content: z.string().nullable(),
  reasoning_content: z.string().nullable().optional(),
  tool_calls: z.array(toolCallSchema).optional(),
})
export type ResponseMessage = z.infer<typeof responseMessageSchema>

export const warningSchema = z.object({ code: z.string(), message: z.string() })
export type Warning = z.infer<typeof warningSchema>

export const completionTimingSchema = z.object({
  /** ISO-8601 time the edge received the request. */
  started_at: z.string(),
  /** Milliseconds spent waiting for the upstream. */
  upstream_ms: z.number(),
  /** Milliseconds from receipt to the record being committed. */
  total_ms: z.number(),
})

export const provenanceSchema = z.object({
  upstream_kind: upstreamKindSchema,
  upstream_url: z.string(),
  /** Sampling parameters exactly as sent upstream (engine capture params included). */
  sampling_params: z.record(z.string(), z.unknown()),
  /** `raw_logprobs` / `processed_logprobs` when the engine says so; null when unknown. */
  logprobs_mode: z.string().nullable(),
  policy_version: z.union([z.string(), z.number()]).nullable(),
  /** Where the call went: `direct` or `runner:<id>` for tunnelled calls. */
  route: z.string(),
})

export const completionRecordSchema = z.object({
  completion_id: z.string(),
  session_id: z.string(),
  /** 0-based arrival order within the session. */
  seq: z.number().int().nonnegative(),
  timestamp: z.string(),
  api: apiIdSchema,
  /** Agent label (`x-rollgate-agent` or `/s/<token>/a/<agent>/…`); `main` when absent. */
  agent: z.string(),
  model_requested: z.string(),
  model_used: z.string(),
  stream: z.boolean(),
  status: completionStatusSchema,
  /** True when the record carries aligned sampled token ids (and the status is `ok`). */
  trainable: z.boolean(),
  prompt_token_ids: z.array(z.number().int()),
  /**
   * How storage delta-coded this prompt: it equals the prompt of completion `parent_seq` for the first
   * `shared_prefix_len` tokens (then diverges or ends). Null when stored whole. Lets reconstruction
   * check prefix continuity in O(1) instead of comparing whole prompts (linear merging).
   */
  prompt_delta: z.object({ parent_seq: z.number().int().nonnegative(), shared_prefix_len: z.number().int().nonnegative() }).nullable(),
  response_token_ids: z.array(z.number().int()),
  /** Aligned 1:1 with `response_token_ids`, or null when the engine gave none that align. */
  response_logprobs: z.array(z.number()).nullable(),
  finish_reason: z.string().nullable(),
  /** vLLM `stop_reason`: the matched stop string / token id, null for EOS. */
  stop_reason: z.union([z.string(), z.number()]).nullable(),
  /** Normalized OpenAI-chat request as sent upstream, minus engine capture params. */
  request: z.record(z.string(), z.unknown()),
  response_message: responseMessageSchema.nullable(),
  /** The harness's raw body. */
  original_request: z.unknown(),
  usage: z.record(z.string(), z.unknown()).nullable(),
  warnings: z.array(warningSchema),
  error: z.string().nullable(),
  timing: completionTimingSchema,
  provenance: provenanceSchema,
  metadata: z.record(z.string(), z.unknown()),
})
export type CompletionRecord = z.infer<typeof completionRecordSchema>
