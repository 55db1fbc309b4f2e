/**
 * @module
 * Session access rules (`src/worker/pipeline/session-access.ts`) on the plain function, with real tokens and a
 * session stub the test controls: which credential wins, what each refusal says, the agent label, the revocation
 * check that starts at authentication, and the per-isolate caches (a verified token skips the HMAC but never its
 * expiry or a rotated key; a session's config is read once; both caches stay bounded). Each test imports a fresh
 * copy of the module, so every cache starts empty.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { createSessionToken } from '../../../src/contract/session-token.ts'
import type { SessionConfig } from '../../../src/durable/session/record.ts'

// The worker's modules are typed against workerd's globals (`Env`), which this project's Node typecheck does not
// load: they are imported by a computed path and described here by what the test uses.
const WORKER = '../../../src/worker'
interface NormalizedError {
  status: number
  kind: string
  message: string
  param: string | null
}
interface GatewayError extends Error {
  param: string | null
  toNormalized(): NormalizedError
}
type Env = unknown
interface SessionAccess {
  sessionId: string
  agent: string
  stub: unknown
  config: SessionConfig
  stillValid(): Promise<void>
}
interface SessionAccessModule {
  authenticateSession(
    env: Env,
    config: { signingKey: string | null },
    request: Request,
    url: URL,
    path: { token?: string; agent?: string },
  ): Promise<SessionAccess>
  sessionStub(env: Env, sessionId: string): unknown
}

const KEY = 'session-access-test-key'
let access: SessionAccessModule
/** The error class of the fresh module copy. */
let Gateway: new (...args: never[]) => GatewayError

function configOf(sessionId: string): SessionConfig {
  return {
    session_id: sessionId,
    task_id: null,
    created_at: '2026-05-01T00:00:00.000Z',
    upstream: { url: 'http://engine.test/v1', kind: 'vllm', served_model: 'qwen3-8b' },
    policy_version: null,
    metadata: {},
  }
}

/** A session object per id: counts its `config` and `revoked` calls; `revokedBy` sets why its token is revoked. */
function sessionObjects(options: { missing?: string[] } = {}) {
  const calls = { config: 0, revoked: 0, names: [] as string[] }
  const revokedBy = new Map<string, string>()
  const stubs = new Map<string, unknown>()
  const env = {
    SESSIONS: {
      idFromName: (name: string) => {
        calls.names.push(name)
        return `id:${name}`
      },
      get: (id: string) => {
        const sessionId = id.slice('id:'.length)
        let stub = stubs.get(sessionId)
        if (!stub) {
          stub = {
            sessionId,
            config: async () => {
              calls.config++
              return options.missing?.includes(sessionId) ? null : configOf(sessionId)
            },
            revoked: async () => {
              calls.revoked++
              return revokedBy.get(sessionId) ?? null
            },
          }
          stubs.set(sessionId, stub)
        }
        return stub
      },
    },
  } as unknown as Env
  return { env, calls, revokedBy }
}

const edge = (signingKey: string | null = KEY) => ({ signingKey })

function harnessRequest(headers: Record<string, string> = {}): [Request, URL] {
  const request = new Request('http://edge.test/v1/chat/completions', { method: 'POST', headers })
  return [request, new URL(request.url)]
}

async function authenticate(
  env: Env,
  headers: Record<string, string>,
  options: { path?: { token?: string; agent?: string }; signingKey?: string | null } = {},
) {
  const [request, url] = harnessRequest(headers)
  return access.authenticateSession(
    env,
    edge(options.signingKey === undefined ? KEY : options.signingKey),
    request,
    url,
    options.path ?? {},
  )
}

async function refusal(promise: Promise<unknown>): Promise<GatewayError> {
  const error = await promise.then(
    () => null,
    (thrown: unknown) => thrown,
  )
  expect(error).toBeInstanceOf(Gateway)
  return error as GatewayError
}

const bearer = (token: string) => ({ authorization: `Bearer ${token}` })

beforeEach(async () => {
  vi.resetModules()
  access = (await import(`${WORKER}/pipeline/session-access.ts`)) as SessionAccessModule
  Gateway = ((await import(`${WORKER}/errors.ts`)) as { GatewayError: typeof Gateway }).GatewayError
})
afterEach(() => vi.restoreAllMocks())

