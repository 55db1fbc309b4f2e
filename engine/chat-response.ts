/**
 * @module engine/chat-response
 * Non-streaming `chat.completion` bodies with vLLM's field order and nulls (`model_dump()`):
 * top-level `prompt_token_ids`, per-choice `token_ids`, `stop_reason`, `message.reasoning`,
 * hermes-parsed `tool_calls` with `chatcmpl-tool-<hex>` ids. Built by string concatenation so a
 * cached 100k-id prompt is serialized once.
 */

import { randomUUID } from 'node:crypto'
import type { ChatGeneration } from './chat-generation.ts'
import type { ChatRequest } from './chat-request.ts'
import type { ResponseMeta } from './engine-context.ts'
import type { GeneratedChoice } from './generation.ts'
import { chatLogprobContent } from './logprob-format.ts'
import type { Qwen3 } from './qwen3.ts'

export function randomHex(): string {
  return randomUUID().replaceAll('-', '')
}

export function toolCallId(): string {
  return `chatcmpl-tool-${randomHex()}`
}

export function usageJson(promptTokens: number, completionTokens: number, details: boolean): string {
  const usage: Record<string, unknown> = {
    prompt_tokens: promptTokens,
    total_tokens: promptTokens + completionTokens,
    completion_tokens: completionTokens,
  }
  if (details) usage.prompt_tokens_details = null
  return JSON.stringify(usage)
}

function choiceBody(qwen3: Qwen3, choice: GeneratedChoice, request: ChatRequest) {
  const parsed = choice.parsed
  const toolCalls = (parsed?.toolCalls ?? []).map((call) => ({
    id: toolCallId(),
    type: 'function',
    function: { name: call.name, arguments: call.arguments },
  }))
  return {
    index: choice.index,
    message: {
      role: 'assistant',
      content: parsed === null ? choice.text : parsed.content,
      refusal: null,
      annotations: null,
      audio: null,
      function_call: null,
      tool_calls: toolCalls,
      reasoning: request.includeReasoning ? (parsed?.reasoning ?? null) : null,
    },
    logprobs: choice.logprobs === null ? null : { content: chatLogprobContent(qwen3, choice.logprobs, request.returnTokensAsTokenIds) },
    finish_reason: choice.finishReason,
    stop_reason: choice.stopReason,
    token_ids: request.returnTokenIds ? choice.ids : null,
  }
}

export function renderChatCompletion(qwen3: Qwen3, generation: ChatGeneration, request: ChatRequest, meta: ResponseMeta): string {
  const choices = generation.choices.map((choice) => choiceBody(qwen3, choice, request))
  const completionTokens = generation.choices.reduce((sum, choice) => sum + choice.ids.length, 0)
  return (
    `{"id":${JSON.stringify(meta.id)},"object":"chat.completion","created":${meta.created},` +
    `"model":${JSON.stringify(meta.model)},"choices":${JSON.stringify(choices)},` +
    `"service_tier":null,"system_fingerprint":null,` +
    `"usage":${usageJson(generation.prompt.ids.length, completionTokens, true)},` +
    `"prompt_logprobs":null,` +
    `"prompt_token_ids":${request.returnTokenIds ? generation.prompt.json() : 'null'},` +
    `"kv_transfer_params":null}`
  )
}
