/**
 * @module
 * The edge's promises, observed directly on the real hono app in Node with a session stub whose `record` the
 * test controls (held, failed, closed) and a fake engine with one fixed sampled completion:
 * - write-before-respond: no answer, and no frame carrying the completion, leaves before its record commits;
 * - a failed capture never answers as success; a finalized session answers 409, in the caller's shape;
 * - credentials: 401 in each provider's shape, tokens compared by content, the verified-token cache
 *   refuses a forged signature for a session id it has just verified;
 * - stream metadata agrees with the sampled completion (not with the adapter's own JSON answer).
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest'
import type { CompletionInput, SessionConfig } from '../../../src/durable/session/record.ts'
import { applyTextDelta } from '../../../src/durable/session/text-delta.ts'
import { jsonEvents, parseSseFrames } from '../contract/sse-frames.ts'

const WORKER = '../../../src/worker'
interface EdgeApp {
  fetch(request: Request, env: unknown, ctx: unknown): Response | Promise<Response>
}
let app: EdgeApp
let createSessionToken: (sessionId: string, secret: string) => Promise<string>
let timingSafeEqual: (a: string, b: string) => boolean

const SIGNING_KEY = 'promises-test-key'
const SESSION_ID = 'ses_promises_test'
const sessionConfig: SessionConfig = {
  session_id: SESSION_ID,
  task_id: null,
  created_at: '2026-05-01T00:00:00.000Z',
  upstream: { url: 'http://engine.test/v1', kind: 'vllm', served_model: 'qwen3-8b' },
  policy_version: null,
  metadata: {},
}

/** The one sampled completion the fake engine returns: 5 prompt tokens, 4 sampled tokens. */
const PROMPT_IDS = [11, 12, 13, 14, 15]
const SAMPLED_IDS = [7, 8, 9, 10]
const ENGINE_ANSWER = {
  id: 'chatcmpl-1',
  created: 1_760_000_000,
  model: 'qwen3-8b',
  prompt_token_ids: PROMPT_IDS,
  choices: [
    {
      index: 0,
      message: {
        role: 'assistant',
        content: 'Sampled words.',
        tool_calls: [{ id: 'chatcmpl-tool-9', type: 'function', function: { name: 'write_file', arguments: '{"path": "a.txt"}' } }],
      },
      finish_reason: 'tool_calls',
      stop_reason: null,
      token_ids: SAMPLED_IDS,
      logprobs: { content: SAMPLED_IDS.map((id) => ({ token: `t${id}`, logprob: -0.5 })) },
    },
  ],
  usage: { prompt_tokens: PROMPT_IDS.length, completion_tokens: SAMPLED_IDS.length, total_tokens: 9 },
}

type RecordMode = { kind: 'commit' } | { kind: 'hold' } | { kind: 'fail'; message: string }
let mode: RecordMode = { kind: 'commit' }
const committed: CompletionInput[] = []
/** Resolves when `record` is entered; `release` lets a held record commit. */
let recordEntered: PromiseWithResolvers<void>
let release: () => void = () => {}

let revokedReason: string | null = null
const stub = {
  config: async () => sessionConfig,
  revoked: async () => revokedReason,
  record: async (input: CompletionInput) => {
    recordEntered.resolve()
    if (mode.kind === 'fail') throw new Error(mode.message)
    if (mode.kind === 'hold') await new Promise<void>((resolve) => (release = resolve))
    committed.push(input)
    return { seq: committed.length - 1, completion_id: input.completion_id, stored_bytes: 0, duplicate: false }
  },
  completions: async () => [],
}
/** Other sessions a test sets up (their own config or rollout behaviour), by id. */
const otherStubs = new Map<string, unknown>()
const env = {
  ROLLGATE_SIGNING_KEY: SIGNING_KEY,
  ROLLGATE_ADMIN_TOKEN: 'admin-token-0123456789',
  ROLLGATE_RUNNER_TOKEN: 'runner-token-0123456789',
  ROLLGATE_UPSTREAM_URL: 'http://engine.test',
  SESSIONS: {
    idFromName: (name: string) => name,
    get: (id: string) => otherStubs.get(id) ?? (id === MISSING_SESSION ? missingStub : stub),
  },
}
/** A session id whose object holds no session (a token signed for a session never created). */
const MISSING_SESSION = 'ses_never_created'
const missingStub = { config: async () => null, revoked: async () => null }

/** Bodies the fake engine saw, in order, and the headers they came with. */
const engineBodies: string[] = []
const engineHeaders: Headers[] = []
/** A call whose body says "please hold" waits in the engine until the test releases it or its signal aborts. */
let engineEntered: PromiseWithResolvers<AbortSignal | undefined>
let engineRelease: PromiseWithResolvers<void>

