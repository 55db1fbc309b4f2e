/**
 * @module
 * Completion → Anthropic `message` (non-streaming). Content order: thinking (signature carries the
 * reasoning, see `anthropic-ids.ts`), text, one `tool_use` per call; an empty answer is one empty text
 * block. Usage splits cached input out: `input_tokens` = prompt − cached (docs/wire-protocols.md §4).
 */
import type { ResponseContext } from '../../adapter.ts'
import type { Completion } from '../../types.ts'
import { anthropicMessageId, anthropicToolUseId, encodeThinkingSignature } from './anthropic-ids.ts'
import { mapAnthropicStopReason } from './map-anthropic-stop-reason.ts'

export type AnthropicResponseBlock =
  | { type: 'thinking'; thinking: string; signature: string }
  | { type: 'text'; text: string }
  | { type: 'tool_use'; id: string; name: string; input: Record<string, unknown> }

/** A tool call's arguments as an Anthropic `input` object, and the JSON text streamed for it. */
export interface ToolInput {
  input: Record<string, unknown>
  /** The engine's own argument bytes when they are a JSON object, so streams replay them exactly. */
  json: string
}

export function anthropicToolInput(argumentsText: string): ToolInput {
  if (!argumentsText.trim()) return { input: {}, json: '{}' }
  try {
    const parsed: unknown = JSON.parse(argumentsText)
    if (parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed)) {
      return { input: parsed as Record<string, unknown>, json: argumentsText }
    }
  } catch {
    // Not JSON: keep the sampled text visible to the harness (slime's fallback).
  }
  const input = { raw_input: argumentsText }
  return { input, json: JSON.stringify(input) }
}

export interface AnthropicBlockPlan {
  block: AnthropicResponseBlock
  /** For tool_use: the streamed `partial_json`. */
  json?: string
}

export function anthropicBlockPlan(completion: Completion, completionId: string): AnthropicBlockPlan[] {
  const { message } = completion
  const plan: AnthropicBlockPlan[] = []
  if (message.reasoning_content) {
    const thinking = message.reasoning_content
    plan.push({ block: { type: 'thinking', thinking, signature: encodeThinkingSignature(completionId, thinking) } })
  }
  if (message.content) plan.push({ block: { type: 'text', text: message.content } })
  message.tool_calls?.forEach((call, index) => {
    const { input, json } = anthropicToolInput(call.function.arguments)
    plan.push({
      block: { type: 'tool_use', id: anthropicToolUseId(completionId, index), name: call.function.name, input },
      json,
    })
  })
  if (plan.length === 0) plan.push({ block: { type: 'text', text: '' } })
  return plan
}

export function anthropicUsage(completion: Completion) {
  const { usage } = completion
  const cached = Math.min(usage.cachedInputTokens, usage.inputTokens)
  return {
    input_tokens: usage.inputTokens - cached,
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: cached,
    output_tokens: usage.outputTokens,
  }
}

export function buildAnthropicResponse(completion: Completion, context: ResponseContext) {
  const { stopReason, stopSequence } = mapAnthropicStopReason(completion)
  return {
    id: anthropicMessageId(context.completionId),
    type: 'message' as const,
    role: 'assistant' as const,
    model: context.modelRequested,
    content: anthropicBlockPlan(completion, context.completionId).map((entry) => entry.block),
    stop_reason: stopReason,
    stop_sequence: stopSequence,
    usage: anthropicUsage(completion),
  }
}
