/**
 * @module
 * Completion → OpenAI `chat.completion`. Engine token fields (`prompt_token_ids`, `token_ids`,
 * logprobs) stay in the record and never reach the harness (Polar limitation 11).
 */
import type { ResponseContext } from '../../adapter.ts'
import type { Completion, ResponseMessage } from '../../types.ts'

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

export function openaiChatMessage(message: ResponseMessage) {
  return {
    role: 'assistant' as const,
    content: message.content,
    ...(message.reasoning_content ? { reasoning_content: message.reasoning_content } : {}),
    ...(message.tool_calls?.length ? { tool_calls: message.tool_calls } : {}),
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
        message: openaiChatMessage(completion.message),
        logprobs: null,
        finish_reason: completion.finishReason.raw ?? 'stop',
      },
    ],
    usage: openaiChatUsage(completion),
  }
}