describe('credentials', () => {
  it('a valid token reaches its own session object, with its config', async () => {
    const { env, calls } = sessionObjects()
    const session = await authenticate(env, bearer(await createSessionToken('ses_a', KEY)))
    expect(session.sessionId).toBe('ses_a')
    expect(session.config).toEqual(configOf('ses_a'))
    expect((session.stub as unknown as { sessionId: string }).sessionId).toBe('ses_a')
    expect(calls.names).toEqual(['ses_a'])
    expect(access.sessionStub(env, 'ses_b')).toMatchObject({ sessionId: 'ses_b' })
  })

  it('the token in the path wins over the headers', async () => {
    const { env } = sessionObjects()
    const session = await authenticate(env, bearer(await createSessionToken('ses_header', KEY)), {
      path: { token: await createSessionToken('ses_path', KEY) },
    })
    expect(session.sessionId).toBe('ses_path')
  })

  it('no credential → 401 that says how to send one; checked before the signing key', async () => {
    const { env, calls } = sessionObjects()
    for (const signingKey of [KEY, null]) {
      const error = await refusal(authenticate(env, {}, { signingKey }))
      expect(error.toNormalized()).toEqual({
        status: 401,
        kind: 'authentication',
        message: 'missing session token: send it as the API key',
        param: null,
      })
    }
    expect(calls.config).toBe(0)
  })

  it('an edge without a signing key → 503, not a 401 for a good token', async () => {
    const { env, calls } = sessionObjects()
    const error = await refusal(authenticate(env, bearer(await createSessionToken('ses_a', KEY)), { signingKey: null }))
    expect(error.toNormalized()).toEqual({ status: 503, kind: 'internal', message: 'edge has no signing key configured', param: null })
    expect(calls.config).toBe(0)
  })

  it('a forged, malformed or expired token → 401 saying which', async () => {
    const { env, calls } = sessionObjects()
    for (const token of ['rg_x.y', 'sk-not-ours', await createSessionToken('ses_a', 'another-key')]) {
      const error = await refusal(authenticate(env, bearer(token)))
      expect(error.toNormalized()).toEqual({ status: 401, kind: 'authentication', message: 'invalid session token', param: null })
    }
    const expired = await createSessionToken('ses_a', KEY, { expiresAt: Date.now() - 1000 })
    const error = await refusal(authenticate(env, bearer(expired)))
    expect(error.toNormalized()).toEqual({ status: 401, kind: 'authentication', message: 'session token expired', param: null })
    expect(calls.config).toBe(0)
  })

  it('a token for a session that was never created → 401 "session does not exist", asked again next time', async () => {
    const { env, calls } = sessionObjects({ missing: ['ses_ghost'] })
    const token = await createSessionToken('ses_ghost', KEY)
    for (let attempt = 1; attempt <= 2; attempt++) {
      const error = await refusal(authenticate(env, bearer(token)))
      expect(error.toNormalized()).toMatchObject({ status: 401, kind: 'authentication', message: 'session does not exist' })
      expect(calls.config).toBe(attempt)
    }
  })
})

describe('the verified-token cache', () => {
  it('a token verified once skips the HMAC on later calls', async () => {
    const { env } = sessionObjects()
    const [a, b] = [await createSessionToken('ses_a', KEY), await createSessionToken('ses_b', KEY)]
    const verify = vi.spyOn(crypto.subtle, 'verify')
    await authenticate(env, bearer(a))
    await authenticate(env, bearer(b))
    expect(verify).toHaveBeenCalledTimes(2)
    for (const token of [a, b, a]) expect((await authenticate(env, bearer(token))).sessionId).toBe(token === a ? 'ses_a' : 'ses_b')
    expect(verify).toHaveBeenCalledTimes(2)
  })

  it('a cached token is refused from the millisecond it expires', async () => {
    const { env } = sessionObjects()
    const expiresAt = Math.floor(Date.now() / 1000 + 60) * 1000
    const token = await createSessionToken('ses_a', KEY, { expiresAt })
    expect((await authenticate(env, bearer(token))).sessionId).toBe('ses_a')
    const now = vi.spyOn(Date, 'now').mockReturnValue(expiresAt - 1)
    expect((await authenticate(env, bearer(token))).sessionId).toBe('ses_a')
    now.mockReturnValue(expiresAt)
    const error = await refusal(authenticate(env, bearer(token)))
    expect(error.message).toBe('session token expired')
  })

  it('a token verified under one signing key is refused after the key changes, and accepted again under it', async () => {
    const { env } = sessionObjects()
    const token = await createSessionToken('ses_a', KEY)
    await authenticate(env, bearer(token))
    const error = await refusal(authenticate(env, bearer(token), { signingKey: 'rotated-key' }))
    expect(error.message).toBe('invalid session token')
    const verify = vi.spyOn(crypto.subtle, 'verify')
    expect((await authenticate(env, bearer(token))).sessionId).toBe('ses_a')
    expect((await authenticate(env, bearer(token))).sessionId).toBe('ses_a')
    expect(verify).toHaveBeenCalledTimes(1)
  })

  it('both caches hold at most 10,000 entries: the next one starts them afresh', { timeout: 60_000 }, async () => {
    const { env, calls } = sessionObjects()
    const LIMIT = 10_000
    const tokens: string[] = []
    for (let i = 0; i <= LIMIT; i++) tokens.push(await createSessionToken(`ses_${i}`, KEY))
    for (let i = 0; i < LIMIT; i++) await authenticate(env, bearer(tokens[i]!))
    expect(calls.config).toBe(LIMIT)
    const verify = vi.spyOn(crypto.subtle, 'verify')
    // Full, not yet cleared: the first entries are still there.
    await authenticate(env, bearer(tokens[0]!))
    expect(verify).toHaveBeenCalledTimes(0)
    expect(calls.config).toBe(LIMIT)
    // One more clears both caches before it is stored; the first entries are gone.
    await authenticate(env, bearer(tokens[LIMIT]!))
    await authenticate(env, bearer(tokens[0]!))
    expect(verify).toHaveBeenCalledTimes(2)
    expect(calls.config).toBe(LIMIT + 2)
  })
})

