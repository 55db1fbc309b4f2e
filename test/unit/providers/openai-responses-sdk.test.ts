/**
 * @module
 * `openai` 7.57.0 (`responses` API, whose stream accumulator validates ids, indices and sequence) as the
 * client of the Responses adapter over real HTTP: a Codex-style two-turn task with a custom `apply_patch`
 * tool and `store:false` encrypted reasoning replay, function calls, length → `incomplete`, HTTP and
 * mid-stream errors — with no warnings.
 */
import OpenAI from 'openai'
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import type { ParsedRequest } from '../../../src/normalize/types.ts'
import { type AdapterServer, type Outcome, captureWarnings, engineCompletion, startAdapterServer } from './adapter-server.ts'

const REASONING = 'Create hello.txt with apply_patch.\n\tThen verify. 😀'
const PATCH = '*** Begin Patch\n*** Add File: hello.txt\n+hi\n*** End Patch\n'
const TOOLS: OpenAI.Responses.Tool[] = [
  {
    type: 'function',
    name: 'exec_command',
    description: 'Runs a command',
    strict: false,
    parameters: { type: 'object', properties: { cmd: { type: 'string' } }, required: ['cmd'], additionalProperties: false },
  },
  {
    type: 'custom',
    name: 'apply_patch',
    description: 'Edit files',
    format: { type: 'grammar', syntax: 'lark', definition: 'start: /.+/s' },
  },
  { type: 'web_search' },
]

function lastUserText(parsed: ParsedRequest): string {
  const user = parsed.request.messages.findLast((message) => message.role === 'user')
  return typeof user?.content === 'string' ? user.content : ''
}

function policy(parsed: ParsedRequest): Outcome {
  const text = lastUserText(parsed)
  if (text.includes('rate limit me')) return { error: { status: 429, kind: 'rate_limit', message: 'slow down' } }
  if (text.includes('fail midway')) return { streamError: { status: 503, kind: 'overloaded', message: 'engine went away' } }
  if (text.includes('run long')) return { completion: engineCompletion({ role: 'assistant', content: 'This is cut' }, 'length') }
  if (parsed.request.messages.some((message) => message.role === 'tool')) {
    return { completion: engineCompletion({ role: 'assistant', content: 'done' }) }
  }
  return {
    completion: engineCompletion({
      role: 'assistant',
      content: null,
      reasoning_content: REASONING,
      tool_calls: [
        { id: 'chatcmpl-tool-1', type: 'function', function: { name: 'apply_patch', arguments: JSON.stringify({ input: PATCH }) } },
        { id: 'chatcmpl-tool-2', type: 'function', function: { name: 'exec_command', arguments: '{"cmd": "cat hello.txt"}' } },
      ],
    }),
  }
}

