/**
 * @module
 * Gemini `generateContent` / `streamGenerateContent` → internal chat request (docs/wire-protocols.md §5,
 * `docs/polar-compat.md` §9), and `:countTokens` → the engine's `/tokenize` body.
 *
 * - The model comes from the URL (`/v1beta/models/{model}:generateContent`), the stream flag from the
 *   action; streaming is served as SSE, so `:streamGenerateContent` needs `?alt=sse` (every Gemini CLI
 *   and SDK call sends it).
 * - `systemInstruction` (string or `{parts}`, sent with `role:"user"` by every client) → system message.
 * - `model` contents → assistant: text parts joined `""` (they are stream pieces of one text), `thought`
 *   parts → reasoning, `functionCall` → `tool_calls`. A gateway-issued `thoughtSignature` on any part
 *   gives the exact sampled reasoning (Gemini CLI drops thought parts but replays signatures).
 * - `user` / `function` contents → one `tool` message per `functionResponse` (first), then the user
 *   message. Calls without an `id` (pi, qwen-code) get stable ids by position, and responses without
 *   one are paired with the earliest open call of the same name, so parallel calls to one function stay
 *   distinct.
 * - `generationConfig`: JSON output becomes `response_format` with upper-case schema types lower-cased;
 *   `thinkingConfig.includeThoughts` → `enable_thinking:true`, `thinkingBudget:0` → `false`.
 */
import { RequestValidationError } from '../../adapter.ts'
import type { ChatMessage, ChatRequest, ParsedRequest, TokenizeRequest } from '../../types.ts'
import { decodeThoughtSignature, googleFunctionCallId } from './google-ids.ts'
import { toJsonSchema } from './google-json-schema.ts'
import {
  type GoogleContent,
  type GooglePart,
  type GoogleRequest,
  type GoogleTool,
  googleCountTokensSchema,
  googleRequestSchema,
  parseGoogleWire,
} from './google-wire.ts'
import { tokenizeRequestFor, Warnings } from '../../warnings.ts'

/** `…/models/{model}:{method}`; the model may contain `/` (raw or `%2F`). */
const GOOGLE_PATH = /\/models\/([^:]+):([A-Za-z]+)\/?$/
const METHODS = ['generateContent', 'streamGenerateContent', 'countTokens']

/** Adapter-private data carried from the request to the answer (`ParsedRequest.responseOptions`). */
export interface GoogleReplyOptions {
  /** Return `thought:true` parts (Gemini only does with `thinkingConfig.includeThoughts`). */
  includeThoughts: boolean
}

type ContentPart = { type: 'text'; text: string } | { type: 'image_url'; image_url: { url: string } }
type ToolCall = { id: string; type: 'function'; function: { name: string; arguments: string } }

export function googleTarget(url: URL): { model: string; action: string } | null {
  const match = GOOGLE_PATH.exec(url.pathname)
  if (!match?.[1] || !match[2] || !METHODS.includes(match[2])) return null
  return { model: decodeURIComponent(match[1]), action: match[2] }
}

/** Read `ResponseContext.responseOptions` back; without them thoughts are shown. */
export function googleReplyOptions(value: Record<string, unknown> | undefined): GoogleReplyOptions {
  return { includeThoughts: value?.includeThoughts !== false }
}

