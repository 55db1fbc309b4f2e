/**
 * @module
 * Independent client-side readers for each wire API (typed with the official SDKs' own types, not the
 * adapters' code): decode a JSON answer and a synthetic stream into one comparable summary, read error
 * bodies, and build the harness's next turn from an answer (how each client replays history). A new
 * adapter adds one codec here.
 */
import type Anthropic from '@anthropic-ai/sdk'
import type { Content, GenerateContentResponse, Part } from '@google/genai'
import type OpenAI from 'openai'
import { expect } from 'vitest'
import { type SseFrame, jsonEvents } from './sse-frames.ts'

type Message = Anthropic.Messages.Message
type MessageEvent = Anthropic.Messages.RawMessageStreamEvent
type ContentBlock = Anthropic.Messages.ContentBlock
type Response = OpenAI.Responses.Response
type ResponseItem = OpenAI.Responses.ResponseOutputItem
type ResponseEvent = OpenAI.Responses.ResponseStreamEvent
type ChatCompletion = OpenAI.Chat.ChatCompletion
type ChatChunk = OpenAI.Chat.ChatCompletionChunk

export interface ToolCallSummary {
  id: string
  name: string
  /** Parsed arguments; a `{raw_input}` wrapper or unparsable text is reduced to the raw string. */
  arguments: unknown
  /** The argument text as streamed, when the wire carries text. */
  argumentsText: string | null
}

export interface WireSummary {
  id: string
  text: string
  reasoning: string
  toolCalls: ToolCallSummary[]
  finish: string
}

export interface ProviderCodec {
  /** Frames carry `event:` names equal to `data.type`. */
  namedEvents: boolean
  decodeResponse(body: unknown): WireSummary
  decodeStream(frames: SseFrame[]): WireSummary
  /** The error message a stream ended with, or null when it ended normally. */
  streamErrorMessage(frames: SseFrame[]): string | null
  errorMessage(body: unknown): string
  /** The harness's next request: history + the answer + one result per tool call (`result <id>`). */
  replay(body: Record<string, unknown>, answer: unknown): Record<string, unknown>
  /** A minimal valid request for this API (used when an adapter has no fixtures). */
  minimalRequest: { path: string; body: Record<string, unknown> }
  /** Invalid requests and the field each must be blamed on. */
  badRequests: BadRequest[]
  /**
   * The adapter forwards the harness's own history objects (OpenAI chat: tool-call ids and argument text
   * as the harness sent them), so ids are the engine's and history arguments are not repaired.
   */
  passesHistoryThrough?: boolean
}

export interface BadRequest {
  name: string
  body: unknown
  param: string
  path?: string
}

/** `{raw_input: s}` and unparsable text both mean "the sampled text was not a JSON object". */
export function normalizeArguments(value: unknown): unknown {
  let parsed = value
  if (typeof value === 'string') {
    if (!value.trim()) return {}
    try {
      parsed = JSON.parse(value)
    } catch {
      return value
    }
  }
  if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) {
    const record = parsed as Record<string, unknown>
    const keys = Object.keys(record)
    if (keys.length === 1 && keys[0] === 'raw_input' && typeof record.raw_input === 'string') return record.raw_input
  }
  return parsed
}

function anthropicSummary(id: string, blocks: ContentBlock[], finish: string, jsonTexts: (string | null)[] = []): WireSummary {
  const summary: WireSummary = { id, text: '', reasoning: '', toolCalls: [], finish }
  blocks.forEach((block, index) => {
    if (block.type === 'text') summary.text += block.text
    else if (block.type === 'thinking') summary.reasoning += block.thinking
    else if (block.type === 'tool_use') {
      const text = jsonTexts[index] ?? null
      const input = text ? JSON.parse(text) : block.input
      summary.toolCalls.push({ id: block.id, name: block.name, arguments: normalizeArguments(input), argumentsText: text })
    } else throw new Error(`unexpected block ${block.type}`)
  })
  return summary
}