async function fakeEngine(input: RequestInfo | URL, init?: RequestInit): Promise<Response> {
  if (String(input) !== 'http://engine.test/v1/chat/completions') return new Response('unexpected', { status: 599 })
  const body = typeof init?.body === 'string' ? init.body : ''
  engineBodies.push(body)
  engineHeaders.push(new Headers(init?.headers))
  if (body.includes('please fail')) return Response.json({ error: { message: 'engine overloaded', type: 'server_error' } }, { status: 503 })
  if (body.includes('please hold')) {
    const signal = init?.signal ?? undefined
    engineEntered.resolve(signal)
    await new Promise<void>((resolve, reject) => {
      engineRelease.promise.then(resolve)
      if (signal?.aborted) reject(signal.reason)
      signal?.addEventListener('abort', () => reject(signal.reason))
    })
  }
  return Response.json(ENGINE_ANSWER)
}

let token = ''
const pending: Promise<unknown>[] = []
const ctx = { waitUntil: (promise: Promise<unknown>) => void pending.push(promise), passThroughOnException() {}, props: {} }

function request(path: string, body: unknown, headers: Record<string, string>): Request {
  return new Request(`http://edge.test${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  })
}

async function call(path: string, body: unknown, headers: Record<string, string>) {
  const response = await app.fetch(request(path, body, headers), env, ctx)
  const text = await response.text()
  // A failed call's waitUntil promise rejects (workerd logs it); the answer above is what the client saw.
  await Promise.allSettled(pending.splice(0))
  return { response, text, json: () => JSON.parse(text) as Record<string, unknown> }
}

/** Let every ready callback, I/O callback and microtask run (no timers are involved). */
async function drain(): Promise<void> {
  for (let i = 0; i < 20; i++) await new Promise((resolve) => setImmediate(resolve))
}

interface ApiCase {
  name: string
  path: string
  streamPath: string
  body: Record<string, unknown>
  headers: () => Record<string, string>
  /** A frame or field only the final part of a stream carries. */
  finalMarker: string
  /** Checks an error body is in this API's own shape. */
  errorShape: (body: Record<string, unknown>, status: number) => void
  /** The message of an error body in this API's shape. */
  errorMessage: (body: Record<string, unknown>) => string
}

const errorMessage = (body: Record<string, unknown>) => (body as { error: { message: string } }).error.message

const API_CASES: ApiCase[] = [
  {
    name: 'openai-chat',
    path: '/v1/chat/completions',
    streamPath: '/v1/chat/completions',
    body: { model: 'm', messages: [{ role: 'user', content: 'hi' }] },
    headers: () => ({ authorization: `Bearer ${token}` }),
    finalMarker: '[DONE]',
    errorShape: (body) => expect(body).toMatchObject({ error: { message: expect.any(String), type: expect.any(String) } }),
    errorMessage,
  },
  {
    name: 'anthropic',
    path: '/v1/messages',
    streamPath: '/v1/messages',
    body: { model: 'claude-sonnet-4-5', max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] },
    headers: () => ({ 'x-api-key': token, 'anthropic-version': '2023-06-01' }),
    finalMarker: 'message_stop',
    errorShape: (body) => expect(body).toMatchObject({ type: 'error', error: { type: expect.any(String), message: expect.any(String) } }),
    errorMessage,
  },
  {
    name: 'openai-responses',
    path: '/v1/responses',
    streamPath: '/v1/responses',
    body: { model: 'gpt-5.5', input: 'hi' },
    headers: () => ({ authorization: `Bearer ${token}` }),
    finalMarker: 'response.completed',
    errorShape: (body) => expect(body).toMatchObject({ error: { message: expect.any(String), type: expect.any(String) } }),
    errorMessage,
  },
  {
    name: 'google',
    path: '/v1beta/models/gemini-2.5-flash:generateContent',
    streamPath: '/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse',
    body: { contents: [{ role: 'user', parts: [{ text: 'hi' }] }] },
    headers: () => ({ 'x-goog-api-key': token }),
    finalMarker: 'finishReason',
    errorShape: (body, status) =>
      expect(body).toMatchObject({ error: { code: status, message: expect.any(String), status: expect.any(String) } }),
    errorMessage,
  },
]

function streamBody(api: ApiCase): Record<string, unknown> {
  return api.name === 'openai-chat' || api.name === 'anthropic' || api.name === 'openai-responses'
    ? { ...api.body, stream: true }
    : api.body
}

beforeAll(async () => {
  app = ((await import(`${WORKER}/app.ts`)) as { app: EdgeApp }).app
  createSessionToken = ((await import(`${WORKER}/../contract/session-token.ts`)) as { createSessionToken: typeof createSessionToken })
    .createSessionToken
  timingSafeEqual = ((await import(`${WORKER}/auth/credentials.ts`)) as { timingSafeEqual: typeof timingSafeEqual }).timingSafeEqual
  token = await createSessionToken(SESSION_ID, SIGNING_KEY)
  vi.stubGlobal('fetch', fakeEngine)
})
afterAll(() => vi.unstubAllGlobals())
beforeEach(() => {
  revokedReason = null
  engineBodies.length = 0
  engineHeaders.length = 0
  engineEntered = Promise.withResolvers<AbortSignal | undefined>()
  engineRelease = Promise.withResolvers<void>()
  mode = { kind: 'commit' }
  committed.length = 0
  recordEntered = Promise.withResolvers<void>()
  release = () => {}
})

describe('write-before-respond', () => {
  for (const api of API_CASES) {
    it(`${api.name}: the JSON answer waits for the record to commit`, async () => {
      mode = { kind: 'hold' }
      let answered = false
      const answer = Promise.resolve(app.fetch(request(api.path, api.body, api.headers()), env, ctx)).then((response) => {
        answered = true
        return response
      })
      await recordEntered.promise
      await drain()
      expect(answered).toBe(false)
      release()
      const response = await answer
      expect(response.status).toBe(200)
      expect(await response.text()).toContain('Sampled words.')
      expect(committed).toHaveLength(1)
      await Promise.allSettled(pending.splice(0))
    })

    it(`${api.name}: no stream frame carrying the completion leaves before the record commits`, async () => {
      mode = { kind: 'hold' }
      const response = await app.fetch(request(api.streamPath, streamBody(api), api.headers()), env, ctx)
      const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader()
      let received = ''
      const reading = (async () => {
        for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) received += chunk.value
      })()
      await recordEntered.promise
      await drain()
      expect(received).not.toContain('Sampled words.')
      expect(received).not.toContain(api.finalMarker)
      release()
      await reading
      expect(received).toContain('Sampled words.')
      expect(received).toContain(api.finalMarker)
      await Promise.allSettled(pending.splice(0))
    })
  }
})

describe('a failed capture never answers as success', () => {
  for (const api of API_CASES) {
    it(`${api.name}: JSON → a 500 in the caller's shape, nothing of the completion`, async () => {
      mode = { kind: 'fail', message: 'SQLITE_FULL: database or disk is full' }
      const { response, text, json } = await call(api.path, api.body, api.headers())
      expect(response.status).toBe(500)
      expect(response.headers.get('x-rollgate-error-source')).toBe('edge')
      api.errorShape(json(), 500)
      expect(text).not.toContain('Sampled words.')
      expect(committed).toEqual([])
    })

    it(`${api.name}: stream → an error event, no completion frame`, async () => {
      mode = { kind: 'fail', message: 'SQLITE_FULL: database or disk is full' }
      const { text } = await call(api.streamPath, streamBody(api), api.headers())
      expect(text).toContain('capture failed: SQLITE_FULL')
      expect(text).not.toContain('Sampled words.')
      expect(text).not.toContain(api.finalMarker === '[DONE]' ? '"finish_reason":"tool_calls"' : api.finalMarker)
      expect(committed).toEqual([])
    })
  }

  it('a finalized session answers 409 in the caller shape, JSON and stream', async () => {
    for (const api of API_CASES) {
      mode = {
        kind: 'fail',
        message: `session closed: session ${SESSION_ID} was finalized at 2026-05-01T00:00:00.000Z; it records no more model calls`,
      }
      const { response, json } = await call(api.path, api.body, api.headers())
      expect(response.status, api.name).toBe(409)
      api.errorShape(json(), 409)
      expect(JSON.stringify(json())).toContain(`session ${SESSION_ID} was finalized`)
      expect(api.errorMessage(json()), api.name).toBe(
        `session ${SESSION_ID} was finalized at 2026-05-01T00:00:00.000Z; it records no more model calls`,
      )
      expect(JSON.stringify(json())).not.toContain('session closed:')
      const stream = await call(api.streamPath, streamBody(api), api.headers())
      expect(stream.text, api.name).toContain('was finalized at')
      expect(stream.text).not.toContain('Sampled words.')
    }
  })
})

