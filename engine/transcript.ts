/**
 * @module engine/transcript
 * Recovers a conversation from a rendered Qwen3 prompt, so token-in `/v1/completions` requests
 * (`prompt: int[]` from a capturing proxy) still get a meaningful policy answer. Only needs to be
 * good enough for the policies: roles, text, tools, tool calls, tool results, thinking switch.
 */

import { isRecord, type TemplateMessage } from './chat-template-input.ts'
import { parseAssistantOutput } from './output-parser.ts'

export interface Transcript {
  messages: TemplateMessage[]
  /** Tools from the system prompt's `<tools>` block, in chat-completions shape. */
  tools: unknown[]
  enableThinking: boolean
}

const TURN = /<\|im_start\|>([a-z_]+)\n([\s\S]*?)(?:<\|im_end\|>\n?|$)/g
const GENERATION_PROMPT = /<\|im_start\|>assistant\n(<think>\n\n<\/think>\n\n)?$/
const TOOLS_HEADER = '\n\n# Tools\n\n'
const TOOLS_BLOCK = /<tools>\n([\s\S]*?)\n<\/tools>/
const TOOL_RESPONSE = /<tool_response>\n([\s\S]*?)\n<\/tool_response>/g

/** The conversation behind a rendered prompt ending in a generation prompt, else `null`. */
export function parseTranscript(prompt: string): Transcript | null {
  const generation = GENERATION_PROMPT.exec(prompt)
  if (generation === null) return null
  const body = prompt.slice(0, generation.index)
  const messages: TemplateMessage[] = []
  let tools: unknown[] = []
  for (const match of body.matchAll(TURN)) {
    const role = match[1] ?? 'user'
    const content = match[2] ?? ''
    if (role === 'system' && messages.length === 0 && content.includes('# Tools')) {
      tools = parseTools(content)
      const headerAt = content.indexOf(TOOLS_HEADER)
      if (headerAt > 0) messages.push({ role: 'system', content: content.slice(0, headerAt) })
    } else if (role === 'user' && content.startsWith('<tool_response>')) {
      for (const response of content.matchAll(TOOL_RESPONSE)) {
        messages.push({ role: 'tool', content: response[1] ?? '' })
      }
    } else if (role === 'assistant') {
      messages.push(parseAssistantTurn(content))
    } else {
      messages.push({ role, content })
    }
  }
  return { messages, tools, enableThinking: generation[1] === undefined }
}

function parseTools(systemContent: string): unknown[] {
  const block = TOOLS_BLOCK.exec(systemContent)?.[1]
  if (block === undefined) return []
  const tools: unknown[] = []
  for (const line of block.split('\n')) {
    try {
      tools.push(JSON.parse(line))
    } catch {
      // Not one tool per line (a tool description with raw newlines): skip it.
    }
  }
  return tools
}

function parseAssistantTurn(content: string): TemplateMessage {
  const parsed = parseAssistantOutput(content, { parseToolCalls: true })
  const message: TemplateMessage = { role: 'assistant', content: parsed.content ?? '' }
  if (parsed.reasoning !== null) message.reasoning_content = parsed.reasoning.trim()
  if (parsed.toolCalls.length > 0) {
    message.tool_calls = parsed.toolCalls.map((call) => {
      const args: unknown = JSON.parse(call.arguments)
      return {
        type: 'function',
        function: { name: call.name, arguments: isRecord(args) ? args : {} },
      }
    })
  }
  return message
}
