/**
 * @module
 * Warnings collected while normalizing a request (lossy mappings), deduplicated, recorded with the
 * completion. Also the `/tokenize` body built from a converted prompt (count_tokens routes).
 */
import type { ChatMessage, TokenizeRequest, Warning } from './types.ts'

export class Warnings {
  readonly list: Warning[] = []
  add(code: string, message: string) {
    if (!this.list.some((warning) => warning.code === code && warning.message === message)) {
      this.list.push({ code, message })
    }
  }
}

/** The engine `/tokenize` body for a prompt an adapter converted (never a generation). */
export function tokenizeRequestFor(
  model: string,
  prompt: { messages: ChatMessage[]; tools?: unknown[]; chat_template_kwargs?: Record<string, unknown> },
): TokenizeRequest {
  const out: TokenizeRequest = { model, messages: prompt.messages, add_generation_prompt: true }
  if (prompt.tools) out.tools = prompt.tools
  if (prompt.chat_template_kwargs) out.chat_template_kwargs = prompt.chat_template_kwargs
  return out
}
