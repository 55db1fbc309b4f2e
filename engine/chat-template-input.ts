/**
 * @module engine/chat-template-input
 * Turns OpenAI-style chat messages and tools into what vLLM hands the chat template
 * (`vllm/entrypoints/chat_utils.py`, "string" content format):
 * - text parts are joined with `"\n"`, `null` content becomes `""`;
 * - assistant `reasoning` (vLLM) or `reasoning_content` (SGLang) → `reasoning_content`, which the
 *   Qwen3 template reads (vLLM takes `reasoning or reasoning_content`, Python `or` semantics);
 * - tool-call `function.arguments` JSON strings are parsed into objects (`_postprocess_messages`;
 *   empty → `{}`), so the template's `tojson` prints them with Python separators;
 * - tools are dumped like pydantic `ChatCompletionToolsParam.model_dump()`: `description` and
 *   `parameters` present (possibly `null`), extra function keys kept after them.
 */

export interface ChatContentPart {
  type?: string
  text?: string
  [key: string]: unknown
}

export interface ChatToolCall {
  id?: string
  type?: string
  function: { name: string; arguments?: string | Record<string, unknown> | null }
}

/** A chat message as clients send it (OpenAI / vLLM / SGLang flavours). */
export interface ChatMessage {
  role: string
  content?: string | ChatContentPart[] | null
  reasoning?: string | null
  reasoning_content?: string | null
  tool_calls?: ChatToolCall[] | null
  tool_call_id?: string
  name?: string
  [key: string]: unknown
}

/** A message in the shape the chat template receives. */
export interface TemplateMessage {
  role: string
  content: string
  reasoning_content?: string
  reasoning?: string
  tool_calls?: TemplateToolCall[]
  tool_call_id?: string
  name?: string
}

export interface TemplateToolCall {
  id?: string
  type: string
  function: { name: string; arguments: unknown }
}

/** Raised for inputs vLLM rejects while preparing the template (→ HTTP 400). */
export class TemplateInputError extends Error {
  override readonly name = 'TemplateInputError'
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** Text of a message `content`: strings as-is, text parts joined with `"\n"`, `null` → `""`. */
export function contentToText(content: unknown): string {
  if (typeof content === 'string') return content
  if (!Array.isArray(content)) return ''
  const texts: string[] = []
  for (const part of content) {
    if (typeof part === 'string') texts.push(part)
    else if (isRecord(part) && typeof part.text === 'string') {
      const type = part.type
      if (type === undefined || type === 'text' || type === 'input_text' || type === 'output_text') {
        texts.push(part.text)
      }
    } else if (isRecord(part) && part.type === 'refusal' && typeof part.refusal === 'string') {
      texts.push(part.refusal)
    }
  }
  return texts.join('\n')
}

export function normalizeMessages(messages: readonly ChatMessage[]): TemplateMessage[] {
  return messages.map(normalizeMessage)
}

function normalizeMessage(message: ChatMessage, index: number): TemplateMessage {
  if (!isRecord(message) || typeof message.role !== 'string') {
    throw new TemplateInputError(`messages[${index}]: 'role' is required and must be a string`)
  }
  const result: TemplateMessage = { role: message.role, content: contentToText(message.content) }
  if (typeof message.name === 'string') result.name = message.name
  if (message.role === 'assistant') {
    if (Array.isArray(message.tool_calls)) {
      result.tool_calls = message.tool_calls.map((call, callIndex) => normalizeToolCall(call, index, callIndex))
    }
    const reasoning = message.reasoning ? message.reasoning : message.reasoning_content
    if (typeof reasoning === 'string') {
      result.reasoning = reasoning
      result.reasoning_content = reasoning
    }
  } else if (message.role === 'tool' && typeof message.tool_call_id === 'string') {
    result.tool_call_id = message.tool_call_id
  }
  return result
}

function normalizeToolCall(call: unknown, index: number, callIndex: number): TemplateToolCall {
  const where = `messages[${index}].tool_calls[${callIndex}]`
  if (!isRecord(call) || !isRecord(call.function) || typeof call.function.name !== 'string') {
    throw new TemplateInputError(`${where}: 'function.name' is required`)
  }
  const raw = call.function.arguments
  let parsed: unknown = {}
  if (typeof raw === 'string') {
    if (raw !== '') {
      try {
        parsed = JSON.parse(raw)
      } catch (error) {
        throw new TemplateInputError(`${where}: function.arguments is not valid JSON (${(error as Error).message})`)
      }
    }
  } else if (raw !== undefined && raw !== null) {
    parsed = raw
  }
  const result: TemplateToolCall = {
    type: typeof call.type === 'string' ? call.type : 'function',
    function: { name: call.function.name, arguments: parsed },
  }
  if (typeof call.id === 'string') result.id = call.id
  return result
}

/**
 * Tools as vLLM's pydantic models dump them: `{type, function: {name, description, parameters,
 * …extra}}`. Flat Responses-style tools (`{type, name, parameters}`) are nested for leniency.
 */
export function normalizeTools(tools: readonly unknown[]): Record<string, unknown>[] {
  return tools.map((tool, index) => {
    if (!isRecord(tool)) throw new TemplateInputError(`tools[${index}] must be an object`)
    const type = typeof tool.type === 'string' ? tool.type : 'function'
    const source = isRecord(tool.function) ? tool.function : isRecord(tool.custom) ? tool.custom : tool
    if (typeof source.name !== 'string') {
      throw new TemplateInputError(`tools[${index}]: 'function.name' is required`)
    }
    const { name, description, parameters, type: _type, ...extra } = source
    const nested: Record<string, unknown> = {
      name,
      description: description ?? null,
      parameters: parameters ?? null,
    }
    if (source !== tool) Object.assign(nested, extra)
    return { type, function: nested }
  })
}