describe('credentials', () => {
  it('401 in each provider shape when the key is missing or wrong', async () => {
    for (const api of API_CASES) {
      const headers = Object.fromEntries(
        Object.keys(api.headers()).map((name) => [name, name === 'authorization' ? 'Bearer rg_x.y' : 'rg_x.y']),
      )
      for (const sent of [{}, headers]) {
        const { response, json } = await call(api.path, api.body, sent)
        expect(response.status, api.name).toBe(401)
        api.errorShape(json(), 401)
      }
    }
    const gemini = await call(API_CASES[3]!.path, API_CASES[3]!.body, {})
    expect(gemini.json()).toMatchObject({ error: { code: 401, status: 'UNAUTHENTICATED' } })
    const anthropic = await call(API_CASES[1]!.path, API_CASES[1]!.body, {})
    expect(anthropic.json()).toMatchObject({ type: 'error', error: { type: 'authentication_error' } })
    const responses = await call(API_CASES[2]!.path, API_CASES[2]!.body, {})
    expect(responses.json()).toMatchObject({ error: { type: 'authentication_error' } })
    expect(committed).toEqual([])
  })

  it('the verified-token cache refuses a forged signature for a session id it has just verified', async () => {
    const good = await call('/v1/chat/completions', API_CASES[0]!.body, { authorization: `Bearer ${token}` })
    expect(good.response.status).toBe(200)
    const [idPart, signature] = token.slice(3).split('.') as [string, string]
    const flipped = `${signature[0] === 'A' ? 'B' : 'A'}${signature.slice(1)}`
    for (const forged of [`rg_${idPart}.${flipped}`, `rg_${idPart}.${'A'.repeat(43)}`]) {
      const { response } = await call('/v1/chat/completions', API_CASES[0]!.body, { authorization: `Bearer ${forged}` })
      expect(response.status).toBe(401)
    }
    expect(committed).toHaveLength(1)
  })

  it('admin and runner tokens are compared by content, not only by length', async () => {
    const sameLength = (secret: string, at: number) => `${secret.slice(0, at)}${secret[at] === 'x' ? 'y' : 'x'}${secret.slice(at + 1)}`
    for (const at of [0, 10, env.ROLLGATE_ADMIN_TOKEN.length - 1]) {
      const wrong = sameLength(env.ROLLGATE_ADMIN_TOKEN, at)
      const res = await app.fetch(
        new Request('http://edge.test/v1/sessions/x', { headers: { authorization: `Bearer ${wrong}` } }),
        env,
        ctx,
      )
      expect(res.status).toBe(401)
      expect(await res.json()).toMatchObject({ error: { message: 'invalid admin token' } })
      const runner = await app.fetch(
        new Request('http://edge.test/runners/connect?runner_id=r1', {
          headers: { authorization: `Bearer ${sameLength(env.ROLLGATE_RUNNER_TOKEN, at)}` },
        }),
        env,
        ctx,
      )
      expect(runner.status).toBe(401)
      expect(await runner.json()).toMatchObject({ error: { message: 'invalid runner token' } })
    }
    expect(timingSafeEqual('abc', 'abc')).toBe(true)
    expect(timingSafeEqual('', '')).toBe(true)
    for (const [a, b] of [
      ['abc', 'abd'],
      ['abc', 'xbc'],
      ['abc', 'ab'],
      ['ab', 'abc'],
      ['abc', ''],
      ['a\u0000', 'a'],
    ] as const) {
      expect(timingSafeEqual(a, b), `${a} vs ${b}`).toBe(false)
    }
  })
})

