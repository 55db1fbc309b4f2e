/**
 * Engine + edge running for real (wrangler dev → workerd), driven by the official `openai` SDK.
 */
import OpenAI from 'openai'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type CompletionRecordJson, engineTokenize, eventually, type Stack, startStack } from '../support/stack.ts'

const TOOLS: OpenAI.Chat.Completions.ChatCompletionTool[] = [
  {
    type: 'function',
    function: {
      name: 'write_file',
      description: 'Write a file.',
      parameters: {
        type: 'object',
        properties: { file_path: { type: 'string' }, content: { type: 'string' } },
        required: ['file_path', 'content'],
      },
    },
  },
]
const SYSTEM = { role: 'system' as const, content: 'You are a coding agent.' }
const USER = { role: 'user' as const, content: 'create hello.txt containing hi' }

let stack: Stack
let client: OpenAI
let sessionId: string

beforeAll(async () => {
  stack = await startStack()
  const session = await stack.createSession({ task_id: 'itest', metadata: { group_id: 'g1' } })
  sessionId = session.session_id
  client = new OpenAI({ baseURL: session.base_urls.openai, apiKey: session.token, maxRetries: 0 })
})

afterAll(async () => {
  await stack?.stop()
})

/** What the engine samples for this exact engine body (deterministic per seed). */
async function engineDirect(record: CompletionRecordJson) {
  const response = await fetch(`${stack.engine.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ ...record.request, return_token_ids: true, logprobs: true, top_logprobs: 0, stream: false }),
  })
  return (await response.json()) as {
    prompt_token_ids: number[]
    choices: { token_ids: number[]; logprobs: { content: { logprob: number }[] } }[]
  }
}

async function expectFaithful(record: CompletionRecordJson, messages: unknown[], tools?: unknown[]) {
  expect(record.status).toBe('ok')
  expect(record.trainable).toBe(true)
  expect(record.prompt_token_ids).toEqual(await engineTokenize(stack.engine.url, messages, tools))
  const direct = await engineDirect(record)
  expect(record.prompt_token_ids).toEqual(direct.prompt_token_ids)
  expect(record.response_token_ids).toEqual(direct.choices[0]!.token_ids)
  expect(record.response_logprobs).toEqual(direct.choices[0]!.logprobs.content.map((entry) => entry.logprob))
  expect(record.response_token_ids.at(-1)).toBe(151645)
}

describe('OpenAI chat through the edge', () => {
  let toolCall: OpenAI.Chat.Completions.ChatCompletionMessageFunctionToolCall

  it('answers a non-streaming tool call and records the exact tokens', async () => {
    const raw = await client.chat.completions.create({ model: 'gpt-harness', messages: [SYSTEM, USER], tools: TOOLS }).asResponse()
    const json = (await raw.json()) as Record<string, unknown> & {
      choices: { message: OpenAI.Chat.Completions.ChatCompletionMessage; finish_reason: string }[]
    }
    // No engine token fields leak to the harness.
    expect(JSON.stringify(json)).not.toMatch(/token_ids|prompt_logprobs/)
    expect(json.model).toBe('gpt-harness')
    const message = json.choices[0]!.message
    expect(json.choices[0]!.finish_reason).toBe('tool_calls')
    toolCall = message.tool_calls![0] as OpenAI.Chat.Completions.ChatCompletionMessageFunctionToolCall
    expect(toolCall.function.name).toBe('write_file')
    expect(JSON.parse(toolCall.function.arguments)).toMatchObject({ content: 'hi' })

    const records = await stack.completions(sessionId)
    expect(records).toHaveLength(1)
    const [record] = records
    expect(record!.stream).toBe(false)
    expect(record!.original_request).toMatchObject({ model: 'gpt-harness' })
    expect(record!.request.model).toBe('Qwen/Qwen3-8B')
    expect(record!.request).not.toHaveProperty('return_token_ids')
    expect(record!.provenance.sampling_params).toMatchObject({ return_token_ids: true, logprobs: true, top_logprobs: 0 })
    expect(record!.response_message.tool_calls![0]!.function.arguments).toBe(toolCall.function.arguments)
    await expectFaithful(record!, [SYSTEM, USER], TOOLS)
  })

  it('streams the same answer as a synthetic SSE stream and records it', async () => {
    const stream = await client.chat.completions.create({
      model: 'gpt-harness',
      messages: [SYSTEM, USER],
      tools: TOOLS,
      stream: true,
      stream_options: { include_usage: true },
    })
    let content = ''
    const calls: { id?: string; name?: string; arguments: string }[] = []
    let finish: string | null = null
    let usage: OpenAI.CompletionUsage | undefined
    for await (const chunk of stream) {
      if (chunk.usage) usage = chunk.usage
      const choice = chunk.choices[0]
      if (!choice) continue
      content += choice.delta.content ?? ''
      for (const call of choice.delta.tool_calls ?? []) {
        calls[call.index] ??= { arguments: '' }
        const slot = calls[call.index]!
        if (call.id) slot.id = call.id
        if (call.function?.name) slot.name = call.function.name
        slot.arguments += call.function?.arguments ?? ''
      }
      finish = choice.finish_reason ?? finish
    }
    expect(finish).toBe('tool_calls')
    expect(calls).toHaveLength(1)
    expect(calls[0]!.name).toBe('write_file')
    expect(calls[0]!.arguments).toBe(toolCall.function.arguments)
    const records = await stack.completions(sessionId)
    const record = records.at(-1)!
    expect(record.stream).toBe(true)
    expect(usage?.completion_tokens).toBe(record.response_token_ids.length)
    expect(usage?.prompt_tokens).toBe(record.prompt_token_ids.length)
    expect(content).toBe(record.response_message.content ?? '')
    await expectFaithful(record, [SYSTEM, USER], TOOLS)
  })

  it('takes a second turn with the tool result and records a prompt extending the first', async () => {
    const messages: OpenAI.Chat.Completions.ChatCompletionMessageParam[] = [
      SYSTEM,
      USER,
      { role: 'assistant', content: null, tool_calls: [toolCall] },
      { role: 'tool', tool_call_id: toolCall.id, content: 'File written: hello.txt' },
    ]
    const response = await client.chat.completions.create({ model: 'gpt-harness', messages, tools: TOOLS })
    expect(response.choices[0]!.finish_reason).toBe('stop')
    expect(response.choices[0]!.message.content).toMatch(/hello\.txt/)
    const records = await stack.completions(sessionId)
    const [first, , second] = records
    expect(records).toHaveLength(3)
    await expectFaithful(second!, messages, TOOLS)
    // Turn 2's prompt starts with turn 1's prompt: the stored prompt is delta-coded against it.
    expect(second!.prompt_token_ids.slice(0, first!.prompt_token_ids.length)).toEqual(first!.prompt_token_ids)
  })

  it('keeps everything across an edge restart (persisted Durable Object state)', async () => {
    const before = await stack.completions(sessionId)
    await stack.restartEdge()
    const after = await stack.completions(sessionId)
    expect(after).toEqual(before)
    // The same token keeps working and new completions append after the old ones.
    await client.chat.completions.create({ model: 'gpt-harness', messages: [SYSTEM, USER], tools: TOOLS })
    const all = await stack.completions(sessionId)
    expect(all.map((r) => r.seq)).toEqual([0, 1, 2, 3])
    await expectFaithful(all[3]!, [SYSTEM, USER], TOOLS)
  })
})

describe('long contexts', () => {
  it('records every prompt exactly when the edge leaves the engine’s prompt ids as text for the session to read', async () => {
    // Answers of several thousand prompt ids: the ids travel unparsed and the session reads each prompt
    // against the previous one (turn 2 and 3 copy the earlier ids, parse only the new ones).
    const session = await stack.createSession({ task_id: 'itest-long' })
    const longClient = new OpenAI({ baseURL: session.base_urls.openai, apiKey: session.token, maxRetries: 0 })
    const output = 'src/config/loader.ts:118: export function loadConfig(path: string): Config {\n'.repeat(120)
    const messages: OpenAI.Chat.Completions.ChatCompletionMessageParam[] = [
      SYSTEM,
      { role: 'user', content: `Why does this fail?\n${output}` },
    ]
    for (let turn = 0; turn < 3; turn++) {
      const response = await longClient.chat.completions.create({ model: 'gpt-harness', messages, tools: TOOLS })
      const records = await stack.completions(session.session_id)
      const record = records.at(-1) as CompletionRecordJson
      expect(record.prompt_token_ids.length).toBeGreaterThan(1500)
      await expectFaithful(record, messages, TOOLS)
      if (turn > 0)
        expect(record.prompt_delta).toEqual({ parent_seq: turn - 1, shared_prefix_len: records[turn - 1]!.prompt_token_ids.length })
      messages.push(
        { role: 'assistant', content: response.choices[0]!.message.content ?? '' },
        { role: 'user', content: `Turn ${turn}:\n${output}` },
      )
    }
  })
})

describe('engine window', () => {
  it('clamps an output budget larger than the engine window instead of relaying a 400 (Claude Code asks 128k)', async () => {
    const response = await client.chat.completions.create({
      model: 'gpt-harness',
      messages: [SYSTEM, USER],
      tools: TOOLS,
      max_tokens: 128_000,
    })
    expect(response.choices[0]!.finish_reason).toBe('tool_calls')
    const record = (await stack.completions(sessionId)).at(-1)!
    const sent = record.provenance.sampling_params.max_tokens as number
    expect(sent).toBeLessThan(32_768)
    expect(sent).toBeGreaterThan(1000)
    expect((record as unknown as { warnings: { code: string }[] }).warnings.map((w) => w.code)).toContain('max_tokens_clamped')
  })
})

describe('upstream failures', () => {
  let failures: OpenAI
  let failureSession: string

  beforeAll(async () => {
    const session = await stack.createSession()
    failureSession = session.session_id
    failures = new OpenAI({ baseURL: session.base_urls.openai, apiKey: session.token, maxRetries: 0 })
  })

  it('relays a 5xx with its status, in OpenAI shape, and records nothing trainable', async () => {
    stack.engine.injectFaults([{ status: 503, body: { error: { message: 'engine overloaded', type: 'ServiceUnavailable', code: 503 } } }])
    const error = await failures.chat.completions.create({ model: 'm', messages: [USER] }).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(OpenAI.APIError)
    expect((error as InstanceType<typeof OpenAI.APIError>).status).toBe(503)
    expect((error as InstanceType<typeof OpenAI.APIError>).message).toContain('engine overloaded')
    const records = await stack.completions(failureSession)
    expect(records.at(-1)).toMatchObject({ status: 'failed', trainable: false, response_token_ids: [] })
  })

  it('turns a reset connection and a truncated body into 502s, and a slow engine into an error stream', async () => {
    stack.engine.injectFaults([{ reset: true }, { truncate: true }])
    for (let i = 0; i < 2; i++) {
      const error = await failures.chat.completions.create({ model: 'm', messages: [USER] }).catch((e: unknown) => e)
      expect((error as InstanceType<typeof OpenAI.APIError>).status).toBe(502)
    }
    stack.engine.injectFaults([{ status: 500 }])
    const stream = await failures.chat.completions.create({ model: 'm', messages: [USER], stream: true })
    const streamError = await (async () => {
      for await (const _chunk of stream) {
        // consume
      }
    })().catch((e: unknown) => e)
    expect(streamError).toBeInstanceOf(Error)
    const records = await stack.completions(failureSession)
    expect(records.slice(-3).map((r) => [r.status, r.trainable])).toEqual([
      ['failed', false],
      ['failed', false],
      ['failed', false],
    ])
  })

  // Streaming clients: the next keep-alive write fails once the client is gone. (Non-streaming clients are
  // detected through `request.signal` with the `enable_request_signal` flag on Cloudflare; the local
  // workerd/wrangler dev chain does not propagate that disconnect, so it is not asserted here.)
  it('aborts the engine call when a streaming client disconnects and records the completion as abandoned', async () => {
    // The engine would hold this call far longer than the wait below: the record can only turn up as
    // abandoned, and the engine only drop the request, if the edge cut the call short when the client left.
    // (The time that takes is a benchmark figure: `npm run bench:abort`.)
    stack.engine.injectFaults([{ delay_ms: 120_000 }])
    const controller = new AbortController()
    const stream = await failures.chat.completions.create({ model: 'm', messages: [USER], stream: true }, { signal: controller.signal })
    const consumed = (async () => {
      for await (const _chunk of stream) {
        // consume
      }
    })().catch((e: unknown) => e)
    // The engine holding the call proves the edge is waiting on it: abort then.
    await eventually(async () => expect(stack.engine.stats().in_flight).toBe(1))
    controller.abort()
    await consumed
    const record = await eventually(async () => {
      const last = (await stack.completions(failureSession)).at(-1)!
      expect(last.status).toBe('abandoned')
      return last
    })
    expect(record.trainable).toBe(false)
    expect(record.error).toBe('client disconnected')
    await eventually(async () => expect(stack.engine.stats().in_flight).toBe(0))
  })
})
