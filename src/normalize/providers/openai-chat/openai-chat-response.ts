/**
 * @module
 * Completion → OpenAI `chat.completion`. Engine token fields (`prompt_token_ids`, `token_ids`,
 * logprobs) stay in the record and never reach the harness (Polar limitation 11).
 */
import type { ResponseContext } from '../../adapter.ts'
import type { Completion, ResponseMessage } from '../../types.ts'
import { chatToolCallId } from './openai-chat-ids.ts'

export function openaiChatId(completionId: string): string {
  return `chatcmpl-${completionId}`
}

export function openaiChatUsage(completion: Completion) {
  const { usage } = completion
  return {
    prompt_tokens: usage.inputTokens,
    completion_tokens: usage.outputTokens,
    total_tokens: usage.inputTokens + usage.outputTokens,
    ...(usage.cachedInputTokens > 0 ? { prompt_tokens_details: { cached_tokens: usage.cachedInputTokens } } : {}),
  }
}

/** The tool calls as the harness sees them: the engine's ids replaced by self-describing ones. */
export function openaiChatToolCalls(message: ResponseMessage, completionId: string) {
  return (message.tool_calls ?? []).map((call, index) => ({ ...call, id: chatToolCallId(completionId, index) }))
}

export function openaiChatMessage(message: ResponseMessage, completionId: string) {
  return {
    role: 'assistant' as const,
    content: message.content,
    ...(message.reasoning_content ? { reasoning_content: message.reasoning_content } : {}),
    ...(message.tool_calls?.length ? { tool_calls: openaiChatToolCalls(message, completionId) } : {}),
  }
}

export function buildOpenaiChatResponse(completion: Completion, context: ResponseContext) {
  return {
    id: openaiChatId(context.completionId),
    object: 'chat.completion',
    created: context.created,
    model: context.modelRequested,
    choices: [
      {
        index: 0,
        message: openaiChatMessage(completion.message, context.completionId),
        logprobs: null,
        finish_reason: completion.finishReason.raw ?? 'stop',
      },
    ],
    usage: openaiChatUsage(completion),
  }
}
