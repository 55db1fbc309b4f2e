/**
 * @module
 * OpenAI chat → internal chat request. The internal shape *is* OpenAI chat, so this validates and
 * forwards the harness's own object (not the schema's copy), mapping only what engines reject.
 */
import type { ChatMessage, ChatRequest, ParsedRequest, Warning } from '../../types.ts'
import { parseOrThrow } from '../../zod-issues.ts'
import { openaiChatRequestSchema } from './openai-chat-wire.ts'

export function parseOpenaiChatRequest(body: unknown): ParsedRequest {
  const parsed = parseOrThrow(openaiChatRequestSchema, body)
  const original = body as ChatRequest
  const warnings: Warning[] = []
  let messages = original.messages
  if (messages.some((message) => message.role === 'developer')) {
    // Chat templates (Qwen3 included) know no `developer` role; OpenAI defines it as the system role.
    messages = messages.map((message): ChatMessage =>
      message.role === 'developer' ? { ...message, role: 'system' } : message,
    )
    warnings.push({ code: 'developer_role_mapped', message: 'developer messages sent as system messages' })
  }
  const request: ChatRequest = messages === original.messages ? original : { ...original, messages }
  return {
    request,
    warnings,
    stream: parsed.stream === true,
    streamUsage: parsed.stream_options?.include_usage === true,
    modelRequested: parsed.model,
  }
}
