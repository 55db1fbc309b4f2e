/**
 * @module
 * Turn an internal chat request into the body the engine gets: always non-streaming (vLLM drops
 * token ids in streams, docs/wire-protocols.md §1), with the capture parameters each engine kind needs.
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
  /** The engine's context window, when known: output budgets that cannot fit are clamped. */
  maxModelLen?: number | null
  /** Size of the harness's body in characters: an upper bound for the prompt's token count × 3. */
  promptChars?: number
}

/** Output-budget fields harnesses send (Claude Code asks for up to 128k, more than many engines hold). */
const OUTPUT_BUDGET_KEYS = ['max_tokens', 'max_completion_tokens'] as const
/** Never clamp below this: a prompt leaving less room is the engine's to refuse. */
const MIN_OUTPUT_TOKENS = 256
/** Characters per token assumed when bounding the prompt (code and JSON run ~3–4; lower is safer). */
const CHARS_PER_TOKEN_FLOOR = 3
/** Tokens the chat template adds that are not in the body (role markers, the tools preamble). */
const TEMPLATE_OVERHEAD_TOKENS = 1024

/**
 * vLLM refuses `prompt + max_tokens > max_model_len` with a 400, which harnesses asking for huge budgets
 * then retry forever. Clamp the budget to what can fit, bounding the prompt from above by its size.
 */
function clampOutputBudget(body: ChatRequest, options: EngineRequestOptions): void {
  if (!options.maxModelLen || options.promptChars === undefined) return
  const promptBound = Math.ceil(options.promptChars / CHARS_PER_TOKEN_FLOOR) + TEMPLATE_OVERHEAD_TOKENS
  const room = Math.max(MIN_OUTPUT_TOKENS, options.maxModelLen - promptBound)
  for (const key of OUTPUT_BUDGET_KEYS) {
    const value = body[key]
    if (typeof value === 'number' && value > room) body[key] = room
  }
}

/**
 * The `max_tokens_clamped` warning for the budgets the engine body changed, naming each one's requested and
 * clamped value (`max_tokens 128000 → 32100`); null when nothing was clamped.
 */
export function clampWarning(
  request: ChatRequest,
  engineBody: ChatRequest,
  maxModelLen: number | null,
): { code: 'max_tokens_clamped'; message: string } | null {
  const changes = Object.entries(clampedBudgets(request, engineBody)).map(
    ([key, value]) => `${key} ${String(request[key as keyof ChatRequest])} → ${String(value)}`,
  )
  if (changes.length === 0) return null
  return {
    code: 'max_tokens_clamped',
    message: `output budget clamped to fit the engine's ${maxModelLen}-token window: ${changes.join(', ')}`,
  }
}

/** Output-budget fields the engine body changed, with their new values (for the splice and warnings). */
export function clampedBudgets(request: ChatRequest, engineBody: ChatRequest): Record<string, unknown> {
  const changed: Record<string, unknown> = {}
  for (const key of OUTPUT_BUDGET_KEYS) if (engineBody[key] !== request[key]) changed[key] = engineBody[key]
  return changed
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
  clampOutputBudget(body, options)
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
  return engineRequestSplice(engineBody, source, options).text
}

/**
 * `engineRequestText`, saying how the text was made: `splice` when it is the harness's text cut at `at`
 * with `insert` appended (its delta to the original is known, no diff of two large strings needed),
 * null when the body had to be re-serialized.
 */
export function engineRequestSplice(
  engineBody: ChatRequest,
  source: { request: ChatRequest; body: unknown; text: string },
  options: EngineRequestOptions,
): { text: string; splice: { at: number; insert: string } | null } {
  const untouched = source.request === source.body && engineBody.messages === source.request.messages
  const end = untouched ? source.text.lastIndexOf('}') : -1
  if (end < 0) return { text: JSON.stringify(engineBody), splice: null }
  const overrides: Record<string, unknown> = {
    stream: false,
    ...ENGINE_CAPTURE_PARAMS[options.kind],
    ...clampedBudgets(source.request, engineBody),
  }
  if ('stream_options' in source.request) overrides.stream_options = null
  if (options.servedModel) overrides.model = options.servedModel
  const insert = `,${JSON.stringify(overrides).slice(1, -1)}}`
  return { text: source.text.slice(0, end) + insert, splice: { at: end, insert } }
}

/** The sampling parameters as sent (provenance), without the messages and tools themselves. */
export function samplingParams(body: ChatRequest): Record<string, unknown> {
  const { messages: _messages, tools: _tools, ...params } = body
  return params
}