export function parseGoogleRequest(body: unknown, url: URL): ParsedRequest {
  const target = googleTarget(url)
  if (!target || target.action === 'countTokens') {
    const method = /:([A-Za-z]+)\/?$/.exec(url.pathname)?.[1]
    throw new RequestValidationError(
      `method ${method ?? '(none)'} is not supported at ${url.pathname}: use generateContent, streamGenerateContent?alt=sse or countTokens`,
      null,
      404,
    )
  }
  const stream = target.action === 'streamGenerateContent'
  if (stream && url.searchParams.get('alt') !== 'sse') {
    throw new RequestValidationError('alt: streamGenerateContent is served as server-sent events; add ?alt=sse', 'alt')
  }
  const wire = parseGoogleWire(googleRequestSchema, body)
  const warnings = new Warnings()
  const request: ChatRequest = { model: target.model, ...convertPrompt(wire, warnings) }
  const config = wire.generationConfig
  if (config) {
    if (config.maxOutputTokens != null) request.max_tokens = config.maxOutputTokens
    if (config.temperature != null) request.temperature = config.temperature
    if (config.topP != null) request.top_p = config.topP
    if (config.topK != null) request.top_k = config.topK
    if (config.seed != null) request.seed = config.seed
    if (config.presencePenalty != null) request.presence_penalty = config.presencePenalty
    if (config.frequencyPenalty != null) request.frequency_penalty = config.frequencyPenalty
    if (config.stopSequences?.length) request.stop = config.stopSequences
    const format = responseFormat(config, warnings)
    if (format) request.response_format = format
  }
  if (wire.cachedContent) {
    warnings.add('cached_content_ignored', 'cachedContent refers to server-side state the gateway does not have')
  }
  const options: GoogleReplyOptions = { includeThoughts: config?.thinkingConfig?.includeThoughts === true }
  return {
    request,
    warnings: warnings.list,
    stream,
    streamUsage: true,
    modelRequested: target.model,
    responseOptions: { ...options },
  }
}

/** `:countTokens` → vLLM `POST /tokenize` chat body (never a generation). */
export function parseGoogleCountTokensRequest(body: unknown, url: URL): TokenizeRequest {
  const target = googleTarget(url)
  const wire = parseGoogleWire(googleCountTokensSchema, body)
  const inner = wire.generateContentRequest
  const source: GoogleRequest = inner ?? { contents: wire.contents ?? [] }
  if (source.contents.length === 0 && !source.systemInstruction) {
    throw new RequestValidationError('contents: at least one content is required', 'contents')
  }
  const prompt = convertPrompt(source, new Warnings())
  return tokenizeRequestFor(target?.model ?? 'unknown', prompt)
}

interface ConvertedPrompt {
  messages: ChatMessage[]
  tools?: unknown[]
  tool_choice?: unknown
  chat_template_kwargs?: Record<string, unknown>
}

function convertPrompt(wire: GoogleRequest, warnings: Warnings): ConvertedPrompt {
  const out: ConvertedPrompt = { messages: convertContents(wire, warnings) }
  const tools = convertTools(wire.tools ?? [], warnings)
  if (tools.length > 0) {
    out.tools = tools
    const choice = toolChoice(wire, tools, warnings)
    if (choice !== undefined) out.tool_choice = choice
  }
  const thinking = wire.generationConfig?.thinkingConfig
  if (thinking?.thinkingBudget === 0) out.chat_template_kwargs = { enable_thinking: false }
  else if (thinking?.includeThoughts === true) out.chat_template_kwargs = { enable_thinking: true }
  return out
}

function systemText(system: GoogleRequest['systemInstruction']): string | null {
  if (system == null) return null
  if (typeof system === 'string') return system
  const texts = system.parts.flatMap((part) => (typeof part.text === 'string' ? [part.text] : []))
  return texts.length > 0 ? texts.join('\n') : null
}

function mediaPart(part: GooglePart, warnings: Warnings): ContentPart | null {
  if (part.inlineData) {
    if (part.inlineData.mimeType.startsWith('image/')) {
      return { type: 'image_url', image_url: { url: `data:${part.inlineData.mimeType};base64,${part.inlineData.data}` } }
    }
    warnings.add('media_dropped', `dropped ${part.inlineData.mimeType} inline data (only images reach the engine)`)
    return null
  }
  if (part.fileData) {
    const mime = part.fileData.mimeType ?? ''
    if (!mime || mime.startsWith('image/')) return { type: 'image_url', image_url: { url: part.fileData.fileUri } }
    warnings.add('media_dropped', `dropped ${mime} file data (only images reach the engine)`)
  }
  return null
}

