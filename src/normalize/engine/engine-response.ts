/**
 * @module
 * Normalize a vLLM / SGLang / OpenAI chat-completions response into a `Completion`, keeping token ids
 * and logprobs exactly as sampled. Polar's rules (`docs/polar-compat.md` §10): logprobs are kept only
 * when they align 1:1 with the sampled ids; otherwise null, never padded.
 */
import type { Completion, FinishReason, FinishReasonUnified, ResponseMessage, ToolCall, Usage } from '../types.ts'

export class EngineResponseError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'EngineResponseError'
  }
}

type Json = Record<string, unknown>

const asObject = (value: unknown): Json | null =>
  value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Json) : null

function intArray(value: unknown): number[] | null {
  if (!Array.isArray(value)) return null
  for (const item of value) if (!Number.isInteger(item)) return null
  return value as number[]
}

export function mapChatFinishReason(raw: string | null): FinishReasonUnified {
  switch (raw) {
    case 'stop':
    case 'stop_sequence':
      return 'stop'
    case 'length':
      return 'length'
    case 'tool_calls':
    case 'function_call':
      return 'tool-calls'
    case 'content_filter':
      return 'content-filter'
    case 'abort':
    case 'error':
      return 'error'
    default:
      return 'other'
  }
}

/** Sampled ids of choice 0: vLLM `choice.token_ids`, else SGLang `meta_info.output_token_logprobs`. */
function sampledTokens(choice: Json): { ids: number[] | null; sglangLogprobs: number[] | null } {
  const ids = intArray(choice.token_ids)
  const meta = asObject(choice.meta_info)
  const pairs = meta?.output_token_logprobs
  if (Array.isArray(pairs)) {
    const metaIds: number[] = []
    const metaLogprobs: number[] = []
    for (const pair of pairs) {
      if (!Array.isArray(pair) || typeof pair[0] !== 'number' || !Number.isInteger(pair[1])) {
        return { ids, sglangLogprobs: null }
      }
      metaLogprobs.push(pair[0])
      metaIds.push(pair[1] as number)
    }
    if (ids === null) return { ids: metaIds, sglangLogprobs: metaLogprobs }
    if (metaIds.length === ids.length && metaIds.every((id, i) => id === ids[i])) {
      return { ids, sglangLogprobs: metaLogprobs }
    }
  }
  return { ids, sglangLogprobs: null }
}

function alignedLogprobs(choice: Json, ids: number[] | null, sglang: number[] | null): number[] | null {
  if (ids === null) return null
  const content = asObject(choice.logprobs)?.content
  if (Array.isArray(content) && content.length === ids.length) {
    const out = new Array<number>(content.length)
    for (let i = 0; i < content.length; i++) {
      const entry = content[i] as Json | null
      const logprob = entry?.logprob
      if (typeof logprob !== 'number') return sglang
      const tokenId = entry?.token_id
      if (tokenId !== undefined && tokenId !== ids[i]) return sglang
      out[i] = logprob
    }
    return out
  }
  return sglang !== null && sglang.length === ids.length ? sglang : null
}

function toolCalls(value: unknown): ToolCall[] | undefined {
  if (!Array.isArray(value) || value.length === 0) return undefined
  return value.map((raw, index) => {
    const call = asObject(raw) ?? {}
    const fn = asObject(call.function) ?? {}
    const args = fn.arguments
    return {
      id: typeof call.id === 'string' && call.id ? call.id : `call_${index}`,
      type: 'function' as const,
      function: {
        name: typeof fn.name === 'string' ? fn.name : '',
        arguments: typeof args === 'string' ? args : JSON.stringify(args ?? {}),
      },
    }
  })
}

function usageOf(value: unknown, promptIds: number[] | null, responseIds: number[] | null): Usage {
  const usage = asObject(value) ?? {}
  const num = (v: unknown, fallback: number) => (typeof v === 'number' ? v : fallback)
  const promptDetails = asObject(usage.prompt_tokens_details)
  const completionDetails = asObject(usage.completion_tokens_details)
  return {
    inputTokens: num(usage.prompt_tokens, promptIds?.length ?? 0),
    cachedInputTokens: num(promptDetails?.cached_tokens, 0),
    outputTokens: num(usage.completion_tokens, responseIds?.length ?? 0),
    reasoningTokens: typeof completionDetails?.reasoning_tokens === 'number' ? completionDetails.reasoning_tokens : null,
  }
}

/**
 * Parse the engine's JSON body (already decoded) into a `Completion`. `promptIdsBytes`: the prompt ids were
 * cut out of the answer's bytes unparsed (`parseEngineAnswerBytes`); they travel as those UTF-8 bytes.
 */
export function parseEngineResponse(json: unknown, promptIdsBytes: Uint8Array | null = null): Completion {
  const body = asObject(json)
  if (!body) throw new EngineResponseError('engine response is not a JSON object')
  const choice = Array.isArray(body.choices) ? asObject(body.choices[0]) : null
  if (!choice) throw new EngineResponseError('engine response has no choices[0]')
  const rawMessage = asObject(choice.message)
  if (!rawMessage) throw new EngineResponseError('engine response choice has no message')

  const promptTokenIds =
    promptIdsBytes === null
      ? (intArray(choice.input_token_ids) ?? intArray(choice.prompt_token_ids) ?? intArray(body.prompt_token_ids))
      : null
  const { ids: responseTokenIds, sglangLogprobs } = sampledTokens(choice)
  const responseLogprobs = alignedLogprobs(choice, responseTokenIds, sglangLogprobs)

  const reasoning = rawMessage.reasoning ?? rawMessage.reasoning_content
  const message: ResponseMessage = {
    role: 'assistant',
    content: typeof rawMessage.content === 'string' ? rawMessage.content : null,
  }
  if (typeof reasoning === 'string' && reasoning.length > 0) message.reasoning_content = reasoning
  const calls = toolCalls(rawMessage.tool_calls)
  if (calls) message.tool_calls = calls

  const rawFinish = typeof choice.finish_reason === 'string' ? choice.finish_reason : null
  const finishReason: FinishReason = { unified: mapChatFinishReason(rawFinish), raw: rawFinish }
  const stopReason = choice.stop_reason
  return {
    id: typeof body.id === 'string' ? body.id : 'chatcmpl-unknown',
    created: typeof body.created === 'number' ? body.created : Math.floor(Date.now() / 1000),
    model: typeof body.model === 'string' ? body.model : '',
    message,
    finishReason,
    stopReason: typeof stopReason === 'string' || typeof stopReason === 'number' ? stopReason : null,
    usage: usageOf(body.usage, promptTokenIds, responseTokenIds),
    promptTokenIds,
    ...(promptIdsBytes === null ? {} : { promptTokenText: promptIdsBytes }),
    responseTokenIds,
    responseLogprobs,
    logprobsMode: typeof body.logprobs_mode === 'string' ? body.logprobs_mode : null,
  }
}