const anthropicCodec: ProviderCodec = {
  namedEvents: true,
  decodeResponse(body) {
    const message = body as Message
    expect(message.type).toBe('message')
    expect(message.role).toBe('assistant')
    expect(typeof message.usage.input_tokens).toBe('number')
    return anthropicSummary(message.id, message.content, `${message.stop_reason}:${message.stop_sequence ?? ''}`)
  },
  decodeStream(frames) {
    const events = (jsonEvents(frames) as unknown as (MessageEvent | { type: 'ping' })[]).filter(
      (event): event is MessageEvent => event.type !== 'ping',
    )
    const first = events[0]
    if (first?.type !== 'message_start') throw new Error('stream does not open with message_start')
    expect(events.at(-1)?.type).toBe('message_stop')
    const blocks: ContentBlock[] = []
    const jsonTexts: (string | null)[] = []
    const open = new Set<number>()
    let finish = ''
    for (const event of events.slice(1, -1)) {
      switch (event.type) {
        case 'content_block_start':
          expect(event.index).toBe(blocks.length)
          blocks.push({ ...event.content_block })
          jsonTexts.push(event.content_block.type === 'tool_use' ? '' : null)
          open.add(event.index)
          break
        case 'content_block_delta': {
          expect(open.has(event.index)).toBe(true)
          const block = blocks[event.index]
          const delta = event.delta
          if (delta.type === 'text_delta' && block?.type === 'text') block.text += delta.text
          else if (delta.type === 'thinking_delta' && block?.type === 'thinking') block.thinking += delta.thinking
          else if (delta.type === 'signature_delta' && block?.type === 'thinking') block.signature = delta.signature
          else if (delta.type === 'input_json_delta' && block?.type === 'tool_use') jsonTexts[event.index] += delta.partial_json
          else throw new Error(`delta ${delta.type} does not fit block ${block?.type}`)
          break
        }
        case 'content_block_stop':
          expect(open.delete(event.index)).toBe(true)
          break
        case 'message_delta':
          expect(open.size).toBe(0)
          finish = `${event.delta.stop_reason}:${event.delta.stop_sequence ?? ''}`
          expect(event.usage.output_tokens).toBeGreaterThanOrEqual(0)
          break
        default:
          throw new Error(`unexpected event ${event.type}`)
      }
    }
    return anthropicSummary(first.message.id, blocks, finish, jsonTexts)
  },
  streamErrorMessage(frames) {
    const last = jsonEvents(frames).at(-1) as { type?: string; error?: { message: string } } | undefined
    return last?.type === 'error' && last.error ? last.error.message : null
  },
  errorMessage(body) {
    const error = body as Anthropic.ErrorResponse
    expect(error.type).toBe('error')
    expect(typeof error.error.type).toBe('string')
    return error.error.message
  },
  replay(body, answer) {
    const message = answer as Message
    const results = message.content.flatMap((block) =>
      block.type === 'tool_use' ? [{ type: 'tool_result', tool_use_id: block.id, content: `result ${block.id}` }] : [],
    )
    const next = results.length > 0 ? results : [{ type: 'text', text: 'next' }]
    return {
      ...body,
      messages: [...(body.messages as unknown[]), { role: 'assistant', content: message.content }, { role: 'user', content: next }],
    }
  },
  minimalRequest: { path: '/v1/messages', body: { model: 'm', max_tokens: 64, messages: [{ role: 'user', content: 'hi' }] } },
  badRequests: [
    { name: 'an empty body', body: {}, param: 'model' },
    { name: 'a numeric model', body: { model: 7, max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] }, param: 'model' },
    { name: 'a missing max_tokens', body: { model: 'm', messages: [{ role: 'user', content: 'hi' }] }, param: 'max_tokens' },
    {
      name: 'an unknown role',
      body: { model: 'm', max_tokens: 8, messages: [{ role: 'robot', content: 'hi' }] },
      param: 'messages[0].role',
    },
    {
      name: 'an unknown block type',
      body: { model: 'm', max_tokens: 8, messages: [{ role: 'user', content: [{ type: 'text', text: 'a' }, { type: 'hologram' }] }] },
      param: 'messages[0].content[1].type',
    },
    {
      name: 'a text block without text',
      body: { model: 'm', max_tokens: 8, messages: [{ role: 'user', content: [{ type: 'text', text: 3 }] }] },
      param: 'messages[0].content[0].text',
    },
    {
      name: 'a tool without input_schema',
      body: { model: 'm', max_tokens: 8, messages: [{ role: 'user', content: 'hi' }], tools: [{ name: 'Bash' }] },
      param: 'tools[0].input_schema',
    },
    {
      name: 'a non-object tool schema',
      body: {
        model: 'm',
        max_tokens: 8,
        messages: [{ role: 'user', content: 'hi' }],
        tools: [{ name: 'Bash', input_schema: { type: 'string' } }],
      },
      param: 'tools[0].input_schema.type',
    },
    {
      name: 'tool_use in a user message',
      body: { model: 'm', max_tokens: 8, messages: [{ role: 'user', content: [{ type: 'tool_use', id: 't', name: 'x', input: {} }] }] },
      param: 'messages[0].content[0].type',
    },
  ],
}