describe('stream metadata agrees with the sampled completion', () => {
  async function streamEvents(api: ApiCase) {
    const { text } = await call(api.streamPath, streamBody(api), api.headers())
    // Gemini's keep-alive is a bare empty line (see google-stream.ts): drop those before the strict frame parser.
    const frames = text
      .split('\n\n')
      .map((block) => block.replace(/^\n+/, ''))
      .filter(Boolean)
      .map((block) => `${block}\n\n`)
      .join('')
    return jsonEvents(parseSseFrames(frames)) as Record<string, unknown>[]
  }

  it('Anthropic: message_start input_tokens and message_delta usage', async () => {
    const events = await streamEvents(API_CASES[1]!)
    const start = events.find((event) => event.type === 'message_start') as { message: { usage: { input_tokens: number } } }
    expect(start.message.usage.input_tokens).toBe(PROMPT_IDS.length)
    const delta = events.find((event) => event.type === 'message_delta') as {
      usage: { output_tokens: number; input_tokens?: number }
      delta: { stop_reason: string }
    }
    expect(delta.usage.output_tokens).toBe(SAMPLED_IDS.length)
    if (delta.usage.input_tokens !== undefined) expect(delta.usage.input_tokens).toBe(PROMPT_IDS.length)
    expect(delta.delta.stop_reason).toBe('tool_use')
  })

  it('Responses: content_part.done text, function_call_arguments.done name and arguments, usage', async () => {
    const events = await streamEvents(API_CASES[2]!)
    const partDone = events.find((event) => event.type === 'response.content_part.done') as { part: { text: string } }
    expect(partDone.part.text).toBe('Sampled words.')
    const textDone = events.find((event) => event.type === 'response.output_text.done') as { text: string }
    expect(textDone.text).toBe('Sampled words.')
    const argsDone = events.find((event) => event.type === 'response.function_call_arguments.done') as { name?: string; arguments: string }
    expect(argsDone.arguments).toBe('{"path": "a.txt"}')
    expect(argsDone.name).toBe('write_file')
    const completed = events.find((event) => event.type === 'response.completed') as {
      response: { usage: { input_tokens: number; output_tokens: number } }
    }
    expect(completed.response.usage).toMatchObject({ input_tokens: PROMPT_IDS.length, output_tokens: SAMPLED_IDS.length })
  })

  it('Gemini: usageMetadata and the function call', async () => {
    const events = (await streamEvents(API_CASES[3]!)) as {
      candidates?: { content?: { parts?: { text?: string; functionCall?: { name: string; args: unknown } }[] } }[]
      usageMetadata?: { promptTokenCount: number; candidatesTokenCount: number; totalTokenCount: number }
    }[]
    const usage = events.at(-1)?.usageMetadata
    expect(usage).toMatchObject({
      promptTokenCount: PROMPT_IDS.length,
      candidatesTokenCount: SAMPLED_IDS.length,
      totalTokenCount: PROMPT_IDS.length + SAMPLED_IDS.length,
    })
    const parts = events.flatMap((event) => event.candidates?.[0]?.content?.parts ?? [])
    expect(parts.map((part) => part.text ?? '').join('')).toBe('Sampled words.')
    expect(parts.find((part) => part.functionCall)?.functionCall).toMatchObject({ name: 'write_file', args: { path: 'a.txt' } })
  })
})

