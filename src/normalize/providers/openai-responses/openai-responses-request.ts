/**
 * @module
 * OpenAI Responses → internal chat request (docs/wire-protocols.md §5.6, `docs/polar-compat.md` §9).
 *
 * - `instructions`, then leading `developer` / `system` items, become one system message (joined
 *   `"\n\n"`); later ones (Codex's mid-session `<permissions instructions>` / collaboration-mode notes,
 *   opencode's and pi's mode switches) stay `system` turns at the same position. They must not become
 *   `user` messages: Qwen3's template keeps an assistant turn's reasoning only after the last user query,
 *   so a note sent as a user message re-renders every earlier turn without its reasoning (a history rewrite
 *   that splits the trajectory). When the next items are tool outputs, the system turn goes after them so
 *   every tool call stays directly followed by its results (warning `system_message_moved`), as in the
 *   Anthropic adapter.
 * - Messages with or without `type:"message"`; consecutive `function_call` / `custom_tool_call` items join
 *   the preceding assistant message (one response = one assistant turn); outputs become `tool` messages,
 *   their images a following `user` message.
 * - `reasoning` items attach to the next assistant turn; the text comes from a gateway-issued
 *   `encrypted_content` when present (exact sampled bytes), else `content`, else `summary`.
 * - Custom (freeform / grammar) tools such as Codex's `apply_patch` become a function with one string
 *   parameter `input`; `responseOptions.customTools` lets the answer map calls back to
 *   `custom_tool_call`. Hosted, `namespace` and `tool_search` tools are stripped with a warning.
 * - `previous_response_id` needs the session log: the worker resolves it first with
 *   `resolvePreviousResponse` (openai-responses-previous-response.ts); an unresolved one is a 400 so
 *   context is never dropped silently.
 */
import { RequestValidationError } from '../../adapter.ts'
import type { ChatMessage, ChatRequest, ParsedRequest } from '../../types.ts'
import { decodeReasoningContent } from './openai-responses-ids.ts'
import {
  type ResponsesContentPart,
  type ResponsesInputItem,
  type ResponsesRequest,
  type ResponsesTool,
  parseResponsesWire,
  responsesRequestSchema,
} from './openai-responses-wire.ts'
import { Warnings } from '../../warnings.ts'

/** Adapter-private data carried from the request to the answer (`ParsedRequest.responseOptions`). */
export interface ResponsesReplyOptions {
  /** Names of custom tools: their calls go back as `custom_tool_call`. */
  customTools: string[]
  /** Request fields a Responses object echoes back. */
  echo: Record<string, unknown>
}

type ContentPart = { type: 'text'; text: string } | { type: 'image_url'; image_url: { url: string; detail?: string } }
type ToolCall = { id: string; type: 'function'; function: { name: string; arguments: string } }

export function parseResponsesRequest(body: unknown): ParsedRequest {
  const wire = parseResponsesWire(responsesRequestSchema, body)
  if (wire.previous_response_id) {
    throw new RequestValidationError(
      `previous_response_id: Previous response with id '${wire.previous_response_id}' not found.`,
      'previous_response_id',
    )
  }
  if (wire.conversation != null) {
    throw new RequestValidationError('conversation: stateful conversations are not supported; send the full input', 'conversation')
  }
  if (wire.background === true) {
    throw new RequestValidationError('background: background responses are not supported', 'background')
  }
  const warnings = new Warnings()
  const { tools, customTools } = convertTools(wire.tools ?? [], warnings)
  const request: ChatRequest = { model: wire.model, messages: convertInput(wire, warnings) }
  if (tools.length > 0) {
    request.tools = tools
    const choice = convertToolChoice(wire.tool_choice, tools, warnings)
    if (choice !== undefined) request.tool_choice = choice
    if (wire.parallel_tool_calls != null) request.parallel_tool_calls = wire.parallel_tool_calls
  }
  if (wire.max_output_tokens != null) request.max_tokens = wire.max_output_tokens
  if (wire.temperature != null) request.temperature = wire.temperature
  if (wire.top_p != null) request.top_p = wire.top_p
  if (wire.reasoning) request.chat_template_kwargs = { enable_thinking: wire.reasoning.effort !== 'none' }
  const format = wire.text?.format
  if (format?.type === 'json_object') request.response_format = { type: 'json_object' }
  if (format?.type === 'json_schema') {
    request.response_format = {
      type: 'json_schema',
      json_schema: {
        name: format.name ?? 'response',
        schema: format.schema,
        ...(format.description ? { description: format.description } : {}),
        ...(format.strict != null ? { strict: format.strict } : {}),
      },
    }
  }
  const options: ResponsesReplyOptions = { customTools, echo: echoFields(wire) }
  return {
    request,
    warnings: warnings.list,
    stream: wire.stream === true,
    streamUsage: true,
    modelRequested: wire.model,
    responseOptions: { ...options },
  }
}

