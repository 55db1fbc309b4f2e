/**
 * @module engine/output-parser
 * Splits sampled text the way vLLM does with `--reasoning-parser qwen3` and
 * `--tool-call-parser hermes`: reasoning is the text inside `<think>…</think>`, content what
 * follows, and tool calls are `<tool_call>\n{"name": …, "arguments": {…}}\n</tool_call>` blocks
 * (arguments re-serialized with Python's `json.dumps`). Character offsets are kept so the
 * streaming encoder can attribute every token to reasoning, content or a tool call.
 */

import { isRecord } from './chat-template-input.ts'
import { pythonJsonDumps } from './python-json.ts'

const THINK_OPEN = '<think>'
const THINK_CLOSE = '</think>'
const TOOL_CALL_OPEN = '<tool_call>'
const TOOL_CALL_BLOCK = /<tool_call>([\s\S]*?)<\/tool_call>|<tool_call>([\s\S]*)/g

export interface TextRange {
  start: number
  end: number
}

export interface ParsedToolCall {
  name: string
  /** JSON string, Python separators (what vLLM returns). */
  arguments: string
  /** Offsets of the whole `<tool_call>…</tool_call>` block in the text. */
  range: TextRange
}

export interface ParsedOutput {
  /** Text inside `<think>…</think>` (verbatim, newlines included), `null` without a think block. */
  reasoning: string | null
  reasoningRange: TextRange | null
  /** Text after reasoning, before the first tool call; `null` when empty (or blank next to tool calls). */
  content: string | null
  contentRange: TextRange | null
  toolCalls: ParsedToolCall[]
}

export interface ParseOptions {
  /** Run the hermes tool parser (vLLM: request has tools and `tool_choice` is not `none`). */
  parseToolCalls: boolean
}

export function parseAssistantOutput(text: string, options: ParseOptions): ParsedOutput {
  let reasoning: string | null = null
  let reasoningRange: TextRange | null = null
  let contentStart = 0
  const closeAt = text.indexOf(THINK_CLOSE)
  const openAt = text.indexOf(THINK_OPEN)
  if (closeAt >= 0) {
    const start = openAt >= 0 && openAt < closeAt ? openAt + THINK_OPEN.length : 0
    reasoningRange = { start, end: closeAt }
    contentStart = closeAt + THINK_CLOSE.length
  } else if (openAt >= 0) {
    // Still thinking when generation stopped (e.g. max_tokens): everything is reasoning.
    reasoningRange = { start: openAt + THINK_OPEN.length, end: text.length }
    contentStart = text.length
  }
  if (reasoningRange !== null) reasoning = text.slice(reasoningRange.start, reasoningRange.end)

  let contentEnd = text.length
  const toolCalls = options.parseToolCalls ? parseToolCalls(text, contentStart) : []
  const firstCall = toolCalls[0]
  if (firstCall !== undefined) contentEnd = firstCall.range.start
  let content: string | null = text.slice(contentStart, contentEnd)
  let contentRange: TextRange | null = { start: contentStart, end: contentEnd }
  if (content === '' || (toolCalls.length > 0 && content.trim() === '')) {
    content = null
    contentRange = null
  }
  return { reasoning, reasoningRange, content, contentRange, toolCalls }
}

/** All blocks or nothing: one unparsable block makes vLLM's hermes parser return plain content. */
function parseToolCalls(text: string, from: number): ParsedToolCall[] {
  if (text.indexOf(TOOL_CALL_OPEN, from) < 0) return []
  const calls: ParsedToolCall[] = []
  TOOL_CALL_BLOCK.lastIndex = from
  for (let match = TOOL_CALL_BLOCK.exec(text); match !== null; match = TOOL_CALL_BLOCK.exec(text)) {
    const body = (match[1] ?? match[2] ?? '').trim()
    let parsed: unknown
    try {
      parsed = JSON.parse(body)
    } catch {
      return []
    }
    if (!isRecord(parsed) || typeof parsed.name !== 'string' || !('arguments' in parsed)) return []
    calls.push({
      name: parsed.name,
      arguments: pythonJsonDumps(parsed.arguments),
      range: { start: match.index, end: match.index + match[0].length },
    })
  }
  return calls
}