function convertContents(wire: GoogleRequest, warnings: Warnings): ChatMessage[] {
  const messages: ChatMessage[] = []
  const system = systemText(wire.systemInstruction)
  if (system !== null) messages.push({ role: 'system', content: system })
  /** Ids of calls still waiting for their response, per function name, oldest first. */
  const openCalls = new Map<string, string[]>()

  wire.contents.forEach((content, contentIndex) => {
    const at = `contents[${contentIndex}]`
    if (content.role === 'model') {
      messages.push(convertModel(content, contentIndex, openCalls, warnings))
      return
    }
    const toolMessages: ChatMessage[] = []
    const toolImages: ContentPart[] = []
    const parts: ContentPart[] = []
    content.parts.forEach((part, partIndex) => {
      const partAt = `${at}.parts[${partIndex}]`
      if (part.functionCall) {
        throw new RequestValidationError(`${partAt}.functionCall: function calls belong in model contents`, `${partAt}.functionCall`)
      }
      if (part.functionResponse) {
        const response = part.functionResponse
        const queue = openCalls.get(response.name)
        let id = response.id ?? null
        if (id) {
          if (queue?.includes(id)) queue.splice(queue.indexOf(id), 1)
        } else id = queue?.shift() ?? response.name
        const payload = response.response ?? {}
        toolMessages.push({ role: 'tool', tool_call_id: id, content: JSON.stringify(payload) })
        for (const inner of response.parts ?? []) {
          const media = mediaPart(inner as GooglePart, warnings)
          if (media) {
            toolImages.push(media)
            warnings.add('tool_result_images_moved', 'images inside function responses were moved to the following user message')
          }
        }
        return
      }
      if (part.thought) return
      if (typeof part.text === 'string') {
        parts.push({ type: 'text', text: part.text })
        return
      }
      const media = mediaPart(part, warnings)
      if (media) parts.push(media)
      else if (part.executableCode != null || part.codeExecutionResult != null) {
        warnings.add('code_execution_dropped', 'dropped code-execution parts (Google-hosted tool)')
      }
    })
    messages.push(...toolMessages)
    const all = [...toolImages, ...parts]
    if (all.length > 0) {
      const textOnly = all.every((part) => part.type === 'text')
      messages.push({
        role: 'user',
        content: textOnly ? all.map((part) => (part.type === 'text' ? part.text : '')).join('\n') : all,
      })
    }
  })
  return messages
}

function convertModel(content: GoogleContent, contentIndex: number, openCalls: Map<string, string[]>, warnings: Warnings): ChatMessage {
  const texts: string[] = []
  const thoughts: string[] = []
  const signed: string[] = []
  const calls: ToolCall[] = []
  const decodedParts = content.parts.map((part) => (part.thoughtSignature ? decodeThoughtSignature(part.thoughtSignature) : null))
  // A turn our signature names keeps self-describing call ids even when the client dropped them (pi does).
  const signedBy = decodedParts.find((decoded) => decoded !== null)?.completionId ?? null
  content.parts.forEach((part, partIndex) => {
    const decoded = decodedParts[partIndex]
    if (decoded && !signed.includes(decoded.reasoning)) signed.push(decoded.reasoning)
    if (part.functionCall) {
      const call = part.functionCall
      const id = call.id || (signedBy === null ? `call_${contentIndex}_${partIndex}` : googleFunctionCallId(signedBy, calls.length))
      calls.push({ id, type: 'function', function: { name: call.name, arguments: JSON.stringify(call.args ?? {}) } })
      const queue = openCalls.get(call.name) ?? []
      queue.push(id)
      openCalls.set(call.name, queue)
      return
    }
    if (typeof part.text === 'string') {
      if (part.thought) thoughts.push(part.text)
      else texts.push(part.text)
      return
    }
    if (part.inlineData || part.fileData) warnings.add('media_dropped', 'dropped media parts in model contents')
    else if (part.executableCode != null || part.codeExecutionResult != null) {
      warnings.add('code_execution_dropped', 'dropped code-execution parts (Google-hosted tool)')
    }
  })
  const message: ChatMessage = {
    role: 'assistant',
    content: texts.length > 0 ? texts.join('') : calls.length > 0 ? null : '',
  }
  const reasoning = signed.length > 0 ? signed.join('\n') : thoughts.join('')
  if (reasoning) message.reasoning_content = reasoning
  if (calls.length > 0) message.tool_calls = calls
  return message
}