/** Read `ResponseContext.responseOptions` back, tolerating its absence (defaults: no custom tools). */
export function responsesReplyOptions(value: Record<string, unknown> | undefined): ResponsesReplyOptions {
  const customTools = Array.isArray(value?.customTools) ? value.customTools.filter((name): name is string => typeof name === 'string') : []
  const echo = value?.echo && typeof value.echo === 'object' ? (value.echo as Record<string, unknown>) : {}
  return { customTools, echo }
}

function echoFields(wire: ResponsesRequest): Record<string, unknown> {
  return {
    instructions: wire.instructions ?? null,
    max_output_tokens: wire.max_output_tokens ?? null,
    parallel_tool_calls: wire.parallel_tool_calls ?? true,
    reasoning: { effort: wire.reasoning?.effort ?? null, summary: wire.reasoning?.summary ?? null },
    store: wire.store ?? true,
    temperature: wire.temperature ?? null,
    text: { format: wire.text?.format ?? { type: 'text' }, ...(wire.text?.verbosity ? { verbosity: wire.text.verbosity } : {}) },
    tool_choice: wire.tool_choice ?? 'auto',
    tools: wire.tools ?? [],
    top_p: wire.top_p ?? null,
    truncation: wire.truncation ?? 'disabled',
    metadata: wire.metadata ?? {},
  }
}