function responsesSummary(response: Response): WireSummary {
  const summary: WireSummary = { id: response.id, text: '', reasoning: '', toolCalls: [], finish: '' }
  for (const item of response.output) {
    if (item.type === 'reasoning') summary.reasoning += item.summary.map((part) => part.text).join('')
    else if (item.type === 'message') {
      summary.text += item.content.map((part) => (part.type === 'output_text' ? part.text : part.refusal)).join('')
    } else if (item.type === 'function_call') {
      summary.toolCalls.push({
        id: item.call_id,
        name: item.name,
        arguments: normalizeArguments(item.arguments),
        argumentsText: item.arguments,
      })
    } else if (item.type === 'custom_tool_call') {
      summary.toolCalls.push({ id: item.call_id, name: item.name, arguments: { input: item.input }, argumentsText: null })
    } else throw new Error(`unexpected item ${item.type}`)
  }
  summary.finish = `${response.status}:${response.incomplete_details?.reason ?? ''}`
  return summary
}

/** Rebuild an item's streamed text into the item, to compare with the final one. */
function withStreamed(item: ResponseItem, streamed: string): ResponseItem {
  switch (item.type) {
    case 'message': {
      const [part] = item.content
      return part?.type === 'output_text' ? { ...item, content: [{ ...part, text: streamed }] } : item
    }
    case 'reasoning':
      return { ...item, summary: [{ type: 'summary_text', text: streamed }] }
    case 'function_call':
      return { ...item, arguments: streamed }
    case 'custom_tool_call':
      return { ...item, input: streamed }
    default:
      return item
  }
}

