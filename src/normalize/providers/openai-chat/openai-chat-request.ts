/**
 * @module
 * OpenAI chat → internal chat request. The internal shape *is* OpenAI chat, so this validates and
 * forwards the harness's own object (not the schema's copy), mapping only what engines reject.
 */
import type { ChatMessage, ChatRequest, ParsedRequest, Warning } from '../../types.ts'
import { parseOrThrow } from '../../zod-issues.ts'
import { requestLooksValid } from './openai-chat-shape.ts'
import { type OpenaiChatRequest, openaiChatRequestSchema } from './openai-chat-wire.ts'

/** The request checked structurally (no copy of its messages), else by the schema, whose issue is the error. */
function validRequest(body: unknown): Pick<OpenaiChatRequest, 'model' | 'stream' | 'stream_options'> {
  return requestLooksValid(body) ? body : parseOrThrow(openaiChatRequestSchema, body)
}

export function parseOpenaiChatRequest(body: unknown): ParsedRequest {
  const parsed = validRequest(body)
  const original = body as ChatRequest
  const warnings: Warning[] = []
  let messages = original.messages
  if (messages.some((message) => message.role === 'developer')) {
    // Chat templates (Qwen3 included) know no `developer` role; OpenAI defines it as the system role.
    messages = messages.map((message): ChatMessage => (message.role === 'developer' ? { ...message, role: 'system' } : message))
    warnings.push({ code: 'developer_role_mapped', message: 'developer messages sent as system messages' })
  }
  const repaired = wrapUnparsableArguments(messages)
  if (repaired !== messages) {
    messages = repaired
    warnings.push({
      code: 'tool_arguments_wrapped',
      message: 'replayed tool-call arguments that are not a JSON object sent as {"raw_input": …}',
    })
  }
  if (messages.some(isTextPartsToolResult)) {
    // Qwen Code sends tool results as text-part arrays. Tool content is a string everywhere else (the other
    // adapters join parts the same way); vLLM joins text parts with `\n` before templating, so the prompt
    // is unchanged.
    messages = messages.map(
      (message): ChatMessage =>
        isTextPartsToolResult(message)
          ? { ...message, content: (message.content as { text: string }[]).map((part) => part.text).join('\n') }
          : message,
    )
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

/**
 * vLLM `json.loads` the arguments of replayed tool calls to render the template, so one call the model
 * once sampled as invalid JSON would turn every later turn into a 400. Such arguments are wrapped as
 * `{"raw_input": "<the text>"}` (slime's convention), empty ones as `{}`; valid ones are left untouched
 * (same array back, so the harness's bytes are still forwarded as they are).
 */
function wrapUnparsableArguments(messages: ChatMessage[]): ChatMessage[] {
  let out: ChatMessage[] | null = null
  messages.forEach((message, index) => {
    if (message.role !== 'assistant' || !Array.isArray(message.tool_calls)) return
    let changed = false
    const calls = (message.tool_calls as { function?: { arguments?: unknown } }[]).map((call) => {
      const args = call.function?.arguments
      if (typeof args !== 'string' || isJsonObject(args)) return call
      changed = true
      const repaired = args.trim() === '' ? '{}' : JSON.stringify({ raw_input: args })
      return { ...call, function: { ...call.function, arguments: repaired } }
    })
    if (!changed) return
    out ??= [...messages]
    out[index] = { ...message, tool_calls: calls }
  })
  return out ?? messages
}

function isJsonObject(text: string): boolean {
  try {
    const value: unknown = JSON.parse(text)
    return value !== null && typeof value === 'object' && !Array.isArray(value)
  } catch {
    return false
  }
}

function isTextPartsToolResult(message: ChatMessage): boolean {
  const { content } = message
  return (
    message.role === 'tool' &&
    Array.isArray(content) &&
    content.length > 0 &&
    content.every((part: { type?: unknown; text?: unknown }) => part.type === 'text' && typeof part.text === 'string')
  )
}
