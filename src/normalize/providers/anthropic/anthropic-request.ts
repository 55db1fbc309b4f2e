/**
 * @module
 * Anthropic Messages → internal chat request (docs/wire-protocols.md §5, `docs/polar-compat.md` §9), plus the
 * `/tokenize` body that answers `POST /v1/messages/count_tokens`.
 *
 * Choices worth knowing:
 * - `system` blocks are joined with `"\n"`; Claude Code's `x-anthropic-billing-header: …` line in
 *   `system[0]` (a per-request nonce that breaks prefix caching and merging) is stripped, with a warning.
 * - `role:"system"` messages inside `messages` (Claude Code's mid-conversation system beta, e.g. its
 *   "The user hasn't heard from you in a while" note): leading ones join the system prompt; later ones
 *   stay `system` turns at the same position. They must not become `user` messages: Qwen3's template
 *   keeps the reasoning of assistant turns only after the last user query, so a system note sent as a
 *   user message re-renders every earlier turn without its reasoning (a history rewrite that splits the
 *   trajectory); a mid-list system turn renders as `<|im_start|>system` and leaves the query where it was.
 *   When the next message starts with tool results, the system turn goes after those `tool` messages
 *   so every tool call stays directly followed by its results (warning `system_message_moved`).
 * - `tool_result` → one `tool` message per result, before any user text of that turn; `is_error`
 *   prefixes `"[Tool Error] "`; images inside results move to the turn's `user` message.
 * - `thinking` blocks: the reasoning comes from a gateway-issued signature when present (exact sampled
 *   bytes), else from the block text. `redacted_thinking` from elsewhere is opaque and dropped.
 * - Dropped without a warning (no effect on what the model sees): `metadata`, `cache_control`,
 *   `context_management`, `service_tier`, `container`, `output_config.effort`, `thinking.budget_tokens`.
 */
import { RequestValidationError } from '../../adapter.ts'
import type { ChatMessage, ChatRequest, ParsedRequest, TokenizeRequest } from '../../types.ts'
import { decodeThinkingSignature } from './anthropic-ids.ts'
import {
  type AnthropicContentBlock,
  type AnthropicCountTokensRequest,
  type AnthropicMessage,
  type AnthropicTool,
  anthropicCountTokensSchema,
  anthropicRequestSchema,
  parseAnthropicWire,
} from './anthropic-wire.ts'
import { tokenizeRequestFor, Warnings } from '../../warnings.ts'

const BILLING_HEADER_LINE = /^\s*x-anthropic-billing-header:[^\n]*(\n|$)/
const TOOL_ERROR_PREFIX = '[Tool Error] '

type ContentPart = { type: 'text'; text: string } | { type: 'image_url'; image_url: { url: string } }

export function parseAnthropicRequest(body: unknown): ParsedRequest {
  const wire = parseAnthropicWire(anthropicRequestSchema, body)
  const warnings = new Warnings()
  const request: ChatRequest = { model: wire.model, ...convertPrompt(wire, warnings), max_tokens: wire.max_tokens }
  if (wire.temperature != null) request.temperature = wire.temperature
  if (wire.top_p != null) request.top_p = wire.top_p
  if (wire.top_k != null) request.top_k = wire.top_k
  if (wire.stop_sequences?.length) request.stop = wire.stop_sequences
  if (wire.mcp_servers?.length) {
    warnings.add('mcp_servers_dropped', 'mcp_servers are Anthropic-run connectors; the engine cannot call them')
  }
  return {
    request,
    warnings: warnings.list,
    stream: wire.stream === true,
    streamUsage: true,
    modelRequested: wire.model,
  }
}

/** `POST /v1/messages/count_tokens` body → vLLM `POST /tokenize` chat body (never a generation). */
export function parseAnthropicCountTokensRequest(body: unknown): TokenizeRequest {
  const wire = parseAnthropicWire(anthropicCountTokensSchema, body)
  const prompt = convertPrompt(wire, new Warnings())
  return tokenizeRequestFor(wire.model, prompt)
}