const responsesCodec: ProviderCodec = {
  namedEvents: true,
  decodeResponse(body) {
    const response = body as Response
    expect(response.object).toBe('response')
    expect(typeof response.usage?.input_tokens).toBe('number')
    return responsesSummary(response)
  },
  decodeStream(frames) {
    const events = jsonEvents(frames) as unknown as ResponseEvent[]
    expect(events.map((event) => event.sequence_number)).toEqual(events.map((_, index) => index))
    expect(events[0]?.type).toBe('response.created')
    expect(events[1]?.type).toBe('response.in_progress')
    const last = events.at(-1)
    if (last?.type !== 'response.completed' && last?.type !== 'response.incomplete') {
      throw new Error(`stream ends with ${last?.type}`)
    }
    const items: ResponseItem[] = []
    const done: ResponseItem[] = []
    const open = new Set<number>()
    const streamed: string[] = []
    const itemId = (index: number) => {
      const item = items[index]
      return item && 'id' in item ? item.id : undefined
    }
    for (const event of events.slice(2, -1)) {
      switch (event.type) {
        case 'response.output_item.added':
          expect(event.output_index).toBe(items.length)
          items.push(event.item)
          open.add(event.output_index)
          streamed.push('')
          break
        case 'response.output_item.done':
          expect(open.delete(event.output_index)).toBe(true)
          expect('id' in event.item ? event.item.id : undefined).toBe(itemId(event.output_index))
          done[event.output_index] = event.item
          break
        case 'response.output_text.delta':
        case 'response.reasoning_summary_text.delta':
        case 'response.function_call_arguments.delta':
        case 'response.custom_tool_call_input.delta':
          expect(event.item_id).toBe(itemId(event.output_index))
          streamed[event.output_index] += event.delta
          break
        case 'response.output_text.done':
        case 'response.reasoning_summary_text.done':
          expect(event.text).toBe(streamed[event.output_index])
          break
        case 'response.function_call_arguments.done':
          expect(event.arguments).toBe(streamed[event.output_index])
          break
        case 'response.custom_tool_call_input.done':
          expect(event.input).toBe(streamed[event.output_index])
          break
        case 'response.content_part.added':
        case 'response.content_part.done':
        case 'response.reasoning_summary_part.added':
        case 'response.reasoning_summary_part.done':
          expect(event.item_id).toBe(itemId(event.output_index))
          break
        default:
          throw new Error(`unexpected event ${event.type}`)
      }
    }
    expect(open.size).toBe(0)
    // The final items, and the items rebuilt from the deltas alone, are the completed response's output.
    expect(last.response.output).toEqual(done)
    const fromDeltas = done.map((item, index) => withStreamed(item, streamed[index] ?? ''))
    expect(fromDeltas).toEqual(done)
    return responsesSummary({ ...last.response, output: fromDeltas })
  },
  streamErrorMessage(frames) {
    const events = jsonEvents(frames) as unknown as ResponseEvent[]
    const error = events.find((event) => event.type === 'error')
    if (error?.type !== 'error') return null
    expect(events.at(-1)?.type).toBe('response.failed')
    return error.message
  },
  errorMessage(body) {
    return (body as { error: { message: string } }).error.message
  },
  replay(body, answer) {
    const response = answer as Response
    const input: unknown[] = typeof body.input === 'string' ? [{ role: 'user', content: body.input }] : [...(body.input as unknown[])]
    input.push(...response.output)
    let calls = 0
    for (const item of response.output) {
      if (item.type === 'function_call')
        input.push({ type: 'function_call_output', call_id: item.call_id, output: `result ${item.call_id}` })
      if (item.type === 'custom_tool_call')
        input.push({ type: 'custom_tool_call_output', call_id: item.call_id, output: `result ${item.call_id}` })
      if (item.type === 'function_call' || item.type === 'custom_tool_call') calls++
    }
    if (calls === 0) input.push({ role: 'user', content: [{ type: 'input_text', text: 'next' }] })
    return { ...body, input }
  },
  minimalRequest: { path: '/v1/responses', body: { model: 'm', input: 'hi' } },
  badRequests: [
    { name: 'an empty body', body: {}, param: 'model' },
    { name: 'a missing input', body: { model: 'm' }, param: 'input' },
    { name: 'an unknown role', body: { model: 'm', input: [{ role: 'robot', content: 'hi' }] }, param: 'input[0].role' },
    { name: 'an unknown item type', body: { model: 'm', input: [{ type: 'hologram' }] }, param: 'input[0].type' },
    {
      name: 'an unknown content part',
      body: { model: 'm', input: [{ role: 'user', content: [{ type: 'input_text', text: 'a' }, { type: 'input_smell' }] }] },
      param: 'input[0].content[1].type',
    },
    {
      name: 'a function_call without call_id',
      body: { model: 'm', input: [{ type: 'function_call', name: 'f', arguments: '{}' }] },
      param: 'input[0].call_id',
    },
    {
      name: 'a function tool without a name',
      body: { model: 'm', input: 'hi', tools: [{ type: 'function', parameters: {} }] },
      param: 'tools[0].name',
    },
    {
      name: 'a non-object tool schema',
      body: { model: 'm', input: 'hi', tools: [{ type: 'function', name: 'f', parameters: { type: 'array' } }] },
      param: 'tools[0].parameters.type',
    },
    {
      name: 'an unresolved previous_response_id',
      body: { model: 'm', input: 'hi', previous_response_id: 'resp_x' },
      param: 'previous_response_id',
    },
  ],
}

