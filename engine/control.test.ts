import OpenAI from 'openai'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { loadQwen3, type Qwen3 } from './qwen3.ts'
import { type EngineHandle, type EngineStats, startEngine } from './server.ts'
import { assistantMessageFrom, createChat, postJson, tokenizeMessages, type VllmChatParams } from './test-support.ts'

const START_TIMEOUT_MS = 60_000
const DELAY_MS = 300

let engine: EngineHandle
let client: OpenAI
let qwen3: Qwen3

beforeAll(async () => {
  engine = await startEngine({ port: 0, seed: 3 })
  client = new OpenAI({ baseURL: `${engine.url}/v1`, apiKey: 'x', maxRetries: 0 })
  qwen3 = await loadQwen3()
}, START_TIMEOUT_MS)

afterEach(async () => {
  await fetch(`${engine.url}/_stand-in/faults`, { method: 'DELETE' })
  engine.setPolicy({ policy: 'scripted', script: null, seed: 3, latencyMs: 0, tokenDelayMs: 0 })
})

afterAll(async () => {
  await engine?.close()
})

const bashTool = {
  type: 'function' as const,
  function: {
    name: 'bash',
    parameters: { type: 'object', properties: { cmd: { type: 'string' } }, required: ['cmd'] },
  },
}
const messages = [{ role: 'user' as const, content: 'create hello.txt containing hi there' }]
const request: VllmChatParams = { messages, tools: [bashTool], return_token_ids: true }

async function injectFaults(faults: unknown): Promise<void> {
  const { status } = await postJson(`${engine.url}/_stand-in/faults`, faults)
  expect(status).toBe(200)
}

async function stats(): Promise<EngineStats> {
  return (await (await fetch(`${engine.url}/_stand-in/stats`)).json()) as EngineStats
}

