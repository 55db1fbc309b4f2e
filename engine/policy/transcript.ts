/**
 * @module engine/policy/transcript
 * Reads an agent conversation back as a list of steps: each tool call the assistant made, paired
 * with the result the harness sent back (by `tool_call_id`, else in order). Results are flattened
 * to plain text: harnesses that wrap tool output in JSON (Gemini CLI's `{"output": …}`) are
 * unwrapped so line-based reading works the same everywhere.
 */

import { isRecord, type TemplateMessage } from '../chat-template-input.ts'
import { isToolResponseText } from './instruction.ts'

export interface TranscriptStep {
  name: string
  args: Record<string, unknown>
  /** Flattened result text; `null` while no result has come back. */
  result: string | null
}

export function readTranscript(messages: readonly TemplateMessage[]): TranscriptStep[] {
  const steps: TranscriptStep[] = []
  const byId = new Map<string, TranscriptStep>()
  for (const message of messages) {
    if (message.role === 'assistant') {
      for (const call of message.tool_calls ?? []) {
        const step: TranscriptStep = { name: call.function.name, args: parseArgs(call.function.arguments), result: null }
        steps.push(step)
        if (call.id !== undefined) byId.set(call.id, step)
      }
      continue
    }
    const isResult = message.role === 'tool' || (message.role === 'user' && isToolResponseText(message.content))
    if (!isResult) continue
    const target =
      (message.tool_call_id !== undefined ? byId.get(message.tool_call_id) : undefined) ?? steps.find((step) => step.result === null)
    if (target !== undefined && target.result === null) target.result = flattenResult(unwrapToolResponse(message.content))
  }
  return steps
}

function parseArgs(raw: unknown): Record<string, unknown> {
  if (isRecord(raw)) return raw
  if (typeof raw === 'string') {
    try {
      const parsed: unknown = JSON.parse(raw)
      return isRecord(parsed) ? parsed : {}
    } catch {
      return {}
    }
  }
  return {}
}

function unwrapToolResponse(content: string): string {
  const trimmed = content.trim()
  return isToolResponseText(trimmed) ? trimmed.slice('<tool_response>'.length, -'</tool_response>'.length).trim() : content
}

/** A JSON-wrapped result becomes its string leaves joined by newlines; anything else stays as it is. */
export function flattenResult(content: string): string {
  const trimmed = content.trim()
  if (!trimmed.startsWith('{') && !trimmed.startsWith('[')) return content
  try {
    const leaves: string[] = []
    collectStrings(JSON.parse(trimmed), leaves)
    return leaves.length > 0 ? leaves.join('\n') : content
  } catch {
    return content
  }
}

function collectStrings(value: unknown, into: string[]) {
  if (typeof value === 'string') into.push(value)
  else if (typeof value === 'number' || typeof value === 'boolean') into.push(String(value))
  else if (Array.isArray(value)) for (const item of value) collectStrings(item, into)
  else if (isRecord(value)) for (const item of Object.values(value)) collectStrings(item, into)
}
