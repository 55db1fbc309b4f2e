/**
 * @module
 * The edge app (hono, in Node) with a fake session Durable Object and a fake engine: count-tokens routes
 * answer from `/tokenize` and record nothing; model lists come in the caller's shape; and each new API
 * runs through the real proxy pipeline (auth → parse → engine → record → answer / synthetic stream).
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest'
import type { CompletionInput, SessionConfig } from '../../../src/durable/session/record.ts'
import { jsonEvents, parseSseFrames } from '../contract/sse-frames.ts'

/**
 * The worker is typed for workerd (`Env`, `ExecutionContext`), so it is loaded by a computed specifier:
 * this Node test runs it without pulling the Workers program into the Node type-check.
 */
const WORKER = '../../../src/worker'
interface EdgeApp {
  fetch(request: Request, env: unknown, ctx: unknown): Response | Promise<Response>
}
let app: EdgeApp
let createSessionToken: (sessionId: string, secret: string) => Promise<string>

const SIGNING_KEY = 'routes-test-key'
const SESSION_ID = 'ses_routes_test'
const sessionConfig: SessionConfig = {
  session_id: SESSION_ID,
  task_id: null,
  created_at: '2026-05-01T00:00:00.000Z',
  upstream: { url: 'http://engine.test/v1', kind: 'vllm', served_model: 'qwen3-8b' },
  policy_version: null,
  metadata: {},
}
const recorded: CompletionInput[] = []
const stub = {
  config: async () => sessionConfig,
  revoked: async () => null,
  record: async (input: CompletionInput) => {
    recorded.push(input)
    return { seq: recorded.length - 1, completion_id: input.completion_id, stored_bytes: 0, duplicate: false }
  },
  completions: async () => [],
}
const env = {
  ROLLGATE_SIGNING_KEY: SIGNING_KEY,
  ROLLGATE_UPSTREAM_URL: 'http://engine.test',
  SESSIONS: { idFromName: (name: string) => name, get: () => stub },
}

interface EngineCall {
  url: string
  body: Record<string, unknown>
}
const engineCalls: EngineCall[] = []
let tokenizeStatus = 200

const ENGINE_ANSWER = {
  id: 'chatcmpl-1',
  created: 1_760_000_000,
  model: 'qwen3-8b',
  prompt_token_ids: [1, 2, 3],
  choices: [
    {
      index: 0,
      message: {
        role: 'assistant',
        content: 'Writing it.',
        reasoning: 'Use the write tool.',
        tool_calls: [{ id: 'chatcmpl-tool-9', type: 'function', function: { name: 'write', arguments: '{"path": "a.txt"}' } }],
      },
      finish_reason: 'tool_calls',
      stop_reason: null,
      token_ids: [7, 8, 9],
      logprobs: {
        content: [
          { token: 'a', logprob: -0.1 },
          { token: 'b', logprob: -0.2 },
          { token: 'c', logprob: -0.3 },
        ],
      },
    },
  ],
  usage: { prompt_tokens: 3, completion_tokens: 3, total_tokens: 6 },
}

async function fakeFetch(input: RequestInfo | URL, init?: RequestInit): Promise<Response> {
  const url = String(input)
  const body = init?.body ? (JSON.parse(String(init.body)) as Record<string, unknown>) : {}
  engineCalls.push({ url, body })
  if (url === 'http://engine.test/tokenize') {
    return tokenizeStatus === 200
      ? Response.json({ count: 17, max_model_len: 32768, tokens: [] })
      : new Response('no', { status: tokenizeStatus })
  }
  if (url === 'http://engine.test/v1/chat/completions') return Response.json(ENGINE_ANSWER)
  return new Response('unexpected', { status: 599 })
}

let token = ''
const pending: Promise<unknown>[] = []
const ctx = { waitUntil: (promise: Promise<unknown>) => void pending.push(promise), passThroughOnException() {}, props: {} }

async function call(path: string, init: RequestInit = {}) {
  const response = await app.fetch(new Request(`http://edge.test${path}`, init), env, ctx)
  const text = await response.text()
  await Promise.all(pending.splice(0))
  return { response, text, json: () => JSON.parse(text) as Record<string, unknown> }
}

