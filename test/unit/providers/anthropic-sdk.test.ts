/**
 * @module
 * `@anthropic-ai/sdk` 1.12.0 as the client of the Anthropic adapter over real HTTP: a two-turn tool task
 * (non-streaming, then streaming on the beta path like Claude Code), parallel calls, keep-alive `ping`s
 * before `message_start`, stop sequences, count_tokens, HTTP and mid-stream errors — with no warnings.
 */
import Anthropic from '@anthropic-ai/sdk'
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import type { ParsedRequest } from '../../../src/normalize/types.ts'
import { type AdapterServer, type Outcome, captureWarnings, engineCompletion, startAdapterServer } from './adapter-server.ts'

const REASONING = 'The user wants hello.txt.\nI will call Write — then check with Bash. 😀'
const TOOLS: Anthropic.Messages.Tool[] = [
  {
    name: 'Write',
    description: 'Writes a file',
    input_schema: {
      type: 'object',
      properties: { file_path: { type: 'string' }, content: { type: 'string' } },
      required: ['file_path', 'content'],
      additionalProperties: false,
    },
  },
  { name: 'Bash', description: 'Runs a command', input_schema: { type: 'object', properties: { command: { type: 'string' } } } },
]

function policy(parsed: ParsedRequest): Outcome {
  const last = parsed.request.messages.at(-1)
  const text = typeof last?.content === 'string' ? last.content : ''
  if (text.includes('please fail')) return { error: { status: 529, kind: 'overloaded', message: 'engine overloaded' } }
  if (text.includes('fail midway')) return { streamError: { status: 503, kind: 'overloaded', message: 'engine went away' } }
  if (text.includes('stop early')) {
    return { completion: engineCompletion({ role: 'assistant', content: 'The answer is 42' }, 'stop', { stopReason: '</answer>' }) }
  }
  if (parsed.request.messages.some((message) => message.role === 'tool'))
    return { completion: engineCompletion({ role: 'assistant', content: 'done' }) }
  return {
    completion: engineCompletion({
      role: 'assistant',
      content: 'Creating the file.',
      reasoning_content: REASONING,
      tool_calls: [
        { id: 'chatcmpl-tool-1', type: 'function', function: { name: 'Write', arguments: '{"file_path": "hello.txt", "content": "hi"}' } },
        { id: 'chatcmpl-tool-2', type: 'function', function: { name: 'Bash', arguments: '{"command": "cat hello.txt"}' } },
      ],
    }),
  }
}