function convertInput(wire: ResponsesRequest, warnings: Warnings): ChatMessage[] {
  const systemParts: string[] = []
  if (wire.instructions) systemParts.push(wire.instructions)
  const body: ChatMessage[] = []
  const items: ResponsesInputItem[] = typeof wire.input === 'string' ? [{ type: 'message', role: 'user', content: wire.input }] : wire.input
  let pendingReasoning: string[] = []
  let pendingUser: ContentPart[] = []
  let toolImages: ContentPart[] = []
  let pendingSystem: string[] = []
  const last = () => body.at(-1)

  const flushToolImages = () => {
    if (toolImages.length === 0) return
    body.push({ role: 'user', content: toolImages })
    toolImages = []
  }
  const flushSystem = () => {
    for (const text of pendingSystem) body.push({ role: 'system', content: text })
    pendingSystem = []
  }
  const flushUser = () => {
    if (pendingUser.length === 0) return
    body.push(userMessage(pendingUser))
    pendingUser = []
  }
  const takeReasoning = (message: ChatMessage) => {
    if (pendingReasoning.length > 0) message.reasoning_content = pendingReasoning.join('\n')
    pendingReasoning = []
  }
  const addToolCall = (call: ToolCall) => {
    const previous = last()
    if (previous?.role === 'assistant' && pendingReasoning.length === 0) {
      const calls = (previous.tool_calls as ToolCall[] | undefined) ?? []
      previous.tool_calls = [...calls, call]
      if (previous.content === '') previous.content = null
      return
    }
    const message: ChatMessage = { role: 'assistant', content: null, tool_calls: [call] }
    takeReasoning(message)
    body.push(message)
  }

  items.forEach((item, index) => {
    const at = `input[${index}]`
    const isToolOutput = item.type === 'function_call_output' || item.type === 'custom_tool_call_output'
    if (isToolOutput && pendingSystem.length > 0) {
      warnings.add(
        'system_message_moved',
        'a mid-conversation system message was placed after the tool outputs that answer the preceding tool calls',
      )
    }
    if (!isToolOutput) {
      flushSystem()
      flushToolImages()
    }
    if (item.type !== 'input_text' && item.type !== 'input_image') flushUser()
    switch (item.type) {
      case 'message': {
        if (item.role === 'system' || item.role === 'developer') {
          const text = textOf(item.content, `${at}.content`, warnings)
          if (body.length === 0 && pendingReasoning.length === 0 && pendingSystem.length === 0) systemParts.push(text)
          else pendingSystem.push(text)
          return
        }
        if (item.role === 'user') {
          body.push(userMessage(contentParts(item.content, `${at}.content`, warnings)))
          return
        }
        const message: ChatMessage = { role: 'assistant', content: textOf(item.content, `${at}.content`, warnings) }
        takeReasoning(message)
        body.push(message)
        return
      }
      case 'reasoning': {
        const token = item.encrypted_content ? decodeReasoningContent(item.encrypted_content) : null
        const text = token
          ? token.reasoning
          : item.content?.length
            ? item.content.map((part) => part.text).join('\n')
            : (item.summary ?? []).map((part) => part.text).join('\n')
        if (!token && item.encrypted_content) {
          warnings.add('reasoning_token_foreign', 'encrypted_content from another provider is opaque; its summary text was used')
        }
        if (text) pendingReasoning.push(text)
        return
      }
      case 'function_call':
        addToolCall({
          id: item.call_id,
          type: 'function',
          function: { name: item.name, arguments: historyArguments(item.arguments, warnings) },
        })
        return
      case 'custom_tool_call':
        addToolCall({
          id: item.call_id,
          type: 'function',
          function: { name: item.name, arguments: JSON.stringify({ input: item.input }) },
        })
        return
      case 'function_call_output':
      case 'custom_tool_call_output': {
        const texts: string[] = []
        if (typeof item.output === 'string') texts.push(item.output)
        else {
          for (const part of contentParts(item.output, `${at}.output`, warnings)) {
            if (part.type === 'text') texts.push(part.text)
            else toolImages.push(part)
          }
          if (toolImages.length > 0) {
            warnings.add('tool_result_images_moved', 'images inside tool outputs were moved to the following user message')
          }
        }
        body.push({ role: 'tool', tool_call_id: item.call_id, content: texts.join('\n') })
        return
      }
      case 'input_text':
      case 'input_image':
        pendingUser.push(...contentParts([item], at, warnings))
        return
      case 'item_reference':
        throw new RequestValidationError(`${at}: item_reference needs stored items; send the items themselves (store:false style)`, at)
      default:
        warnings.add('hosted_item_dropped', `dropped "${item.type}" history items (OpenAI-hosted tools)`)
    }
  })
  flushSystem()
  flushToolImages()
  flushUser()
  if (pendingReasoning.length > 0) {
    const message: ChatMessage = { role: 'assistant', content: '' }
    takeReasoning(message)
    body.push(message)
  }
  return systemParts.length > 0 ? [{ role: 'system', content: systemParts.join('\n\n') }, ...body] : body
}

/**
 * Replayed arguments as a JSON object text. vLLM `json.loads()` every history tool call before templating,
 * so a call the model once sampled as invalid JSON would fail every later turn; it is sent wrapped as
 * `{"raw_input": …}` (the same wrapper the other adapters show harnesses) with a warning.
 */
function historyArguments(text: string, warnings: Warnings): string {
  if (!text.trim()) return '{}'
  try {
    const parsed: unknown = JSON.parse(text)
    if (parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed)) return text
  } catch {
    // Wrapped below.
  }
  warnings.add('tool_arguments_wrapped', 'history tool-call arguments that are not a JSON object were sent as {"raw_input": …}')
  return JSON.stringify({ raw_input: text })
}

function userMessage(parts: ContentPart[]): ChatMessage {
  const textOnly = parts.every((part) => part.type === 'text')
  return {
    role: 'user',
    content: textOnly ? parts.map((part) => (part.type === 'text' ? part.text : '')).join('\n') : parts,
  }
}

function contentParts(content: string | ResponsesContentPart[], at: string, warnings: Warnings): ContentPart[] {
  if (typeof content === 'string') return [{ type: 'text', text: content }]
  const out: ContentPart[] = []
  content.forEach((part, index) => {
    switch (part.type) {
      case 'input_text':
      case 'output_text':
      case 'text':
        out.push({ type: 'text', text: part.text })
        return
      case 'refusal':
        out.push({ type: 'text', text: part.refusal })
        return
      case 'input_image': {
        if (!part.image_url) {
          throw new RequestValidationError(
            `${at}[${index}].image_url: stored files (file_id) are not available to the engine; send a URL or data URI`,
            `${at}[${index}].image_url`,
          )
        }
        const detail = part.detail === 'auto' || part.detail === 'low' || part.detail === 'high' ? part.detail : undefined
        out.push({ type: 'image_url', image_url: { url: part.image_url, ...(detail ? { detail } : {}) } })
        return
      }
      case 'input_file':
        warnings.add('file_dropped', 'input_file parts were dropped (files do not reach the engine)')
    }
  })
  return out
}

