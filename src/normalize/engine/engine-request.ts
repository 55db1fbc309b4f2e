/**
 * @module
 * Turn an internal chat request into the body the engine gets: always non-streaming (vLLM drops
 * token ids in streams, wire-protocols.md §1.3), with the capture parameters each engine kind needs.
 */
import type { UpstreamKind } from '../../contract/completion-record.ts'
import type { ChatRequest } from '../types.ts'

/** Parameters the gateway adds for capture; stripped again when the request is shown as recorded. */
export const ENGINE_CAPTURE_PARAMS: Record<UpstreamKind, Record<string, unknown>> = {
  vllm: { return_token_ids: true, logprobs: true, top_logprobs: 0 },
  sglang: { return_prompt_token_ids: true, return_meta_info: true, return_token_ids: true, logprobs: true },
  openai: {},
}

export interface EngineRequestOptions {
  kind: UpstreamKind
  /** Served model to send instead of the harness's model name; null keeps the harness's. */
  servedModel: string | null
}

/**
 * The engine body. `stream` and `stream_options` are removed; `model` is overridden when a served
 * model is configured; vLLM's reasoning input field is `reasoning` (SGLang reads `reasoning_content`).
 */
export function buildEngineRequest(request: ChatRequest, options: EngineRequestOptions): ChatRequest {
  const { stream: _stream, stream_options: _streamOptions, ...rest } = request
  const body: ChatRequest = { ...rest, ...ENGINE_CAPTURE_PARAMS[options.kind] }
  if (options.servedModel) body.model = options.servedModel
  if (options.kind === 'vllm') body.messages = renameReasoningForVllm(request.messages)
  return body
}

function renameReasoningForVllm(messages: ChatRequest['messages']): ChatRequest['messages'] {
  let changed = false
  const out = messages.map((message) => {
    if (message.role !== 'assistant' || message.reasoning_content == null || 'reasoning' in message) {
      return message
    }
    changed = true
    const { reasoning_content, ...rest } = message
    return { ...rest, reasoning: reasoning_content }
  })
  return changed ? out : messages
}

/**
 * The engine body as text. When the harness already spoke OpenAI chat and nothing in its messages had
 * to change, the body is the harness's own bytes with the overrides appended as trailing keys (JSON
 * parsers — Python's `json`, orjson, `JSON.parse` — keep the last duplicate): no re-serialization of a
 * large body on the hot path, and storage can code it as a tiny delta of the original.
 */
export function engineRequestText(
  engineBody: ChatRequest,
  source: { request: ChatRequest; body: unknown; text: string },
  options: EngineRequestOptions,
): string {
  const untouched = source.request === source.body && engineBody.messages === source.request.messages
  const end = untouched ? source.text.lastIndexOf('}') : -1
  if (end < 0) return JSON.stringify(engineBody)
  const overrides: Record<string, unknown> = { stream: false, ...ENGINE_CAPTURE_PARAMS[options.kind] }
  if ('stream_options' in source.request) overrides.stream_options = null
  if (options.servedModel) overrides.model = options.servedModel
  const appended = JSON.stringify(overrides).slice(1, -1)
  return `${source.text.slice(0, end)},${appended}}`
}

/** The sampling parameters as sent (provenance), without the messages and tools themselves. */
export function samplingParams(body: ChatRequest): Record<string, unknown> {
  const { messages: _messages, tools: _tools, ...params } = body
  return params
}