describe('the pipeline', () => {
  const chat = API_CASES[0]!

  it('commits what was sent and sampled, and says where the time went', async () => {
    const { response, json } = await call(chat.path, { ...chat.body, temperature: 0.25 }, chat.headers())
    expect(response.status).toBe(200)
    expect(response.headers.get('server-timing')).toMatch(/^prepare;dur=\d+\.\d\d, upstream;dur=\d+\.\d\d, capture;dur=\d+\.\d\d$/)
    const [record] = committed
    expect(record!.completion_id).toMatch(/^cmpl_[0-9a-f]{24}$/)
    expect(record).toMatchObject({ status: 'ok', api: 'openai-chat', agent: 'main', stream: false })
    expect(record!.provenance).toMatchObject({ upstream_url: 'http://engine.test/v1', upstream_kind: 'vllm', route: 'direct' })
    expect(Array.from(record!.response_token_ids ?? [])).toEqual(SAMPLED_IDS)
    // The engine got the harness's request plus the capture keys; the record holds exactly what it got.
    const sent = JSON.parse(engineBodies[0]!) as Record<string, unknown>
    expect(sent).toMatchObject({ temperature: 0.25, return_token_ids: true, logprobs: true })
    expect(record!.request_text || record!.request_delta).toBeTruthy()
    expect(json()).toMatchObject({ choices: [{ message: { content: 'Sampled words.' } }] })
  })

  it('an engine error is relayed in the caller shape (status kept, source upstream) and recorded as failed', async () => {
    for (const api of API_CASES) {
      committed.length = 0
      const body = JSON.parse(JSON.stringify(api.body).replace('"hi"', '"please fail"')) as Record<string, unknown>
      const { response, json } = await call(api.path, body, api.headers())
      expect(response.status, api.name).toBe(503)
      expect(response.headers.get('x-rollgate-error-source')).toBe('upstream')
      api.errorShape(json(), 503)
      expect(committed.map((record) => record.status)).toEqual(['failed'])
      const stream = await call(api.streamPath, { ...streamBody(api), ...body }, api.headers())
      expect(stream.text, api.name).toContain('engine overloaded')
      expect(stream.text).not.toContain('Sampled words.')
      expect(committed.map((record) => record.status)).toEqual(['failed', 'failed'])
    }
  })

  it('refuses before the engine: no key, a session that does not exist, a revoked token, a bad agent label', async () => {
    const missing = await call(chat.path, chat.body, {})
    expect(missing.json()).toMatchObject({ error: { message: 'missing session token: send it as the API key' } })
    const ghost = await call(chat.path, chat.body, { authorization: `Bearer ${await createSessionToken(MISSING_SESSION, SIGNING_KEY)}` })
    expect(ghost.response.status).toBe(401)
    expect(ghost.json()).toMatchObject({ error: { message: 'session does not exist' } })
    revokedReason = 'session ended COMPLETED'
    const revoked = await call(chat.path, chat.body, chat.headers())
    expect(revoked.response.status).toBe(401)
    expect(revoked.json()).toMatchObject({ error: { message: 'session token revoked: session ended COMPLETED' } })
    revokedReason = null
    const label = await call(chat.path, chat.body, { ...chat.headers(), 'x-rollgate-agent': 'no spaces allowed' })
    expect(label.response.status).toBe(400)
    expect(label.json()).toMatchObject({ error: { param: 'x-rollgate-agent', message: 'agent label must match [A-Za-z0-9_.:-]{1,64}' } })
    const labelled = await call(chat.path, chat.body, { ...chat.headers(), 'x-rollgate-agent': 'sub:1' })
    expect(labelled.response.status).toBe(200)
    expect(committed.map((record) => record.agent)).toEqual(['sub:1'])
    expect(engineBodies).toHaveLength(1)
  })
})