function textOf(content: string | ResponsesContentPart[], at: string, warnings: Warnings): string {
  const parts = contentParts(content, at, warnings)
  const images = parts.filter((part) => part.type === 'image_url').length
  if (images > 0) warnings.add('image_dropped', 'images in system or assistant messages were dropped')
  return parts.flatMap((part) => (part.type === 'text' ? [part.text] : [])).join('\n')
}

interface FunctionTool {
  type: 'function'
  function: { name: string; description?: string; parameters: Record<string, unknown> }
}

/**
 * Function tools (flat or nested) pass; custom tools become a one-string-parameter function; every
 * other type (hosted tools, `namespace`, `tool_search`, `local_shell`, …) is stripped with a warning.
 */
function convertTools(tools: ResponsesTool[], warnings: Warnings): { tools: FunctionTool[]; customTools: string[] } {
  const out: FunctionTool[] = []
  const customTools: string[] = []
  const stripped: string[] = []
  tools.forEach((tool, index) => {
    const at = `tools[${index}]`
    if (tool.type === 'function') {
      const name = tool.function?.name ?? tool.name
      if (!name) throw new RequestValidationError(`${at}.name: Field required`, `${at}.name`)
      const parameters = tool.function?.parameters ?? tool.parameters ?? { type: 'object', properties: {} }
      if (parameters.type !== undefined && parameters.type !== 'object') {
        throw new RequestValidationError(`${at}.parameters.type: must be "object"`, `${at}.parameters.type`)
      }
      const description = tool.function?.description ?? tool.description
      push({ type: 'function', function: { name, ...(description ? { description } : {}), parameters } }, at)
      return
    }
    if (tool.type === 'custom') {
      if (!tool.name) throw new RequestValidationError(`${at}.name: Field required`, `${at}.name`)
      const format = tool.format
      const hint =
        format?.type === 'grammar' && format.definition
          ? `Raw input passed to the tool verbatim. It must match this ${format.syntax ?? ''} grammar:\n${format.definition}`
          : 'Raw input passed to the tool verbatim.'
      push(
        {
          type: 'function',
          function: {
            name: tool.name,
            ...(tool.description ? { description: tool.description } : {}),
            parameters: {
              type: 'object',
              properties: { input: { type: 'string', description: hint } },
              required: ['input'],
              additionalProperties: false,
            },
          },
        },
        at,
      )
      customTools.push(tool.name)
      return
    }
    stripped.push(tool.name ? `${tool.type} "${tool.name}"` : tool.type)
  })
  if (stripped.length > 0) {
    warnings.add('tool_stripped', `stripped tools the engine cannot run: ${stripped.join(', ')}`)
  }
  return { tools: out, customTools }

  function push(tool: FunctionTool, at: string) {
    if (out.some((existing) => existing.function.name === tool.function.name)) {
      throw new RequestValidationError(`${at}.name: duplicate tool name "${tool.function.name}"`, `${at}.name`)
    }
    out.push(tool)
  }
}

function convertToolChoice(choice: ResponsesRequest['tool_choice'], tools: FunctionTool[], warnings: Warnings): unknown {
  if (choice == null) return undefined
  if (typeof choice === 'string') return choice
  if (choice.type === 'function' || choice.type === 'custom') {
    const name = choice.name ?? choice.function?.name
    if (!name || !tools.some((tool) => tool.function.name === name)) {
      throw new RequestValidationError(`tool_choice.name: no tool named ${JSON.stringify(name ?? '')} in tools`, 'tool_choice.name')
    }
    return { type: 'function', function: { name } }
  }
  if (choice.type === 'allowed_tools') {
    warnings.add('tool_choice_relaxed', 'allowed_tools cannot restrict the engine; sent as its mode over all tools')
    return choice.mode === 'required' ? 'required' : 'auto'
  }
  warnings.add('tool_choice_relaxed', `tool_choice "${choice.type}" names a stripped tool; sent as "auto"`)
  return 'auto'
}