describe('@anthropic-ai/sdk against the Anthropic adapter', () => {
  let server: AdapterServer
  let client: Anthropic
  let warnings: ReturnType<typeof captureWarnings>

  beforeAll(async () => {
    server = await startAdapterServer(policy)
    client = new Anthropic({ apiKey: 'rg_test', baseURL: server.url, maxRetries: 0 })
  })
  afterAll(() => server.close())
  beforeEach(() => {
    warnings = captureWarnings()
  })
  afterEach(() => {
    warnings.restore()
    expect(warnings.seen).toEqual([])
  })

  it('runs a two-turn tool task: JSON turn with parallel tool_use, then a streamed turn on ?beta=true', async () => {
    const first: Anthropic.Messages.MessageParam[] = [{ role: 'user', content: 'create hello.txt containing hi' }]
    const turn1 = await client.messages.create({
      model: 'claude-opus-4-8',
      max_tokens: 1024,
      thinking: { type: 'adaptive' },
      tools: TOOLS,
      messages: first,
    })
    expect(turn1.id).toBe('msg_cmpl_sdk0')
    expect(turn1.model).toBe('claude-opus-4-8')
    expect(turn1.stop_reason).toBe('tool_use')
    expect(turn1.usage).toMatchObject({ input_tokens: 600, cache_read_input_tokens: 300, output_tokens: 42 })
    const [thinking, text, write, bash] = turn1.content
    expect(thinking?.type === 'thinking' && thinking.thinking).toBe(REASONING)
    expect(text?.type === 'text' && text.text).toBe('Creating the file.')
    expect(write?.type === 'tool_use' && write.input).toEqual({ file_path: 'hello.txt', content: 'hi' })
    expect(bash?.type === 'tool_use' && bash.id).toBe('toolu_cmpl_sdk0_1')
    expect(server.calls[0]?.parsed?.request.chat_template_kwargs).toEqual({ enable_thinking: true })

    // Claude Code strips thinking text from history (keeping the signature); the reasoning must survive.
    const replayed = turn1.content.map((block) => (block.type === 'thinking' ? { ...block, thinking: '' } : block))
    const toolUses = turn1.content.filter((block) => block.type === 'tool_use')
    // Claude Code's path always carries `?beta=true`.
    const claudeCode = new Anthropic({ apiKey: 'rg_test', baseURL: server.url, maxRetries: 0, defaultQuery: { beta: 'true' } })
    const stream = claudeCode.beta.messages.stream({
      model: 'claude-opus-4-8',
      max_tokens: 1024,
      tools: TOOLS,
      messages: [
        ...first,
        { role: 'assistant', content: replayed },
        {
          role: 'user',
          content: [
            ...toolUses.map((block) => ({ type: 'tool_result' as const, tool_use_id: block.id, content: `ok ${block.name}` })),
            { type: 'text' as const, text: 'continue' },
          ],
        },
      ],
    })
    const types: string[] = []
    stream.on('streamEvent', (event) => types.push(event.type))
    const turn2 = await stream.finalMessage()
    expect(server.calls[1]?.path).toBe('/v1/messages?beta=true')
    expect(turn2.content.map((block) => (block.type === 'text' ? block.text : block.type))).toEqual(['done'])
    expect(turn2.stop_reason).toBe('end_turn')
    expect(turn2.usage.input_tokens).toBe(600)
    expect(types[0]).toBe('message_start')
    expect(types.at(-1)).toBe('message_stop')

    const history = server.calls[1]?.parsed?.request.messages ?? []
    const assistant = history.find((message) => message.role === 'assistant')
    expect(assistant?.reasoning_content).toBe(REASONING)
    expect(assistant?.tool_calls).toEqual([
      { id: 'toolu_cmpl_sdk0_0', type: 'function', function: { name: 'Write', arguments: '{"file_path":"hello.txt","content":"hi"}' } },
      { id: 'toolu_cmpl_sdk0_1', type: 'function', function: { name: 'Bash', arguments: '{"command":"cat hello.txt"}' } },
    ])
    // Tool results first, then the user's own text of that turn.
    expect(history.slice(-3).map((message) => [message.role, message.content])).toEqual([
      ['tool', 'ok Write'],
      ['tool', 'ok Bash'],
      ['user', 'continue'],
    ])
  })

  it('streams parallel tool_use blocks with their JSON input and thinking signature', async () => {
    const events: Anthropic.Messages.RawMessageStreamEvent[] = []
    const stream = client.messages.stream({ model: 'm', max_tokens: 64, tools: TOOLS, messages: [{ role: 'user', content: 'go' }] })
    for await (const event of stream) events.push(event)
    const message = await stream.finalMessage()
    expect(message.content.map((block) => block.type)).toEqual(['thinking', 'text', 'tool_use', 'tool_use'])
    const thinking = message.content[0]
    expect(thinking?.type === 'thinking' && thinking.signature).toMatch(/^rgth1\./)
    expect(message.content.slice(2).map((block) => block.type === 'tool_use' && block.input)).toEqual([
      { file_path: 'hello.txt', content: 'hi' },
      { command: 'cat hello.txt' },
    ])
    expect(events.filter((event) => event.type === 'content_block_start').map((event) => event.index)).toEqual([0, 1, 2, 3])
  })

  it('sends ping keep-alives before message_start, which the SDK accepts', async () => {
    const raw = await fetch(`${server.url}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': 'rg_test', 'anthropic-version': '2023-06-01' },
      body: JSON.stringify({ model: 'm', max_tokens: 8, stream: true, messages: [{ role: 'user', content: 'stop early' }] }),
    })
    const text = await raw.text()
    expect(text.startsWith('event: ping\ndata: {"type":"ping"}\n\nevent: ping\n')).toBe(true)
    expect(text.indexOf('event: message_start')).toBeGreaterThan(0)
    const message = await client.messages
      .stream({ model: 'm', max_tokens: 8, messages: [{ role: 'user', content: 'stop early' }] })
      .finalMessage()
    expect(message.content).toMatchObject([{ type: 'text', text: 'The answer is 42' }])
  })

  it('reports a matched stop sequence', async () => {
    const message = await client.messages.create({
      model: 'm',
      max_tokens: 64,
      stop_sequences: ['</answer>'],
      messages: [{ role: 'user', content: 'stop early' }],
    })
    expect(message.stop_reason).toBe('stop_sequence')
    expect(message.stop_sequence).toBe('</answer>')
    expect(server.calls.at(-1)?.parsed?.request.stop).toEqual(['</answer>'])
  })

  it('counts tokens with messages.countTokens', async () => {
    const result = await client.messages.countTokens({ model: 'm', messages: [{ role: 'user', content: 'hi' }], tools: TOOLS })
    expect(result.input_tokens).toBeGreaterThan(0)
  })

  it('raises the SDK error class for an upstream status, keeping it', async () => {
    const error = await client.messages
      .create({ model: 'm', max_tokens: 8, messages: [{ role: 'user', content: 'please fail' }] })
      .catch((e: unknown) => e)
    expect(error).toBeInstanceOf(Anthropic.APIError)
    expect((error as InstanceType<typeof Anthropic.APIError>).status).toBe(529)
    expect((error as InstanceType<typeof Anthropic.APIError>).type).toBe('overloaded_error')
  })

  it('raises a mid-stream error event', async () => {
    const stream = client.messages.stream({ model: 'm', max_tokens: 8, messages: [{ role: 'user', content: 'fail midway' }] })
    const error = await stream.finalMessage().catch((e: unknown) => e)
    expect(error).toBeInstanceOf(Anthropic.APIError)
    expect(String((error as Error).message)).toContain('engine went away')
  })

  it('rejects bad input with a 400 invalid_request_error naming the field', async () => {
    const error = await client.messages
      .create({
        model: 'm',
        max_tokens: 8,
        messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: '' } }] }],
      })
      .catch((e: unknown) => e)
    expect(error).toBeInstanceOf(Anthropic.BadRequestError)
    expect((error as InstanceType<typeof Anthropic.APIError>).type).toBe('invalid_request_error')
    expect(String((error as Error).message)).toContain('messages[0].content[0].source.data')
  })
})