/** Our signatures are base64 of `rggs1\n<id>\n<text>`; read independently of the adapter. */
function decodeGoogleSignature(signature: string): string {
  const text = Buffer.from(signature, 'base64').toString('utf8')
  if (!text.startsWith('rggs1\n')) return ''
  return text.slice(text.indexOf('\n', 6) + 1)
}

function googleSummary(frames: GenerateContentResponse[]): WireSummary {
  const parts: Part[] = []
  let finish = ''
  let id = ''
  for (const frame of frames) {
    const candidate = frame.candidates?.[0]
    expect(candidate?.content?.role).toBe('model')
    parts.push(...(candidate?.content?.parts ?? []))
    if (candidate?.finishReason) finish = candidate.finishReason
    id = frame.responseId ?? ''
  }
  const summary: WireSummary = { id, text: '', reasoning: '', toolCalls: [], finish }
  let signed = ''
  for (const part of parts) {
    if (part.thoughtSignature && !signed) signed = decodeGoogleSignature(part.thoughtSignature)
    if (part.functionCall) {
      const call = part.functionCall
      summary.toolCalls.push({ id: call.id ?? '', name: call.name ?? '', arguments: normalizeArguments(call.args), argumentsText: null })
    } else if (part.thought) summary.reasoning += part.text ?? ''
    else summary.text += part.text ?? ''
  }
  if (!summary.reasoning) summary.reasoning = signed
  return summary
}

const googleCodec: ProviderCodec = {
  namedEvents: false,
  decodeResponse(body) {
    const response = body as GenerateContentResponse
    expect(typeof response.usageMetadata?.promptTokenCount).toBe('number')
    return googleSummary([response])
  },
  decodeStream(frames) {
    expect(frames.some((frame) => frame.data === '[DONE]')).toBe(false)
    const events = jsonEvents(frames) as unknown as GenerateContentResponse[]
    const last = events.at(-1)
    expect(last?.candidates?.[0]?.finishReason).toBeTruthy()
    expect(last?.usageMetadata).toBeTruthy()
    for (const event of events.slice(0, -1)) expect(event.candidates?.[0]?.finishReason).toBeUndefined()
    return googleSummary(events)
  },
  streamErrorMessage(frames) {
    const last = jsonEvents(frames).at(-1) as { error?: { message: string } } | undefined
    return last?.error ? last.error.message : null
  },
  errorMessage(body) {
    const { error } = body as { error: { code: number; message: string; status: string } }
    expect(typeof error.code).toBe('number')
    expect(error.status).toMatch(/^[A-Z_]+$/)
    return error.message
  },
  replay(body, answer) {
    const content = (answer as GenerateContentResponse).candidates?.[0]?.content as Content
    const calls = (content.parts ?? []).flatMap((part) => (part.functionCall ? [part.functionCall] : []))
    const reply = calls.length
      ? calls.map((call) => ({ functionResponse: { id: call.id, name: call.name, response: { output: `result ${call.id}` } } }))
      : [{ text: 'next' }]
    return { ...body, contents: [...(body.contents as unknown[]), content, { role: 'user', parts: reply }] }
  },
  minimalRequest: {
    path: '/v1beta/models/gemini-2.5-flash:generateContent',
    body: { contents: [{ role: 'user', parts: [{ text: 'hi' }] }] },
  },
  badRequests: [
    { name: 'an empty body', body: {}, param: 'contents' },
    { name: 'empty contents', body: { contents: [] }, param: 'contents' },
    { name: 'an unknown role', body: { contents: [{ role: 'robot', parts: [{ text: 'hi' }] }] }, param: 'contents[0].role' },
    {
      name: 'a part with no data',
      body: { contents: [{ role: 'user', parts: [{ text: 'a' }, { hologram: {} }] }] },
      param: 'contents[0].parts[1]',
    },
    { name: 'a non-string text', body: { contents: [{ role: 'user', parts: [{ text: 5 }] }] }, param: 'contents[0].parts[0].text' },
    {
      name: 'a function declaration without a name',
      body: { contents: [{ role: 'user', parts: [{ text: 'hi' }] }], tools: [{ functionDeclarations: [{ description: 'x' }] }] },
      param: 'tools[0].functionDeclarations[0].name',
    },
    {
      name: 'a non-object parameter schema',
      body: {
        contents: [{ role: 'user', parts: [{ text: 'hi' }] }],
        tools: [{ functionDeclarations: [{ name: 'f', parameters: { type: 'STRING' } }] }],
      },
      param: 'tools[0].functionDeclarations[0].parameters.type',
    },
    {
      name: 'candidateCount above 1',
      body: { contents: [{ role: 'user', parts: [{ text: 'hi' }] }], generationConfig: { candidateCount: 2 } },
      param: 'generationConfig.candidateCount',
    },
    {
      name: 'a stream without alt=sse',
      body: { contents: [{ role: 'user', parts: [{ text: 'hi' }] }] },
      param: 'alt',
      path: '/v1beta/models/gemini-2.5-flash:streamGenerateContent',
    },
  ],
}