const post = (body: unknown, headers: Record<string, string>) => ({
  method: 'POST',
  headers: { 'content-type': 'application/json', ...headers },
  body: JSON.stringify(body),
})

beforeAll(async () => {
  app = ((await import(`${WORKER}/app.ts`)) as { app: EdgeApp }).app
  createSessionToken = ((await import(`${WORKER}/../contract/session-token.ts`)) as { createSessionToken: typeof createSessionToken })
    .createSessionToken
  token = await createSessionToken(SESSION_ID, SIGNING_KEY)
  vi.stubGlobal('fetch', fakeFetch)
})
afterAll(() => vi.unstubAllGlobals())
beforeEach(() => {
  engineCalls.length = 0
  recorded.length = 0
  tokenizeStatus = 200
})

describe('count-tokens routes', () => {
  const messagesBody = {
    model: 'claude-sonnet-4-5',
    system: 'sys',
    messages: [{ role: 'user', content: 'hi' }],
    tools: [{ name: 'Bash', input_schema: { type: 'object' } }],
  }

  it('answers Anthropic count_tokens from /tokenize with the served model, recording nothing', async () => {
    const { response, json } = await call(
      '/v1/messages/count_tokens?beta=true',
      post(messagesBody, { 'x-api-key': token, 'anthropic-version': '2023-06-01' }),
    )
    expect(response.status).toBe(200)
    expect(json()).toEqual({ input_tokens: 17 })
    expect(response.headers.get('x-rollgate-token-count')).toBe('tokenize')
    expect(engineCalls).toEqual([
      {
        url: 'http://engine.test/tokenize',
        body: {
          model: 'qwen3-8b',
          messages: [
            { role: 'system', content: 'sys' },
            { role: 'user', content: 'hi' },
          ],
          tools: [{ type: 'function', function: { name: 'Bash', parameters: { type: 'object' } } }],
          add_generation_prompt: true,
        },
      },
    ])
    expect(recorded).toEqual([])
  })

  it('works under a /s/<token> base URL and for Gemini :countTokens', async () => {
    const viaPath = await call(`/s/${token}/v1/messages/count_tokens`, post(messagesBody, {}))
    expect(viaPath.json()).toEqual({ input_tokens: 17 })
    const gemini = await call(
      '/v1beta/models/gemini-2.5-flash:countTokens',
      post({ contents: [{ role: 'user', parts: [{ text: 'hi' }] }] }, { 'x-goog-api-key': token }),
    )
    expect(gemini.json()).toEqual({ totalTokens: 17 })
    expect(engineCalls.map((entry) => entry.url)).toEqual(['http://engine.test/tokenize', 'http://engine.test/tokenize'])
    expect(recorded).toEqual([])
  })

  it('falls back to an estimate when the engine cannot tokenize', async () => {
    tokenizeStatus = 404
    const { response, json } = await call('/v1/messages/count_tokens', post(messagesBody, { 'x-api-key': token }))
    expect(response.headers.get('x-rollgate-token-count')).toBe('estimate')
    expect(json().input_tokens).toBeGreaterThan(0)
  })

  it('renders auth and validation failures in the caller shape', async () => {
    const unauthenticated = await call('/v1/messages/count_tokens', post(messagesBody, {}))
    expect(unauthenticated.response.status).toBe(401)
    expect(unauthenticated.json()).toMatchObject({ type: 'error', error: { type: 'authentication_error' } })
    const bad = await call(
      '/v1/messages/count_tokens',
      post({ model: 'm', messages: [{ role: 'robot', content: 'x' }] }, { 'x-api-key': token }),
    )
    expect(bad.response.status).toBe(400)
    expect(bad.json()).toMatchObject({ type: 'error', error: { type: 'invalid_request_error' } })
    expect(JSON.stringify(bad.json())).toContain('messages[0].role')
    const googleBad = await call('/v1beta/models/g:countTokens', post({ contents: 'nope' }, { 'x-goog-api-key': token }))
    expect(googleBad.json()).toMatchObject({ error: { code: 400, status: 'INVALID_ARGUMENT' } })
    expect(engineCalls).toEqual([])
  })
})

