/**
 * @module
 * OpenAI chat-completions adapter (`POST /v1/chat/completions`): qwen-code, opencode (openai-compatible),
 * pi (`openai-completions`), and the `openai` SDK.
 */
import type { ProviderAdapter } from '../../adapter.ts'
import { buildOpenaiChatError } from './openai-chat-error.ts'
import { parseOpenaiChatRequest } from './openai-chat-request.ts'
import { buildOpenaiChatResponse } from './openai-chat-response.ts'
import { createOpenaiChatStreamEncoder } from './openai-chat-stream.ts'

export const openaiChat: ProviderAdapter = {
  id: 'openai-chat',
  matches: (url) => url.pathname.endsWith('/chat/completions'),
  parseRequest: (body) => parseOpenaiChatRequest(body),
  buildResponse: buildOpenaiChatResponse,
  createStreamEncoder: createOpenaiChatStreamEncoder,
  buildError: buildOpenaiChatError,
}