describe('openai responses SDK against the Responses adapter', () => {
  let server: AdapterServer
  let client: OpenAI
  let warnings: ReturnType<typeof captureWarnings>

  beforeAll(async () => {
    server = await startAdapterServer(policy)
    client = new OpenAI({ apiKey: 'rg_test', baseURL: `${server.url}/v1`, maxRetries: 0 })
  })
  afterAll(() => server.close())
  beforeEach(() => {
    warnings = captureWarnings()
  })
  afterEach(() => {
    warnings.restore()
    expect(warnings.seen).toEqual([])
  })

  it('runs a Codex-style two-turn task: streamed custom + function calls, then store:false replay', async () => {
    const input: OpenAI.Responses.ResponseInputItem[] = [
      { type: 'message', role: 'developer', content: [{ type: 'input_text', text: 'You are a coding agent.' }] },
      { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'create hello.txt containing hi' }] },
    ]
    const request = {
      model: 'gpt-5.5',
      tools: TOOLS,
      tool_choice: 'auto' as const,
      parallel_tool_calls: true,
      reasoning: { effort: 'medium' as const },
      store: false,
      include: ['reasoning.encrypted_content' as const],
    }
    const stream = client.responses.stream({ ...request, input })
    const events: string[] = []
    for await (const event of stream) events.push(event.type)
    const turn1 = await stream.finalResponse()
    expect(turn1.id).toBe('resp_cmpl_sdk0')
    expect(turn1.status).toBe('completed')
    expect(turn1.usage).toMatchObject({ input_tokens: 900, input_tokens_details: { cached_tokens: 300 }, output_tokens: 42 })
    expect(events.slice(0, 2)).toEqual(['response.created', 'response.in_progress'])
    expect(events).toContain('response.custom_tool_call_input.delta')
    expect(events).toContain('response.function_call_arguments.done')
    const [reasoning, patch, exec] = turn1.output
    expect(reasoning?.type === 'reasoning' && reasoning.summary[0]?.text).toBe(REASONING)
    expect(reasoning?.type === 'reasoning' && reasoning.encrypted_content).toMatch(/^rgrs1\./)
    expect(patch).toMatchObject({ type: 'custom_tool_call', name: 'apply_patch', input: PATCH, call_id: 'call_cmpl_sdk0_0' })
    expect(exec).toMatchObject({ type: 'function_call', name: 'exec_command', arguments: '{"cmd": "cat hello.txt"}' })
    const parsed1 = server.calls[0]?.parsed
    expect(parsed1?.warnings.map((warning) => warning.code)).toContain('tool_stripped')
    expect(parsed1?.request.tools).toHaveLength(2)

    // Codex replays the items with store:false; the summary may be dropped, the token must carry it.
    const replay = turn1.output.map((item) => (item.type === 'reasoning' ? { ...item, summary: [] } : item))
    const turn2 = await client.responses.create({
      ...request,
      input: [
        ...input,
        ...(replay as OpenAI.Responses.ResponseInputItem[]),
        { type: 'custom_tool_call_output', call_id: 'call_cmpl_sdk0_0', output: 'Success. Updated A hello.txt' },
        { type: 'function_call_output', call_id: 'call_cmpl_sdk0_1', output: 'hi\n' },
      ],
    })
    expect(turn2.output_text).toBe('done')
    const history = server.calls[1]?.parsed?.request.messages ?? []
    expect(history[0]).toEqual({ role: 'system', content: 'You are a coding agent.' })
    const assistant = history.find((message) => message.role === 'assistant')
    expect(assistant?.reasoning_content).toBe(REASONING)
    expect(assistant?.tool_calls).toEqual([
      { id: 'call_cmpl_sdk0_0', type: 'function', function: { name: 'apply_patch', arguments: JSON.stringify({ input: PATCH }) } },
      { id: 'call_cmpl_sdk0_1', type: 'function', function: { name: 'exec_command', arguments: '{"cmd": "cat hello.txt"}' } },
    ])
    expect(history.slice(-2).map((message) => message.tool_call_id)).toEqual(['call_cmpl_sdk0_0', 'call_cmpl_sdk0_1'])
  })

  it('numbers raw stream events 0, 1, 2, … and ends with response.completed', async () => {
    const stream = await client.responses.create({ model: 'm', input: 'hello', tools: TOOLS, stream: true })
    const numbers: number[] = []
    let last = ''
    for await (const event of stream) {
      numbers.push(event.sequence_number)
      last = event.type
    }
    expect(numbers).toEqual(numbers.map((_, index) => index))
    expect(last).toBe('response.completed')
  })

  it('ends a length stop as response.incomplete with max_output_tokens', async () => {
    const stream = client.responses.stream({ model: 'm', input: 'run long', max_output_tokens: 5 })
    const response = await stream.finalResponse()
    expect(response.status).toBe('incomplete')
    expect(response.incomplete_details?.reason).toBe('max_output_tokens')
    expect(response.output_text).toBe('This is cut')
    const json = await client.responses.create({ model: 'm', input: 'run long' })
    expect(json.status).toBe('incomplete')
  })

  it('raises RateLimitError with the status kept', async () => {
    const error = await client.responses.create({ model: 'm', input: 'rate limit me' }).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(OpenAI.RateLimitError)
    expect((error as InstanceType<typeof OpenAI.APIError>).status).toBe(429)
  })

  it('raises a mid-stream error event', async () => {
    const stream = client.responses.stream({ model: 'm', input: 'fail midway' })
    const error = await stream.finalResponse().catch((e: unknown) => e)
    expect(error).toBeInstanceOf(OpenAI.APIError)
    expect(String((error as Error).message)).toContain('engine went away')
  })

  it('rejects bad input with a 400 naming the field', async () => {
    const error = await client.responses
      .create({ model: 'm', input: [{ type: 'function_call_output', call_id: 'c', output: 5 }] as never })
      .catch((e: unknown) => e)
    expect(error).toBeInstanceOf(OpenAI.BadRequestError)
    expect((error as InstanceType<typeof OpenAI.APIError>).param).toBe('input[0].output')
  })
})