describe('model lists', () => {
  it("lists models in Anthropic's shape for Claude Code and OpenAI's otherwise", async () => {
    const claude = await call('/v1/models?limit=1000', { headers: { 'x-api-key': token, 'anthropic-version': '2023-06-01' } })
    expect(claude.json()).toMatchObject({
      data: [{ type: 'model', id: 'qwen3-8b', display_name: 'qwen3-8b', created_at: '2026-05-01T00:00:00.000Z', object: 'model' }],
      has_more: false,
      first_id: 'qwen3-8b',
      last_id: 'qwen3-8b',
    })
    const openai = await call('/v1/models', { headers: { authorization: `Bearer ${token}` } })
    expect(openai.json()).toEqual({
      object: 'list',
      data: [{ id: 'qwen3-8b', object: 'model', created: 1777593600, owned_by: 'rollgate' }],
    })
  })

  it("lists and gets models in Gemini's shape", async () => {
    const list = await call('/v1beta/models', { headers: { 'x-goog-api-key': token } })
    expect(list.json()).toMatchObject({
      models: [{ name: 'models/qwen3-8b', supportedGenerationMethods: expect.arrayContaining(['generateContent']) }],
    })
    const one = await call('/v1beta/models/qwen3-8b', { headers: { 'x-goog-api-key': token } })
    expect(one.json()).toMatchObject({ name: 'models/qwen3-8b' })
    const missing = await call('/v1beta/models/other', { headers: { 'x-goog-api-key': token } })
    expect(missing.response.status).toBe(404)
    expect(missing.json()).toMatchObject({ error: { code: 404, status: 'NOT_FOUND' } })
  })
})

describe('the proxy pipeline with the new adapters', () => {
  it('answers Anthropic (JSON) and records the completion with its api id', async () => {
    const { response, json } = await call(
      '/v1/messages?beta=true',
      post({ model: 'claude-opus-4-8', max_tokens: 100, messages: [{ role: 'user', content: 'write a.txt' }] }, { 'x-api-key': token }),
    )
    expect(response.status).toBe(200)
    const message = json() as { id: string; content: { type: string }[]; stop_reason: string }
    expect(message.content.map((block) => block.type)).toEqual(['thinking', 'text', 'tool_use'])
    expect(message.stop_reason).toBe('tool_use')
    expect(recorded).toHaveLength(1)
    expect(message.id).toBe(`msg_${recorded[0]?.completion_id}`)
    expect(recorded[0]).toMatchObject({ api: 'anthropic', model_requested: 'claude-opus-4-8', status: 'ok' })
    expect(engineCalls[0]?.body).toMatchObject({ model: 'qwen3-8b', return_token_ids: true, max_tokens: 100 })
    expect(engineCalls[0]?.body).not.toHaveProperty('stream')
  })

  it('streams Responses and Gemini answers from one non-streaming engine call each', async () => {
    const responses = await call(
      '/v1/responses',
      post({ model: 'gpt-5.5', input: 'hi', stream: true }, { authorization: `Bearer ${token}` }),
    )
    expect(responses.response.headers.get('content-type')).toContain('text/event-stream')
    const events = jsonEvents(parseSseFrames(responses.text))
    expect(events.map((event) => event.sequence_number)).toEqual(events.map((_, index) => index))
    expect(events.at(-1)?.type).toBe('response.completed')
    const gemini = await call(
      '/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse',
      post({ contents: [{ role: 'user', parts: [{ text: 'hi' }] }] }, { 'x-goog-api-key': token }),
    )
    // Gemini keep-alives are bare empty lines before the frames.
    const frames = jsonEvents(parseSseFrames(gemini.text.replace(/^\n+/, ''))) as { candidates: { finishReason?: string }[] }[]
    expect(frames.at(-1)?.candidates[0]?.finishReason).toBe('STOP')
    expect(recorded.map((input) => input.api)).toEqual(['openai-responses', 'google'])
    expect(engineCalls.map((entry) => entry.url)).toEqual([
      'http://engine.test/v1/chat/completions',
      'http://engine.test/v1/chat/completions',
    ])
  })

  it('rejects Gemini bad input with 400 INVALID_ARGUMENT before any engine call', async () => {
    const bad = await call('/v1beta/models/g:generateContent', post({ contents: [] }, { 'x-goog-api-key': token }))
    expect(bad.response.status).toBe(400)
    expect(bad.json()).toMatchObject({ error: { code: 400, status: 'INVALID_ARGUMENT' } })
    expect(engineCalls).toEqual([])
  })
})