interface FunctionTool {
  type: 'function'
  function: { name: string; description?: string; parameters: unknown }
}

/** Function declarations become functions; Google-hosted tools (search, code execution, …) are stripped. */
function convertTools(tools: GoogleTool[], warnings: Warnings): FunctionTool[] {
  const out: FunctionTool[] = []
  tools.forEach((tool, toolIndex) => {
    const hosted = Object.keys(tool).filter((key) => key !== 'functionDeclarations')
    if (hosted.length > 0) {
      warnings.add('tool_stripped', `stripped Google-hosted tools the engine cannot run: ${hosted.join(', ')}`)
    }
    tool.functionDeclarations?.forEach((declaration, index) => {
      const at = `tools[${toolIndex}].functionDeclarations[${index}]`
      const schema = declaration.parametersJsonSchema ?? declaration.parameters ?? { type: 'object', properties: {} }
      const parameters = toJsonSchema(schema) as Record<string, unknown>
      if (parameters.type !== undefined && parameters.type !== 'object') {
        const key = declaration.parametersJsonSchema ? 'parametersJsonSchema' : 'parameters'
        throw new RequestValidationError(`${at}.${key}.type: must be "object"`, `${at}.${key}.type`)
      }
      if (out.some((existing) => existing.function.name === declaration.name)) {
        throw new RequestValidationError(`${at}.name: duplicate function name "${declaration.name}"`, `${at}.name`)
      }
      out.push({
        type: 'function',
        function: {
          name: declaration.name,
          ...(declaration.description ? { description: declaration.description } : {}),
          parameters,
        },
      })
    })
  })
  return out
}

function toolChoice(wire: GoogleRequest, tools: FunctionTool[], warnings: Warnings): unknown {
  const config = wire.toolConfig?.functionCallingConfig
  const allowed = config?.allowedFunctionNames ?? []
  for (const name of allowed) {
    if (!tools.some((tool) => tool.function.name === name)) {
      throw new RequestValidationError(
        `toolConfig.functionCallingConfig.allowedFunctionNames: no function named ${JSON.stringify(name)}`,
        'toolConfig.functionCallingConfig.allowedFunctionNames',
      )
    }
  }
  switch (config?.mode) {
    case 'NONE':
      return 'none'
    case 'ANY': {
      const [only] = allowed
      if (allowed.length === 1 && only) return { type: 'function', function: { name: only } }
      if (allowed.length > 1 && allowed.length < tools.length) {
        warnings.add('tool_choice_relaxed', 'allowedFunctionNames cannot restrict the engine; any function may be called')
      }
      return 'required'
    }
    case 'AUTO':
    case 'VALIDATED':
      if (allowed.length > 0 && allowed.length < tools.length) {
        warnings.add('tool_choice_relaxed', 'allowedFunctionNames cannot restrict the engine; any function may be called')
      }
      return 'auto'
    default:
      return undefined
  }
}

function responseFormat(config: NonNullable<GoogleRequest['generationConfig']>, warnings: Warnings): unknown {
  const mime = config.responseMimeType
  const schema = config.responseJsonSchema ?? config._responseJsonSchema ?? config.responseSchema
  if (mime === 'application/json') {
    if (!schema) return { type: 'json_object' }
    return { type: 'json_schema', json_schema: { name: 'response', schema: toJsonSchema(schema) } }
  }
  if (mime && mime !== 'text/plain') {
    warnings.add('response_mime_type_ignored', `responseMimeType ${mime} is not enforced by the engine`)
  }
  return undefined
}