type ChatMessageWithReasoning = ChatCompletion['choices'][number]['message'] & { reasoning_content?: string }
type ChatDeltaWithReasoning = ChatChunk['choices'][number]['delta'] & { reasoning_content?: string }

const openaiChatCodec: ProviderCodec = {
  namedEvents: false,
  decodeResponse(body) {
    const response = body as ChatCompletion
    const choice = response.choices[0]
    const message = choice?.message as ChatMessageWithReasoning
    return {
      id: response.id,
      text: message.content ?? '',
      reasoning: message.reasoning_content ?? '',
      toolCalls: (message.tool_calls ?? []).flatMap((call) =>
        call.type === 'function'
          ? [
              {
                id: call.id,
                name: call.function.name,
                arguments: normalizeArguments(call.function.arguments),
                argumentsText: call.function.arguments,
              },
            ]
          : [],
      ),
      finish: choice?.finish_reason ?? '',
    }
  },
  decodeStream(frames) {
    expect(frames.at(-1)?.data).toBe('[DONE]')
    const summary: WireSummary = { id: '', text: '', reasoning: '', toolCalls: [], finish: '' }
    for (const chunk of jsonEvents(frames) as unknown as ChatChunk[]) {
      summary.id = chunk.id
      const choice = chunk.choices[0]
      if (!choice) continue
      const delta = choice.delta as ChatDeltaWithReasoning
      if (delta.content) summary.text += delta.content
      if (delta.reasoning_content) summary.reasoning += delta.reasoning_content
      for (const call of delta.tool_calls ?? []) {
        if (call.id) summary.toolCalls[call.index] = { id: call.id, name: call.function?.name ?? '', arguments: null, argumentsText: '' }
        const entry = summary.toolCalls[call.index]
        if (entry) entry.argumentsText += call.function?.arguments ?? ''
      }
      if (choice.finish_reason) summary.finish = choice.finish_reason
    }
    for (const call of summary.toolCalls) call.arguments = normalizeArguments(call.argumentsText)
    return summary
  },
  streamErrorMessage(frames) {
    const error = (jsonEvents(frames) as { error?: { message: string } }[]).find((event) => event.error)
    return error?.error ? error.error.message : null
  },
  errorMessage(body) {
    return (body as { error: { message: string } }).error.message
  },
  replay(body, answer) {
    const message = (answer as ChatCompletion).choices[0]?.message
    const results = (message?.tool_calls ?? []).map((call) => ({ role: 'tool', tool_call_id: call.id, content: `result ${call.id}` }))
    const next = results.length > 0 ? results : [{ role: 'user', content: 'next' }]
    return { ...body, messages: [...(body.messages as unknown[]), message, ...next] }
  },
  minimalRequest: { path: '/v1/chat/completions', body: { model: 'm', messages: [{ role: 'user', content: 'hi' }] } },
  badRequests: [
    { name: 'an empty body', body: {}, param: 'model' },
    { name: 'an unknown role', body: { model: 'm', messages: [{ role: 'robot', content: 'hi' }] }, param: 'messages[0].role' },
  ],
  passesHistoryThrough: true,
}

export const CODECS: Record<string, ProviderCodec> = {
  anthropic: anthropicCodec,
  'openai-responses': responsesCodec,
  google: googleCodec,
  'openai-chat': openaiChatCodec,
}
