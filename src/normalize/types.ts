/**
 * @module
 * The internal shape every provider adapter speaks: an OpenAI chat-completions request going up, and a
 * normalized engine completion coming back. Pure data; no bindings.
 */
import type { ApiId, ResponseMessage, ToolCall, Warning } from '../contract/completion-record.ts'

export type { ApiId, ResponseMessage, ToolCall, Warning }

/** An OpenAI chat message as sent upstream (lenient: harness-specific extras ride along). */
export interface ChatMessage {
  role: string
  content?: unknown
  [key: string]: unknown
}

/** OpenAI chat-completions request as the engine receives it (before engine capture params). */
export interface ChatRequest {
  model: string
  messages: ChatMessage[]
  tools?: unknown[]
  [key: string]: unknown
}

export type FinishReasonUnified = 'stop' | 'length' | 'tool-calls' | 'content-filter' | 'error' | 'other'

export interface FinishReason {
  unified: FinishReasonUnified
  /** What the engine said (`stop`, `length`, `tool_calls`, …). */
  raw: string | null
}

export interface Usage {
  inputTokens: number
  cachedInputTokens: number
  outputTokens: number
  reasoningTokens: number | null
}

/**
 * One sampled completion, normalized from a vLLM / SGLang / OpenAI chat response. Token data is kept
 * exactly as the engine returned it; `null` token arrays mean the engine gave none (text-only upstream).
 */
export interface Completion {
  id: string
  created: number
  /** Model the engine reports (the served model). */
  model: string
  message: ResponseMessage
  finishReason: FinishReason
  /** vLLM `stop_reason`: the matched stop string or token id; null for EOS. */
  stopReason: string | number | null
  usage: Usage
  promptTokenIds: number[] | null
  /**
   * The prompt ids as the engine's JSON text of the array in UTF-8 bytes, not parsed yet (`prompt-ids-text.ts`):
   * set only when `promptTokenIds` is null because the ids were left for the session to parse against its
   * last prompt.
   */
  promptTokenText?: Uint8Array
  responseTokenIds: number[] | null
  /** Aligned 1:1 with `responseTokenIds`, else null. */
  responseLogprobs: number[] | null
  /** Engine-reported logprobs mode when known. */
  logprobsMode: string | null
}

/** What the harness asked for, beyond the chat request itself. */
export interface ParsedRequest {
  request: ChatRequest
  warnings: Warning[]
  /** The harness wants a (synthetic) event stream back. */
  stream: boolean
  /** Include a usage chunk / usage data in the stream (OpenAI `stream_options.include_usage`). */
  streamUsage: boolean
  modelRequested: string
  /**
   * Adapter-private facts the answer needs that are not in the chat request (e.g. which Responses tools
   * are custom tools, what to echo back). The pipeline copies it into `ResponseContext.responseOptions`
   * untouched; only the adapter that produced it reads it.
   */
  responseOptions?: Record<string, unknown>
}

/**
 * Body for the engine's `POST /tokenize` in vLLM's chat form: answers count-tokens calls exactly and
 * cheaply (docs/wire-protocols.md §5.4). Never a generation, never recorded.
 */
export interface TokenizeRequest {
  model: string
  messages: ChatMessage[]
  tools?: unknown[]
  add_generation_prompt: true
  chat_template_kwargs?: Record<string, unknown>
}

/** A failure to answer, in provider-neutral terms; adapters render it in their own wire shape. */
export interface NormalizedError {
  status: number
  kind:
    | 'invalid_request'
    | 'authentication'
    | 'permission'
    | 'not_found'
    | 'request_too_large'
    | 'rate_limit'
    | 'overloaded'
    | 'timeout'
    | 'upstream'
    | 'internal'
  message: string
  /** Which field was wrong, when known. */
  param?: string | null
}