interface ConvertedPrompt {
  messages: ChatMessage[]
  tools?: unknown[]
  tool_choice?: unknown
  parallel_tool_calls?: boolean
  chat_template_kwargs?: Record<string, unknown>
  response_format?: unknown
}

function convertPrompt(wire: AnthropicCountTokensRequest, warnings: Warnings): ConvertedPrompt {
  const out: ConvertedPrompt = { messages: convertMessages(wire, warnings) }
  const tools = convertTools(wire.tools ?? [], warnings)
  if (tools.length > 0) {
    out.tools = tools
    const choice = wire.tool_choice
    if (choice) {
      if (choice.type === 'tool' && !tools.some((tool) => tool.function.name === choice.name)) {
        throw new RequestValidationError(`tool_choice.name: no tool named ${JSON.stringify(choice.name)} in tools`, 'tool_choice.name')
      }
      out.tool_choice =
        choice.type === 'auto'
          ? 'auto'
          : choice.type === 'any'
            ? 'required'
            : choice.type === 'none'
              ? 'none'
              : { type: 'function', function: { name: choice.name } }
      if ('disable_parallel_tool_use' in choice && choice.disable_parallel_tool_use === true) {
        out.parallel_tool_calls = false
      }
    }
  }
  // (SGLang rejects tool_choice without tools, so it is omitted when no tools remain.)
  const thinking = wire.thinking?.type
  if (thinking) out.chat_template_kwargs = { enable_thinking: thinking !== 'disabled' }
  const format = wire.output_config?.format ?? wire.output_format
  if (format) {
    out.response_format = {
      type: 'json_schema',
      json_schema: { name: format.name ?? 'output', schema: format.schema, strict: true },
    }
  }
  return out
}

function systemPrompt(system: AnthropicCountTokensRequest['system'], warnings: Warnings): string | null {
  if (system == null) return null
  const blocks = typeof system === 'string' ? [system] : system.map((block) => block.text)
  const first = blocks[0]
  if (first !== undefined && BILLING_HEADER_LINE.test(first)) {
    const rest = first.replace(BILLING_HEADER_LINE, '')
    if (rest.trim()) blocks[0] = rest
    else blocks.shift()
    warnings.add(
      'billing_header_stripped',
      'removed the x-anthropic-billing-header line from system[0] (per-request nonce breaks prefix caching)',
    )
  }
  return blocks.length > 0 ? blocks.join('\n') : null
}

function convertMessages(wire: AnthropicCountTokensRequest, warnings: Warnings): ChatMessage[] {
  const systemParts: string[] = []
  const top = systemPrompt(wire.system, warnings)
  if (top !== null) systemParts.push(top)
  const body: ChatMessage[] = []
  let pendingSystem: string[] = []
  const flushSystem = () => {
    for (const text of pendingSystem) body.push({ role: 'system', content: text })
    pendingSystem = []
  }

  wire.messages.forEach((message, index) => {
    const at = `messages[${index}]`
    let role = message.role
    if (role === 'ctx' || role === 'msg') {
      warnings.add('role_mapped', 'Claude Code "ctx" / "msg" message roles sent as "user"')
      role = 'user'
    }
    if (role === 'system') {
      const text = plainText(message, at)
      if (body.length === 0 && pendingSystem.length === 0) systemParts.push(text)
      else pendingSystem.push(text)
      return
    }
    if (role === 'assistant') {
      flushSystem()
      body.push(convertAssistant(message.content, at, warnings))
      return
    }
    const { toolMessages, user } = convertUser(message.content, at, warnings)
    if (toolMessages.length > 0 && pendingSystem.length > 0) {
      warnings.add(
        'system_message_moved',
        'a mid-conversation system message was placed after the tool results that answer the preceding tool calls',
      )
    }
    body.push(...toolMessages)
    flushSystem()
    if (user) body.push(user)
  })
  flushSystem()
  return systemParts.length > 0 ? [{ role: 'system', content: systemParts.join('\n\n') }, ...body] : body
}