function rawChat(body: Record<string, unknown>): Promise<Response> {
  return fetch(`${engine.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  })
}

describe('fault injection', () => {
  it('answers an injected status once, then recovers', async () => {
    await injectFaults([{ status: 503 }])
    await expect(createChat(client, request)).rejects.toMatchObject({
      status: 503,
      error: { type: 'ServiceUnavailableError', code: 503 },
    })
    const ok = await createChat(client, request)
    expect(ok.choices[0]?.finish_reason).toBe('tool_calls')
  })

  it('lets SDK retries succeed through transient errors', async () => {
    const retrying = new OpenAI({ baseURL: `${engine.url}/v1`, apiKey: 'x', maxRetries: 2 })
    const before = (await stats()).requests.chat_completions ?? 0
    await injectFaults([
      {
        status: 429,
        body: { error: { message: 'slow down', type: 'RateLimitError', param: null, code: 429 } },
        headers: { 'retry-after-ms': '10' },
      },
      { status: 500, headers: { 'retry-after-ms': '10' } },
    ])
    const response = await createChat(retrying, request)
    expect(response.choices[0]?.token_ids.length).toBeGreaterThan(0)
    const after = await stats()
    expect((after.requests.chat_completions ?? 0) - before).toBe(3)
    expect(after.faults.pending).toBe(0)
  })

  it('delays a response', async () => {
    await injectFaults({ delay_ms: DELAY_MS })
    const { applied } = (await stats()).faults
    const started = performance.now()
    await createChat(client, request)
    // A lower bound only (load makes a call slower, never faster).
    expect(performance.now() - started).toBeGreaterThanOrEqual(DELAY_MS - 5)
    // The delay was that one request's: the engine's own counters, not a clock, say the next one found no fault.
    expect((await stats()).faults).toEqual({ applied: applied + 1, pending: 0 })
    await createChat(client, request)
    expect((await stats()).faults).toEqual({ applied: applied + 1, pending: 0 })
  })

  it('resets the connection without answering', async () => {
    await injectFaults([{ reset: true }])
    await expect(rawChat({ messages })).rejects.toThrow()
    expect((await rawChat({ messages })).status).toBe(200)
  })

  it('truncates a JSON body mid-way', async () => {
    const full = await (await rawChat({ messages, return_token_ids: true })).text()
    await injectFaults([{ truncate: true }])
    const response = await rawChat({ messages, return_token_ids: true })
    expect(response.status).toBe(200)
    expect(Number(response.headers.get('content-length'))).toBe(Buffer.byteLength(full))
    await expect(response.text()).rejects.toThrow()
  })

  it('truncates an SSE stream before [DONE]', async () => {
    await injectFaults([{ truncate: true }])
    const response = await rawChat({ messages, stream: true })
    expect(response.status).toBe(200)
    const reader = response.body?.getReader()
    let received = ''
    const decoder = new TextDecoder()
    let failed = false
    try {
      for (let read = await reader?.read(); read && !read.done; read = await reader?.read()) {
        received += decoder.decode(read.value, { stream: true })
      }
    } catch {
      failed = true
    }
    expect(failed).toBe(true)
    expect(received).toContain('data: {')
    expect(received).not.toContain('[DONE]')
  })

  it('clears pending faults', async () => {
    await injectFaults([{ status: 500 }, { status: 500 }])
    const listed = (await (await fetch(`${engine.url}/_stand-in/faults`)).json()) as {
      pending: unknown[]
    }
    expect(listed.pending).toHaveLength(2)
    const cleared = await fetch(`${engine.url}/_stand-in/faults`, { method: 'DELETE' })
    expect(await cleared.json()).toEqual({ cleared: 2 })
    expect((await rawChat({ messages })).status).toBe(200)
  })

  it('rejects malformed fault lists', async () => {
    const { status } = await postJson(`${engine.url}/_stand-in/faults`, [{ status: 'soon' }])
    expect(status).toBe(400)
  })
})

describe('latency and stats', () => {
  it('applies base latency and per-token delay', async () => {
    engine.setPolicy({ latencyMs: DELAY_MS })
    const started = performance.now()
    await createChat(client, request)
    expect(performance.now() - started).toBeGreaterThanOrEqual(DELAY_MS - 5)

    engine.setPolicy({ latencyMs: 0, tokenDelayMs: 5 })
    const streamStart = performance.now()
    const response = await rawChat({ ...request, stream: true })
    const text = await response.text()
    const tokenFrames = text.split('\n\n').filter((frame) => frame.includes('"token_ids"')).length
    expect(tokenFrames).toBeGreaterThan(10)
    expect(performance.now() - streamStart).toBeGreaterThanOrEqual(tokenFrames * 5 - 5)
  })

  it('counts requests per endpoint', async () => {
    const before = await stats()
    await createChat(client, request)
    await postJson(`${engine.url}/tokenize`, { prompt: 'x' })
    const after = await stats()
    expect((after.requests.chat_completions ?? 0) - (before.requests.chat_completions ?? 0)).toBe(1)
    expect((after.requests.tokenize ?? 0) - (before.requests.tokenize ?? 0)).toBe(1)
  })
})

describe('policy switching', () => {
  it('switches to a script at runtime', async () => {
    const { status, json } = await postJson(`${engine.url}/_stand-in/policy`, {
      policy: 'script',
      script: [
        {
          reasoning: 'scripted thought',
          content: 'Step one.',
          tool_calls: [{ name: 'bash', arguments: { cmd: 'ls' } }],
        },
      ],
    })
    expect(status).toBe(200)
    expect(json).toMatchObject({ policy: 'script', script_turns: 1 })
    const response = await createChat(client, request)
    const choice = response.choices[0]
    expect(choice?.message.reasoning).toBe('\nscripted thought\n')
    expect(choice?.message.content).toBe('\n\nStep one.\n')
    expect(choice?.message.tool_calls?.[0]?.function).toEqual({
      name: 'bash',
      arguments: '{"cmd": "ls"}',
    })
    const invalid = await postJson(`${engine.url}/_stand-in/policy`, { policy: 'oracle' })
    expect(invalid.status).toBe(400)
  })

  it('changes logprobs when the engine seed changes', async () => {
    const logprobRequest = { ...request, logprobs: true }
    const first = await createChat(client, logprobRequest)
    engine.setPolicy({ seed: 4 })
    const second = await createChat(client, logprobRequest)
    expect(second.choices[0]?.logprobs).not.toEqual(first.choices[0]?.logprobs)
    engine.setPolicy({ seed: 3 })
    expect((await createChat(client, logprobRequest)).choices[0]?.logprobs).toEqual(first.choices[0]?.logprobs)
  })

  it('drift mode samples non-canonical ids that the next prompt no longer contains', async () => {
    const turn = async () => {
      const first = await createChat(client, request)
      const choice = first.choices[0]
      if (choice === undefined) throw new Error('no choice')
      const next = [
        ...messages,
        assistantMessageFrom(choice),
        { role: 'tool', tool_call_id: choice.message.tool_calls?.[0]?.id, content: 'done' },
      ]
      const nextPrompt = await tokenizeMessages(engine.url, { messages: next, tools: [bashTool] })
      const sampledSlice = nextPrompt.slice(first.prompt_token_ids.length, first.prompt_token_ids.length + choice.token_ids.length)
      return {
        choice,
        sampledSlice,
        promptPrefix: nextPrompt.slice(0, first.prompt_token_ids.length),
        first,
      }
    }
    const canonical = await turn()
    expect(canonical.sampledSlice).toEqual(canonical.choice.token_ids)

    const { status } = await postJson(`${engine.url}/_stand-in/policy`, {
      policy: 'drift',
      script: null,
      seed: 3,
    })
    expect(status).toBe(200)
    const drifted = await turn()
    const ids = drifted.choice.token_ids
    const text = qwen3.decode(ids)
    expect(text).toBe(qwen3.decode(canonical.choice.token_ids))
    expect(ids).not.toEqual(qwen3.encode(text))
    expect(drifted.choice.message.tool_calls?.[0]?.function).toEqual(canonical.choice.message.tool_calls?.[0]?.function)
    expect(drifted.promptPrefix).toEqual(drifted.first.prompt_token_ids)
    expect(drifted.sampledSlice).not.toEqual(ids)
    // Deterministic for the seed.
    expect((await createChat(client, request)).choices[0]?.token_ids).toEqual(ids)
  })
})