describe('the pipeline, in detail', () => {
  const [chat, anthropic, responses, google] = API_CASES as [ApiCase, ApiCase, ApiCase, ApiCase]
  const held = (body: Record<string, unknown>) =>
    JSON.parse(JSON.stringify(body).replace('"hi"', '"please hold"')) as Record<string, unknown>

  /** A session of its own (config read once per isolate, so a new id per upstream), recording into `committed`. */
  async function session(id: string, config: Partial<SessionConfig>, behaviour: Record<string, unknown> = {}) {
    otherStubs.set(id, { ...stub, config: async () => ({ ...sessionConfig, session_id: id, ...config }), ...behaviour })
    return { authorization: `Bearer ${await createSessionToken(id, SIGNING_KEY)}` }
  }

  async function readAll(response: Response): Promise<string> {
    const text = await response.text()
    await Promise.allSettled(pending.splice(0))
    return text
  }

  it('completion ids are cmpl_ and 24 hex digits, each one new', async () => {
    const { newCompletionId } = (await import(`${WORKER}/pipeline/handle-proxy-request.ts`)) as { newCompletionId: () => string }
    const ids = Array.from({ length: 300 }, () => newCompletionId())
    for (const id of ids) expect(id).toMatch(/^cmpl_[0-9a-f]{24}$/)
    expect(new Set(ids).size).toBe(ids.length)
  })

  it('Server-Timing phases fit inside the call; created is the call time in seconds; the work is handed to waitUntil', async () => {
    const before = Date.now()
    const started = performance.now()
    const response = await app.fetch(request(chat.path, chat.body, chat.headers()), env, ctx)
    const elapsed = performance.now() - started
    const after = Date.now()
    expect(pending).toHaveLength(1)
    const json = JSON.parse(await readAll(response)) as { created: number }
    const durations = [...(response.headers.get('server-timing') ?? '').matchAll(/dur=([\d.]+)/g)].map((match) => Number(match[1]))
    expect(durations).toHaveLength(3)
    expect(durations.reduce((sum, value) => sum + value, 0)).toBeLessThanOrEqual(elapsed)
    expect(json.created).toBeGreaterThanOrEqual(Math.floor(before / 1000))
    expect(json.created).toBeLessThanOrEqual(Math.floor(after / 1000))
  })

  it('the engine body is stored as a delta of the harness body when small, else whole', async () => {
    // A body of some size (a few keys added are small against it), as harness bodies are.
    const long = { ...chat.body, messages: [{ role: 'user', content: `hi ${'and more '.repeat(100)}` }] }
    await call(chat.path, long, chat.headers())
    const [spliced] = committed
    expect(spliced!.request_text).toBe('')
    expect(spliced!.request_delta).not.toBeNull()
    expect(applyTextDelta(spliced!.original_text, spliced!.request_delta!)).toBe(engineBodies[0])
    expect(spliced!.warnings).toEqual([])
    // Anthropic → chat: the engine body shares little with the harness body, so it is stored whole.
    await call(anthropic.path, anthropic.body, anthropic.headers())
    expect(committed[1]!.request_delta).toBeNull()
    expect(committed[1]!.request_text).toBe(engineBodies[1])
  })

  it('stream usage only when the client asked for it', async () => {
    const chunks = async (body: Record<string, unknown>) => {
      const { text } = await call(chat.streamPath, body, chat.headers())
      return jsonEvents(parseSseFrames(text)) as { usage?: { prompt_tokens: number; completion_tokens: number } | null }[]
    }
    const asked = await chunks({ ...chat.body, stream: true, stream_options: { include_usage: true } })
    expect(asked.filter((chunk) => chunk.usage).map((chunk) => chunk.usage)).toEqual([
      expect.objectContaining({ prompt_tokens: PROMPT_IDS.length, completion_tokens: SAMPLED_IDS.length }),
    ])
    const notAsked = await chunks({ ...chat.body, stream: true })
    expect(notAsked.filter((chunk) => chunk.usage)).toEqual([])
  })

  it('a Responses answer echoes the request fields it carries (instructions)', async () => {
    const { json } = await call(responses.path, { ...responses.body, instructions: 'Be brief.' }, responses.headers())
    expect(json()).toMatchObject({ instructions: 'Be brief.', model: 'gpt-5.5' })
  })

  it("an output budget over the engine's window is clamped, and the record says so", async () => {
    const headers = await session('ses_window_4096', {
      upstream: { url: 'http://engine.test/v1', kind: 'vllm', served_model: 'qwen3-8b', max_model_len: 4096 },
    })
    await call(chat.path, { ...chat.body, max_tokens: 100_000 }, headers)
    const sent = JSON.parse(engineBodies[0]!) as { max_tokens: number }
    expect(sent.max_tokens).toBeLessThan(4096)
    expect(committed[0]!.warnings).toEqual([
      {
        code: 'max_tokens_clamped',
        message: `output budget clamped to fit the engine's 4096-token window: max_tokens 100000 → ${sent.max_tokens}`,
      },
    ])
  })

  it('a call whose record could not fit in one commit is refused before the engine (413, caller shape); not for a text-only upstream', async () => {
    const window = 3_000_000
    const vllm = await session('ses_window_3m', {
      upstream: { url: 'http://engine.test/v1', kind: 'vllm', served_model: 'qwen3-8b', max_model_len: window },
    })
    for (const api of [chat, anthropic]) {
      const { response, json } = await call(api.path, api.body, {
        ...api.headers(),
        ...(api === chat ? vllm : { 'x-api-key': vllm.authorization.slice(7) }),
      })
      expect(response.status, api.name).toBe(413)
      api.errorShape(json(), 413)
      const message = api.errorMessage(json())
      const match =
        /^request too large to capture: its record could need (\d+\.\d) MiB \(the body, the engine body and ids and logprobs for a 3000000-token window\), over the 32 MiB one capture can carry; the engine was not called$/.exec(
          message,
        )
      expect(match, message).not.toBeNull()
      // 12 bytes per token of the window plus the 1 MiB reserve and the (small) bodies.
      expect(Number(match![1])).toBeCloseTo((12 * window) / 1048576 + 1, 0)
    }
    expect(engineBodies).toEqual([])
    expect(committed).toEqual([])
    // A hosted OpenAI upstream returns no token data: the same window fits.
    const openai = await session('ses_window_3m_openai', {
      upstream: { url: 'http://engine.test/v1', kind: 'openai', served_model: 'qwen3-8b', max_model_len: window },
    })
    const { response } = await call(chat.path, chat.body, openai)
    expect(response.status).toBe(200)
    expect(committed).toHaveLength(1)
  })

  it('a record of exactly the commit limit is taken; one token more is refused', async () => {
    // The record's texts: the harness body plus the engine body's delta (the same for any window).
    const body = (pad: number) => ({
      ...chat.body,
      messages: [{ role: 'user', content: `hi ${'and more '.repeat(100)}${'.'.repeat(pad)}` }],
    })
    const texts = (record: CompletionInput) =>
      record.original_text.length + (record.request_delta?.middle.length ?? record.request_text.length)
    const probe = await session('ses_probe', {})
    await call(chat.path, body(0), probe)
    // Pad the body so that the limit less the reserve and texts is a whole number of tokens (12 bytes each).
    const room = 32 * 1048576 - 1048576
    expect(committed[0]!.request_delta).not.toBeNull()
    const pad = (((room - texts(committed[0]!)) % 12) + 12) % 12
    await call(chat.path, body(pad), probe)
    const size = texts(committed[1]!)
    expect((room - size) % 12).toBe(0)
    const exact = (room - size) / 12
    for (const [window, status] of [
      [exact, 200],
      [exact + 1, 413],
    ] as const) {
      const headers = await session(`ses_window_${window}`, {
        upstream: { url: 'http://engine.test/v1', kind: 'vllm', served_model: 'qwen3-8b', max_model_len: window },
      })
      const { response } = await call(chat.path, body(pad), headers)
      expect(response.status, `window ${window}`).toBe(status)
    }
  })

  it('the upstream API key goes to the configured engine', async () => {
    const keyed = { ...env, ROLLGATE_UPSTREAM_API_KEY: 'sk-upstream-key' }
    const response = await app.fetch(request(chat.path, chat.body, chat.headers()), keyed, ctx)
    expect(response.status).toBe(200)
    await readAll(response)
    expect(engineHeaders[0]!.get('authorization')).toBe('Bearer sk-upstream-key')
  })

  it('a rollout call returns its lease with the record and records the gate policy version (else the session one)', async () => {
    const admitted: { ticket: string; input: CompletionInput }[] = []
    let policyVersion: string | number | null = 7
    const headers = await session(
      'rs_rollout_direct',
      { policy_version: 3 },
      {
        admit: async () => ({ ok: true, managed: true, ticket: 'lease-1', policy_version: policyVersion, route: 'direct' }),
        record: async () => {
          throw new Error('a rollout call must return its lease')
        },
        recordAdmitted: async (ticket: string, input: CompletionInput) => {
          admitted.push({ ticket, input })
          return { seq: admitted.length - 1, completion_id: input.completion_id, stored_bytes: 0, duplicate: false }
        },
      },
    )
    expect((await call(chat.path, chat.body, headers)).response.status).toBe(200)
    policyVersion = null
    expect((await call(chat.path, chat.body, headers)).response.status).toBe(200)
    expect(admitted.map(({ ticket, input }) => [ticket, input.provenance.policy_version, input.provenance.route])).toEqual([
      ['lease-1', 7, 'direct'],
      ['lease-1', 3, 'direct'],
    ])
    expect(admitted[0]!.input.provenance).toMatchObject({ upstream_url: 'http://engine.test/v1', upstream_kind: 'vllm' })
  })

  it("a runner-routed call goes through the runner's tunnel, without the upstream key, and is recorded as the runner's", async () => {
    const tunnelled: Request[] = []
    const runnerEnv = {
      ...env,
      ROLLGATE_UPSTREAM_API_KEY: 'sk-upstream-key',
      RUNNER_LINKS: {
        idFromName: (name: string) => name,
        get: (id: string) => ({
          fetch: async (forwarded: Request) => {
            tunnelled.push(forwarded)
            return id === 'runner-1' ? Response.json(ENGINE_ANSWER) : new Response('wrong runner', { status: 599 })
          },
        }),
      },
    }
    const headers = await session(
      'rs_rollout_runner',
      { policy_version: null },
      {
        admit: async () => ({
          ok: true,
          managed: true,
          ticket: 'lease-2',
          policy_version: 'v2',
          route: 'runner',
          runner_id: 'runner-1',
          upstream: { model: 'served-on-runner', kind: 'sglang' },
        }),
        recordAdmitted: async (_ticket: string, input: CompletionInput) => stub.record(input),
      },
    )
    const response = await app.fetch(request(chat.path, chat.body, headers), runnerEnv, ctx)
    expect(response.status).toBe(200)
    await readAll(response)
    expect(engineBodies).toEqual([])
    expect(tunnelled).toHaveLength(1)
    expect(new URL(tunnelled[0]!.url).pathname).toBe('/tunnel/runner-1/v1/chat/completions')
    expect(tunnelled[0]!.headers.get('authorization')).toBeNull()
    expect(committed[0]!.provenance).toMatchObject({
      upstream_url: 'runner://runner-1',
      upstream_kind: 'sglang',
      route: 'runner:runner-1',
      policy_version: 'v2',
    })
  })

  it('a session at its size limit takes no more model calls (413 before the engine)', async () => {
    const limited = { ...env, ROLLGATE_MAX_SESSION_BYTES: '1000' }
    const headers = await session(
      'ses_fills_up',
      {},
      {
        record: async (input: CompletionInput) => ({ ...(await stub.record(input)), session_bytes: 1000 }),
      },
    )
    const first = await app.fetch(request(chat.path, chat.body, headers), limited, ctx)
    expect(first.status).toBe(200)
    await readAll(first)
    const second = await app.fetch(request(chat.path, chat.body, headers), limited, ctx)
    expect(second.status).toBe(413)
    const message = errorMessage((await second.json()) as Record<string, unknown>)
    expect(message).toMatch(/^session ses_fills_up holds 0\.0 MiB of captured calls, at its 0\.0 MiB limit/)
    expect(engineBodies).toHaveLength(1)
  })

  it('a client that disconnects from a JSON call: the engine call is aborted, the record kept as abandoned', async () => {
    const controller = new AbortController()
    const answer = app.fetch(
      new Request(`http://edge.test${chat.path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...chat.headers() },
        body: JSON.stringify(held(chat.body)),
        signal: controller.signal,
      }),
      env,
      ctx,
    )
    const engineSignal = await engineEntered.promise
    controller.abort()
    await Promise.resolve(answer).catch(() => {})
    await Promise.allSettled(pending.splice(0))
    expect(engineSignal?.aborted).toBe(true)
    expect(committed.map((record) => [record.status, record.error])).toEqual([['abandoned', 'client disconnected']])
  })

  for (const how of ['cancels the body', 'aborts the request'] as const) {
    it(`a streaming client that ${how}: the engine call is aborted at once, the record kept as abandoned, nothing more written`, async () => {
      // No keep-alive falls due during the test: the disconnect itself must abort the call, not the next failed write.
      const quiet = { ...env, ROLLGATE_HEARTBEAT_MS: '3600000' }
      const controller = new AbortController()
      const response = await app.fetch(
        new Request(`http://edge.test${anthropic.streamPath}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...anthropic.headers() },
          body: JSON.stringify(held(streamBody(anthropic))),
          signal: controller.signal,
        }),
        quiet,
        ctx,
      )
      const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader()
      let received = (await reader.read()).value ?? ''
      const engineSignal = await engineEntered.promise
      if (how === 'cancels the body') await reader.cancel()
      else controller.abort()
      await Promise.allSettled(pending.splice(0))
      expect(engineSignal?.aborted).toBe(true)
      expect(committed.map((record) => [record.status, record.error])).toEqual([['abandoned', 'client disconnected']])
      if (how === 'aborts the request') {
        for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) received += chunk.value
        expect(received).not.toContain('client disconnected')
        expect(received).not.toContain('"type":"error"')
      }
    })
  }

  it('a stream sends its first frame at once (else a keep-alive), then keep-alives while the engine works; no timer outlives it', async () => {
    const fast = { ...env, ROLLGATE_HEARTBEAT_MS: '5' }
    const firstFrames: Record<string, string> = {
      'openai-chat': ': keep-alive',
      // message_start carries the prompt's token count: it waits for the engine.
      anthropic: 'event: ping',
      'openai-responses': 'event: response.created',
      google: '\n',
    }
    const heartbeats: Record<string, string> = {
      'openai-chat': ': keep-alive',
      anthropic: 'event: ping',
      'openai-responses': ': keep-alive',
      google: '\n',
    }
    for (const api of [chat, anthropic, responses, google]) {
      engineEntered = Promise.withResolvers()
      engineRelease = Promise.withResolvers()
      const setTimer = vi.spyOn(globalThis, 'setInterval')
      const clearTimer = vi.spyOn(globalThis, 'clearInterval')
      const response = await app.fetch(request(api.streamPath, held(streamBody(api)), api.headers()), fast, ctx)
      expect(response.headers.get('content-type')).toBe('text/event-stream; charset=utf-8')
      const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader()
      let received = (await reader.read()).value ?? ''
      expect(received.startsWith(firstFrames[api.name]!), `${api.name}: ${JSON.stringify(received)}`).toBe(true)
      await engineEntered.promise
      // Keep-alives keep coming while the engine holds the call.
      const beats = () => received.split(heartbeats[api.name]!).length - 1
      const initial = beats()
      while (beats() < initial + 2) received += (await reader.read()).value ?? ''
      engineRelease.resolve()
      for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) received += chunk.value
      await Promise.allSettled(pending.splice(0))
      expect(received, api.name).toContain('Sampled words.')
      const timers = setTimer.mock.results.map((result) => result.value)
      expect(timers.length, api.name).toBeGreaterThan(0)
      for (const timer of timers) expect(clearTimer.mock.calls.map(([cleared]) => cleared)).toContain(timer)
      setTimer.mockRestore()
      clearTimer.mockRestore()
    }
  })
})