describe('Gemini paths with a served model id that contains "/"', () => {
  const slashed = 'Qwen/Qwen3-8B'
  const withServed = async <T>(run: () => Promise<T>): Promise<T> => {
    const before = sessionConfig.upstream.served_model
    sessionConfig.upstream.served_model = slashed
    try {
      return await run()
    } finally {
      sessionConfig.upstream.served_model = before
    }
  }
  const contents = { contents: [{ role: 'user', parts: [{ text: 'hi' }] }] }

  it('generates, streams and counts at models/Qwen/Qwen3-8B (raw slash and %2F), on v1beta and v1', async () => {
    for (const model of [slashed, encodeURIComponent(slashed)]) {
      for (const version of ['v1beta', 'v1']) {
        const generated = await call(`/${version}/models/${model}:generateContent`, post(contents, { 'x-goog-api-key': token }))
        expect(generated.response.status, `${version} ${model}`).toBe(200)
        expect(generated.json()).toMatchObject({ modelVersion: slashed })
      }
    }
    const streamed = await call(`/v1beta/models/${slashed}:streamGenerateContent?alt=sse`, post(contents, { 'x-goog-api-key': token }))
    expect(streamed.response.headers.get('content-type')).toContain('text/event-stream')
    const counted = await call(`/v1beta/models/${slashed}:countTokens?key=${token}`, post(contents, {}))
    expect(counted.json()).toEqual({ totalTokens: 17 })
    expect(recorded.map((input) => input.model_requested)).toEqual([slashed, slashed, slashed, slashed, slashed])
  })

  it('gets the model by its listed name, and lists in Google shape for a Google client at /v1/models', async () => {
    await withServed(async () => {
      const list = await call('/v1beta/models', { headers: { 'x-goog-api-key': token } })
      const name = (list.json() as { models: { name: string }[] }).models[0]?.name
      expect(name).toBe(`models/${slashed}`)
      for (const path of [`/v1beta/${name}`, `/v1beta/models/${encodeURIComponent(slashed)}`, `/v1/${name}?key=${token}`]) {
        const one = await call(path, { headers: path.includes('key=') ? {} : { 'x-goog-api-key': token } })
        expect(one.response.status, path).toBe(200)
        expect(one.json()).toMatchObject({ name: `models/${slashed}` })
      }
      for (const headers of [{ 'x-goog-api-key': token }]) {
        const v1 = await call('/v1/models', { headers })
        expect(v1.json()).toMatchObject({ models: [{ name: `models/${slashed}` }] })
      }
      const viaKey = await call(`/v1/models?key=${token}`, {})
      expect(viaKey.json()).toMatchObject({ models: [{ name: `models/${slashed}` }] })
      const openai = await call('/v1/models', { headers: { authorization: `Bearer ${token}` } })
      expect(openai.json()).toMatchObject({ object: 'list', data: [{ id: slashed }] })
    })
  })

  it('answers an unknown Gemini method with a 404 in Google shape', async () => {
    const unknown = await call(`/v1beta/models/${slashed}:embedContent`, post(contents, { 'x-goog-api-key': token }))
    expect(unknown.response.status).toBe(404)
    expect(unknown.json()).toMatchObject({
      error: { code: 404, status: 'NOT_FOUND', message: expect.stringContaining('method embedContent') },
    })
    expect(engineCalls.filter((entry) => entry.url.endsWith('/chat/completions'))).toEqual([])
  })
})
