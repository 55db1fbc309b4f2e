/**
 * @module engine/tokenize
 * vLLM's `/tokenize` and `/detokenize`. Chat form `{messages, tools?, add_generation_prompt?
 * (default true), chat_template_kwargs?}` renders the same template as chat completions, so its
 * `tokens` equal a chat response's `prompt_token_ids`; prompt form `{prompt}` encodes the text.
 * Responses: `{count, max_model_len, tokens, token_strs}` and `{prompt}`.
 */

import { renderChatPrompt } from './chat-generation.ts'
import { checkModel } from './chat-request.ts'
import { isRecord } from './chat-template-input.ts'
import type { EngineContext } from './engine-context.ts'
import { badRequest } from './errors.ts'
import { readBoolean } from './request-fields.ts'

export function handleTokenize(context: EngineContext, body: unknown): string {
  if (!isRecord(body)) throw badRequest('Request body must be a JSON object')
  checkModel(body, context)
  const { qwen3 } = context
  let tokens: number[]
  if (Array.isArray(body.messages)) {
    const kwargs = body.chat_template_kwargs
    if (kwargs !== undefined && kwargs !== null && !isRecord(kwargs)) {
      throw badRequest("'chat_template_kwargs' must be an object", 'chat_template_kwargs')
    }
    const tools = Array.isArray(body.tools) ? body.tools : null
    const { text } = renderChatPrompt(qwen3, body.messages, {
      tools,
      addGenerationPrompt: readBoolean(body, 'add_generation_prompt', true),
      templateKwargs: kwargs ?? null,
    })
    tokens = qwen3.encode(text)
  } else if (typeof body.prompt === 'string') {
    // Qwen has no BOS token, so `add_special_tokens` changes nothing.
    tokens = qwen3.encode(body.prompt)
  } else {
    throw badRequest("Either 'messages' or 'prompt' (string) is required", 'prompt')
  }
  const tokenStrs = readBoolean(body, 'return_token_strs', false) ? tokens.map((id) => qwen3.tokenString(id) ?? '') : null
  return `{"count":${tokens.length},"max_model_len":${context.maxModelLen},"tokens":${JSON.stringify(tokens)},"token_strs":${JSON.stringify(tokenStrs)}}`
}

export function handleDetokenize(context: EngineContext, body: unknown): string {
  if (!isRecord(body)) throw badRequest('Request body must be a JSON object')
  checkModel(body, context)
  const tokens = body.tokens
  if (!Array.isArray(tokens) || !tokens.every((id) => Number.isInteger(id))) {
    throw badRequest("'tokens' must be a list of token ids", 'tokens')
  }
  for (const id of tokens as number[]) {
    if (id < 0 || id >= context.qwen3.vocabSize) throw badRequest(`Token id ${id} is out of vocabulary`, 'tokens')
  }
  return JSON.stringify({ prompt: context.qwen3.decode(tokens as number[]) })
}
