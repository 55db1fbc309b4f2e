/**
 * @module engine/chat-request
 * Validates a `POST /v1/chat/completions` body into the options the engine honours
 * (vLLM `ChatCompletionRequest`, `vllm/entrypoints/openai/chat_completion/protocol.py`).
 */

import { type ChatMessage, isRecord } from './chat-template-input.ts'
import type { EngineContext } from './engine-context.ts'
import { badRequest, EngineError } from './errors.ts'
import { toResponseFormat } from './policy/assistant-text.ts'
import type { ResponseFormat } from './policy/policy.ts'
import { MAX_TOP_LOGPROBS, readBoolean, readInteger, readSamplingFields, type SamplingFields } from './request-fields.ts'

export interface ChatRequest extends SamplingFields {
  messages: ChatMessage[]
  tools: unknown[] | null
  /** vLLM runs the tool parser when tools are given and `tool_choice` is not `none`. */
  parseToolCalls: boolean
  logprobs: boolean
  topLogprobs: number
  templateKwargs: Record<string, unknown> | null
  enableThinking: boolean
  addGenerationPrompt: boolean
  includeReasoning: boolean
  responseFormat: ResponseFormat | null
}

export function parseChatRequest(body: unknown, context: EngineContext): ChatRequest {
  if (!isRecord(body)) throw badRequest('Request body must be a JSON object')
  checkModel(body, context)
  if (!Array.isArray(body.messages)) {
    throw badRequest("Field required: 'messages' must be a list of messages", 'messages')
  }
  const tools = body.tools === undefined || body.tools === null ? null : body.tools
  if (tools !== null && !Array.isArray(tools)) throw badRequest("'tools' must be a list", 'tools')
  const templateKwargs = body.chat_template_kwargs
  if (templateKwargs !== undefined && templateKwargs !== null && !isRecord(templateKwargs)) {
    throw badRequest("'chat_template_kwargs' must be an object", 'chat_template_kwargs')
  }
  const logprobs = readBoolean(body, 'logprobs', false)
  const topLogprobs = readInteger(body, 'top_logprobs', { min: 0, max: MAX_TOP_LOGPROBS }) ?? 0
  if (topLogprobs > 0 && !logprobs) {
    throw badRequest('when using `top_logprobs`, `logprobs` must be set to true.', 'top_logprobs')
  }
  const toolChoice = body.tool_choice ?? (tools !== null && tools.length > 0 ? 'auto' : 'none')
  return {
    ...readSamplingFields(body),
    messages: body.messages as ChatMessage[],
    tools,
    parseToolCalls: tools !== null && tools.length > 0 && toolChoice !== 'none',
    logprobs,
    topLogprobs,
    templateKwargs: templateKwargs ?? null,
    enableThinking: templateKwargs?.enable_thinking !== false,
    addGenerationPrompt: readBoolean(body, 'add_generation_prompt', true),
    includeReasoning: readBoolean(body, 'include_reasoning', true),
    responseFormat: toResponseFormat(body.response_format),
  }
}

export function checkModel(body: Record<string, unknown>, context: EngineContext): void {
  const model = body.model
  if (context.acceptAnyModel || model === undefined || model === null || model === '') return
  if (model !== context.servedModel) {
    throw new EngineError(404, `The model \`${String(model)}\` does not exist.`, {
      type: 'NotFoundError',
      param: 'model',
    })
  }
}
