/**
 * @module engine/policy/assistant-text
 * Formats assistant turns exactly as the Qwen3 chat template re-renders them, so a policy's
 * sampled text and the next turn's prompt agree token for token (unless drift is on):
 * `<think>\n{reasoning}\n</think>\n\n{content}\n<tool_call>\n{"name": …, "arguments": …}\n</tool_call>`.
 */

import { isRecord } from '../chat-template-input.ts'
import { pythonJsonDumps } from '../python-json.ts'
import type { JsonSchema, ResponseFormat, ToolSpec } from './policy.ts'

export interface AssistantTurn {
  enableThinking: boolean
  reasoning?: string | undefined
  content?: string | undefined
  toolCalls?: Array<{ name: string; arguments: unknown }> | undefined
}

export function thinkBlock(reasoning: string): string {
  return `<think>\n${reasoning}\n</think>\n\n`
}

export function toolCallBlock(name: string, args: unknown): string {
  return `<tool_call>\n{"name": "${name}", "arguments": ${pythonJsonDumps(args)}}\n</tool_call>`
}

export function assistantText(turn: AssistantTurn): string {
  const content = turn.content ?? ''
  const calls = (turn.toolCalls ?? []).map((call) => toolCallBlock(call.name, call.arguments))
  const head = turn.enableThinking ? thinkBlock(turn.reasoning ?? '') : ''
  const separator = content !== '' && calls.length > 0 ? '\n' : ''
  return `${head}${content}${separator}${calls.join('\n')}`
}

/** Reduces request tools (chat nested, flat Responses-style, custom) to {@link ToolSpec}s. */
export function toToolSpecs(tools: readonly unknown[] | null | undefined): ToolSpec[] {
  const specs: ToolSpec[] = []
  for (const tool of tools ?? []) {
    if (!isRecord(tool)) continue
    const source = isRecord(tool.function) ? tool.function : isRecord(tool.custom) ? tool.custom : tool
    if (typeof source.name !== 'string') continue
    const schema = source.parameters ?? source.input_schema ?? source.parametersJsonSchema ?? source.inputSchema
    const freeform = tool.type === 'custom' || (!isRecord(schema) && isRecord(source.format))
    specs.push({
      name: source.name,
      description: typeof source.description === 'string' ? source.description : '',
      parameters: isRecord(schema) ? schema : null,
      freeform,
    })
  }
  return specs
}

export function toResponseFormat(raw: unknown): ResponseFormat | null {
  if (!isRecord(raw)) return null
  if (raw.type === 'json_object') return { type: 'json_object', schema: null }
  if (raw.type === 'json_schema') {
    const wrapper = isRecord(raw.json_schema) ? raw.json_schema : raw
    const schema = wrapper.schema ?? wrapper.json_schema
    return { type: 'json_schema', schema: isRecord(schema) ? (schema as JsonSchema) : null }
  }
  return raw.type === 'text' ? { type: 'text', schema: null } : null
}
