/**
 * @module
 * Synthetic OpenAI chat SSE (docs/wire-protocols.md §2): role chunk, reasoning / content / tool-call
 * deltas, finish chunk, optional usage chunk, `data: [DONE]`.
 */
import type { ResponseContext, StreamEncoder } from '../../adapter.ts'
import { sseComment, sseData } from '../../sse.ts'
import type { Completion } from '../../types.ts'
import { buildOpenaiChatError } from './openai-chat-error.ts'
import { openaiChatId, openaiChatToolCalls, openaiChatUsage } from './openai-chat-response.ts'

export function createOpenaiChatStreamEncoder(context: ResponseContext): StreamEncoder {
  const id = openaiChatId(context.completionId)
  const chunk = (delta: Record<string, unknown>, finishReason: string | null = null) =>
    sseData({
      id,
      object: 'chat.completion.chunk',
      created: context.created,
      model: context.modelRequested,
      choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason }],
    })

  return {
    start: () => '',
    heartbeat: () => sseComment('keep-alive'),
    completion(completion: Completion) {
      const { message } = completion
      let out = chunk({ role: 'assistant', content: '' })
      if (message.reasoning_content) out += chunk({ reasoning_content: message.reasoning_content })
      if (message.content) out += chunk({ content: message.content })
      openaiChatToolCalls(message, context.completionId).forEach((call, index) => {
        out += chunk({
          tool_calls: [{ index, id: call.id, type: 'function', function: { name: call.function.name, arguments: '' } }],
        })
        if (call.function.arguments) {
          out += chunk({ tool_calls: [{ index, function: { arguments: call.function.arguments } }] })
        }
      })
      out += chunk({}, completion.finishReason.raw ?? 'stop')
      if (context.streamUsage) {
        out += sseData({
          id,
          object: 'chat.completion.chunk',
          created: context.created,
          model: context.modelRequested,
          choices: [],
          usage: openaiChatUsage(completion),
        })
      }
      return out + sseData('[DONE]')
    },
    error(error) {
      return sseData(buildOpenaiChatError(error).body) + sseData('[DONE]')
    },
  }
}