function plainText(message: AnthropicMessage, at: string): string {
  if (typeof message.content === 'string') return message.content
  return message.content
    .map((block, index) => {
      if (block.type !== 'text') {
        throw new RequestValidationError(
          `${at}.content[${index}].type: system messages may only hold text blocks`,
          `${at}.content[${index}].type`,
        )
      }
      return block.text
    })
    .join('\n')
}

function imagePart(block: Extract<AnthropicContentBlock, { type: 'image' }>, at: string): ContentPart {
  const source = block.source
  if (source.type === 'base64') {
    return { type: 'image_url', image_url: { url: `data:${source.media_type};base64,${source.data}` } }
  }
  if (source.type === 'url') return { type: 'image_url', image_url: { url: source.url } }
  throw new RequestValidationError(
    `${at}.source: Files API images (file_id) are not available to the engine; send base64 or a URL`,
    `${at}.source`,
  )
}

/** A document as text when it has text; PDFs and files cannot reach a text engine. */
function documentText(block: Extract<AnthropicContentBlock, { type: 'document' }>, warnings: Warnings): string | null {
  const source = block.source
  let text: string | null = null
  if (source.type === 'text' && typeof source.data === 'string') text = source.data
  else if (source.type === 'content') {
    const content = (source as { content?: unknown }).content
    if (typeof content === 'string') text = content
    else if (Array.isArray(content)) {
      text = content
        .map((part) => (part && typeof part === 'object' && typeof part.text === 'string' ? part.text : ''))
        .filter(Boolean)
        .join('\n')
    }
  }
  if (text === null) {
    warnings.add('document_dropped', `a ${source.type} document block was dropped (only text documents reach the engine)`)
    return null
  }
  return block.title ? `${block.title}\n${text}` : text
}

function convertUser(
  content: AnthropicMessage['content'],
  at: string,
  warnings: Warnings,
): { toolMessages: ChatMessage[]; user: ChatMessage | null } {
  if (typeof content === 'string') return { toolMessages: [], user: { role: 'user', content } }
  const toolMessages: ChatMessage[] = []
  const toolImages: ContentPart[] = []
  const parts: ContentPart[] = []
  content.forEach((block, index) => {
    const blockAt = `${at}.content[${index}]`
    switch (block.type) {
      case 'text':
        parts.push({ type: 'text', text: block.text })
        return
      case 'image':
        parts.push(imagePart(block, blockAt))
        return
      case 'document': {
        const text = documentText(block, warnings)
        if (text !== null) parts.push({ type: 'text', text })
        return
      }
      case 'search_result':
        parts.push({ type: 'text', text: block.content.map((part) => part.text).join('\n') })
        return
      case 'tool_result': {
        const texts: string[] = []
        const result = block.content
        if (typeof result === 'string') texts.push(result)
        else if (result) {
          result.forEach((part, partIndex) => {
            if (part.type === 'text') texts.push(part.text)
            else if (part.type === 'image') toolImages.push(imagePart(part, `${blockAt}.content[${partIndex}]`))
            else if (part.type === 'search_result') texts.push(part.content.map((item) => item.text).join('\n'))
            else {
              const text = documentText(part, warnings)
              if (text !== null) texts.push(text)
            }
          })
        }
        const text = texts.join('\n')
        toolMessages.push({
          role: 'tool',
          tool_call_id: block.tool_use_id,
          content: block.is_error ? `${TOOL_ERROR_PREFIX}${text}` : text,
        })
        return
      }
      case 'thinking':
      case 'redacted_thinking':
      case 'tool_use':
        throw new RequestValidationError(`${blockAt}.type: "${block.type}" blocks belong in assistant messages`, `${blockAt}.type`)
      default:
        warnings.add('server_tool_block_dropped', `dropped "${block.type}" history blocks (Anthropic-run server tools)`)
    }
  })
  if (toolImages.length > 0) {
    warnings.add('tool_result_images_moved', 'images inside tool results were moved to the following user message')
  }
  const all = [...toolImages, ...parts]
  if (all.length === 0) return { toolMessages, user: null }
  const textOnly = all.every((part) => part.type === 'text')
  const user: ChatMessage = {
    role: 'user',
    content: textOnly ? all.map((part) => (part.type === 'text' ? part.text : '')).join('\n') : all,
  }
  return { toolMessages, user }
}