describe('the session config cache', () => {
  it('reads a session config once per isolate', async () => {
    const { env, calls } = sessionObjects()
    const token = await createSessionToken('ses_a', KEY)
    const first = await authenticate(env, bearer(token))
    const second = await authenticate(env, bearer(token))
    expect(second.config).toEqual(first.config)
    expect(calls.config).toBe(1)
  })
})

describe('the agent label', () => {
  it('from the path, else the x-rollgate-agent header, else "main"', async () => {
    const { env } = sessionObjects()
    const token = await createSessionToken('ses_a', KEY)
    expect((await authenticate(env, bearer(token))).agent).toBe('main')
    expect((await authenticate(env, { ...bearer(token), 'x-rollgate-agent': 'sub:1' })).agent).toBe('sub:1')
    expect((await authenticate(env, { ...bearer(token), 'x-rollgate-agent': 'sub:1' }, { path: { agent: 'from-path' } })).agent).toBe(
      'from-path',
    )
  })

  it('1 to 64 of [A-Za-z0-9_.:-]; anything else → 400 naming the header', async () => {
    const { env, calls } = sessionObjects()
    const token = await createSessionToken('ses_a', KEY)
    for (const agent of ['a', 'A-z_0.9:x', 'x'.repeat(64)]) {
      expect((await authenticate(env, { ...bearer(token), 'x-rollgate-agent': agent })).agent).toBe(agent)
    }
    for (const agent of ['', 'x'.repeat(65), 'a b', 'a,b', 'a/', 'é', 'a\tb']) {
      const error = await refusal(authenticate(env, { ...bearer(token), 'x-rollgate-agent': agent }))
      expect(error.toNormalized(), JSON.stringify(agent)).toEqual({
        status: 400,
        kind: 'invalid_request',
        message: 'agent label must match [A-Za-z0-9_.:-]{1,64}',
        param: 'x-rollgate-agent',
      })
    }
    const error = await refusal(authenticate(env, bearer(token), { path: { agent: 'a b' } }))
    expect(error.param).toBe('x-rollgate-agent')
    // A bad label is refused before the session object is asked anything.
    expect(calls.config).toBe(1)
    expect(calls.revoked).toBe(3)
  })
})

describe('revocation', () => {
  it('starts at authentication; stillValid resolves while the token stands', async () => {
    const { env, calls } = sessionObjects()
    const session = await authenticate(env, bearer(await createSessionToken('ses_a', KEY)))
    expect(calls.revoked).toBe(1)
    await expect(session.stillValid()).resolves.toBeUndefined()
    await expect(session.stillValid()).resolves.toBeUndefined()
    expect(calls.revoked).toBe(1)
  })

  it('a revoked token → stillValid rejects with a 401 that says why', async () => {
    const { env, revokedBy } = sessionObjects()
    revokedBy.set('ses_a', 'session ses_a was finalized')
    const session = await authenticate(env, bearer(await createSessionToken('ses_a', KEY)))
    const error = await refusal(session.stillValid())
    expect(error.toNormalized()).toEqual({
      status: 401,
      kind: 'authentication',
      message: 'session token revoked: session ses_a was finalized',
      param: null,
    })
  })

  it('a revocation nobody awaits (the call failed earlier) is never an unhandled rejection', async () => {
    const { env, revokedBy } = sessionObjects()
    revokedBy.set('ses_a', 'session ended COMPLETED')
    const unhandled: unknown[] = []
    const listener = (reason: unknown) => unhandled.push(reason)
    process.on('unhandledRejection', listener)
    try {
      await authenticate(env, bearer(await createSessionToken('ses_a', KEY)))
      // Unhandled rejections are reported after the microtask queue drains: let a few macrotasks pass.
      for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve))
    } finally {
      process.off('unhandledRejection', listener)
    }
    expect(unhandled).toEqual([])
  })
})