function convertAssistant(content: AnthropicMessage['content'], at: string, warnings: Warnings): ChatMessage {
  if (typeof content === 'string') return { role: 'assistant', content }
  const texts: string[] = []
  const reasoning: string[] = []
  const toolCalls: { id: string; type: 'function'; function: { name: string; arguments: string } }[] = []
  content.forEach((block, index) => {
    const blockAt = `${at}.content[${index}]`
    switch (block.type) {
      case 'text':
        texts.push(block.text)
        return
      case 'thinking': {
        const decoded = block.signature ? decodeThinkingSignature(block.signature) : null
        if (decoded && block.thinking && decoded.reasoning !== block.thinking) {
          warnings.add('thinking_text_replaced', 'edited thinking text was replaced by the sampled text its signature carries')
        }
        reasoning.push(decoded ? decoded.reasoning : block.thinking)
        return
      }
      case 'redacted_thinking': {
        const decoded = decodeThinkingSignature(block.data)
        if (decoded) reasoning.push(decoded.reasoning)
        else warnings.add('redacted_thinking_dropped', 'redacted_thinking from another provider is opaque and was dropped')
        return
      }
      case 'tool_use':
        toolCalls.push({
          id: block.id,
          type: 'function',
          function: { name: block.name, arguments: JSON.stringify(block.input) },
        })
        return
      case 'image':
      case 'document':
      case 'search_result':
      case 'tool_result':
        throw new RequestValidationError(`${blockAt}.type: "${block.type}" blocks belong in user messages`, `${blockAt}.type`)
      default:
        warnings.add('server_tool_block_dropped', `dropped "${block.type}" history blocks (Anthropic-run server tools)`)
    }
  })
  const message: ChatMessage = {
    role: 'assistant',
    content: texts.length > 0 ? texts.join('\n') : toolCalls.length > 0 ? null : '',
  }
  if (reasoning.length > 0) message.reasoning_content = reasoning.join('\n')
  if (toolCalls.length > 0) message.tool_calls = toolCalls
  return message
}

interface FunctionTool {
  type: 'function'
  function: { name: string; description?: string; parameters: Record<string, unknown> }
}

/**
 * Custom tools (`input_schema`, no type or `type:"custom"`) become functions; Anthropic-defined and
 * server tools (`web_search_*`, `bash_*`, `text_editor_*`, …) carry no schema the engine could use and
 * are dropped with a warning. Claude's `$schema` / `additionalProperties` stay in the schema.
 */
function convertTools(tools: AnthropicTool[], warnings: Warnings): FunctionTool[] {
  const out: FunctionTool[] = []
  tools.forEach((tool, index) => {
    const at = `tools[${index}]`
    const custom = tool.type == null || tool.type === 'custom'
    if (!custom && tool.input_schema == null) {
      warnings.add('tool_dropped', `dropped server tool "${tool.name}" (${tool.type}): the engine cannot run it`)
      return
    }
    const schema = tool.input_schema
    if (schema == null) {
      throw new RequestValidationError(`${at}.input_schema: Field required`, `${at}.input_schema`)
    }
    if (schema.type !== undefined && schema.type !== 'object') {
      throw new RequestValidationError(`${at}.input_schema.type: must be "object"`, `${at}.input_schema.type`)
    }
    if (out.some((existing) => existing.function.name === tool.name)) {
      throw new RequestValidationError(`${at}.name: duplicate tool name "${tool.name}"`, `${at}.name`)
    }
    out.push({
      type: 'function',
      function: {
        name: tool.name,
        ...(tool.description ? { description: tool.description } : {}),
        parameters: schema,
      },
    })
  })
  return out
}
