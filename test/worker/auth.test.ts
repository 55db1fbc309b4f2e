import { SELF } from 'cloudflare:test'
import { describe, expect, it } from 'vitest'
import { createSessionToken } from '../../src/contract/session-token.ts'

const ADMIN = { authorization: 'Bearer test-admin-token', 'content-type': 'application/json' }
const EDGE = 'https://edge.test'

async function createSession(body: Record<string, unknown> = {}) {
  const res = await SELF.fetch(`${EDGE}/v1/sessions`, { method: 'POST', headers: ADMIN, body: JSON.stringify(body) })
  expect(res.status).toBe(201)
  return (await res.json()) as {
    session_id: string
    token: string
    base_urls: Record<string, string>
    prefixed_base_urls: Record<string, string>
  }
}

function chat(
  token: string | null,
  body: unknown = { model: 'm', messages: [{ role: 'user', content: 'hi' }] },
  headers: Record<string, string> = {},
  stream?: ReadableStream<Uint8Array>,
) {
  return SELF.fetch(`${EDGE}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}), ...headers },
    body: stream ?? (typeof body === 'string' ? body : JSON.stringify(body)),
  })
}

async function expectOpenaiError(res: Response, status: number, type: string, messagePart?: string) {
  expect(res.status).toBe(status)
  const body = (await res.json()) as { error: { message: string; type: string; param: string | null } }
  expect(body.error.type).toBe(type)
  if (messagePart) expect(body.error.message).toContain(messagePart)
  return body.error
}

describe('control plane', () => {
  it('creates sessions with a token and base URLs', async () => {
    const session = await createSession({ task_id: 't1', metadata: { group_id: 'g' } })
    expect(session.session_id).toMatch(/^ses_[0-9a-f]{32}$/)
    expect(session.token).toMatch(/^rg_[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{43}$/)
    expect(session.base_urls).toEqual({ openai: `${EDGE}/v1`, anthropic: EDGE, google: EDGE })
    expect(session.prefixed_base_urls.openai).toBe(`${EDGE}/s/${session.token}/v1`)
    const info = await SELF.fetch(`${EDGE}/v1/sessions/${session.session_id}`, { headers: ADMIN })
    expect(await info.json()).toMatchObject({ session_id: session.session_id, task_id: 't1', completion_count: 0 })
  })

  it('refuses the control plane without the admin token, and with a session token', async () => {
    const session = await createSession()
    const none = await SELF.fetch(`${EDGE}/v1/sessions`, { method: 'POST', body: '{}' })
    await expectOpenaiError(none, 401, 'authentication_error', 'admin bearer token required')
    const wrong = await SELF.fetch(`${EDGE}/v1/sessions`, { method: 'POST', headers: { authorization: 'Bearer nope' }, body: '{}' })
    await expectOpenaiError(wrong, 401, 'authentication_error', 'invalid admin token')
    const asSession = await SELF.fetch(`${EDGE}/v1/sessions/${session.session_id}`, {
      headers: { authorization: `Bearer ${session.token}` },
    })
    await expectOpenaiError(asSession, 401, 'authentication_error')
  })

  it('rejects a duplicate explicit session id with 409 and bad ids with 400', async () => {
    await createSession({ session_id: 'dup-session' })
    const again = await SELF.fetch(`${EDGE}/v1/sessions`, {
      method: 'POST',
      headers: ADMIN,
      body: JSON.stringify({ session_id: 'dup-session' }),
    })
    await expectOpenaiError(again, 409, 'invalid_request_error', 'already exists')
    const bad = await SELF.fetch(`${EDGE}/v1/sessions`, { method: 'POST', headers: ADMIN, body: JSON.stringify({ session_id: '../x' }) })
    const error = await expectOpenaiError(bad, 400, 'invalid_request_error', 'session_id')
    expect(error.param).toBe('session_id')
  })

  it('404s unknown sessions', async () => {
    const res = await SELF.fetch(`${EDGE}/v1/sessions/nope/completions`, { headers: ADMIN })
    await expectOpenaiError(res, 404, 'invalid_request_error', 'not found')
  })
})

describe('harness authentication', () => {
  it('401s a missing, forged or foreign token in OpenAI shape, and never creates implicit sessions', async () => {
    await expectOpenaiError(await chat(null), 401, 'authentication_error', 'missing session token')
    await expectOpenaiError(await chat('sk-anything'), 401, 'authentication_error', 'invalid session token')
    const session = await createSession()
    const tampered = `${session.token.slice(0, -2)}${session.token.endsWith('A') ? 'B' : 'A'}A`
    await expectOpenaiError(await chat(tampered), 401, 'authentication_error', 'invalid session token')
    const foreign = await createSessionToken(session.session_id, 'some-other-key')
    await expectOpenaiError(await chat(foreign), 401, 'authentication_error', 'invalid session token')
    // Correctly signed but never created: refused, not auto-registered.
    const unknown = await createSessionToken('never-created', 'test-signing-key')
    await expectOpenaiError(await chat(unknown), 401, 'authentication_error', 'session does not exist')
  })

  it('accepts the token from every carrier and validates the agent label', async () => {
    const session = await createSession()
    // A bad body reaches validation only after authentication succeeded: 400 proves the token was accepted.
    const bad = { model: 'm', messages: 'not-a-list' }
    const carriers: Record<string, string>[] = [{ 'x-api-key': session.token }, { 'x-goog-api-key': session.token }]
    for (const headers of carriers) {
      await expectOpenaiError(await chat(null, bad, headers), 400, 'invalid_request_error', 'messages')
    }
    const viaQuery = await SELF.fetch(`${EDGE}/v1/chat/completions?key=${session.token}`, { method: 'POST', body: JSON.stringify(bad) })
    await expectOpenaiError(viaQuery, 400, 'invalid_request_error', 'messages')
    const viaPath = await SELF.fetch(`${EDGE}/s/${session.token}/a/sub-1/v1/chat/completions`, {
      method: 'POST',
      body: JSON.stringify(bad),
    })
    await expectOpenaiError(viaPath, 400, 'invalid_request_error', 'messages')
    const badAgent = await chat(session.token, bad, { 'x-rollgate-agent': 'no spaces allowed' })
    await expectOpenaiError(badAgent, 400, 'invalid_request_error', 'agent label')
  })
})

describe('bad input', () => {
  it('answers invalid JSON, wrong types, oversize bodies and unknown paths with clear 4xx in OpenAI shape', async () => {
    const { token } = await createSession()
    await expectOpenaiError(await chat(token, '{"model": "m", "messages": ['), 400, 'invalid_request_error', 'Invalid JSON body')
    await expectOpenaiError(await chat(token, '[1,2]'), 400, 'invalid_request_error', 'JSON object')
    const wrongType = await expectOpenaiError(
      await chat(token, { model: 'm', messages: [{ role: 'user', content: 'x' }], temperature: 'hot' }),
      400,
      'invalid_request_error',
      'temperature',
    )
    expect(wrongType.param).toBe('temperature')
    const badRole = await expectOpenaiError(
      await chat(token, { model: 'm', messages: [{ role: 'wizard', content: 'x' }] }),
      400,
      'invalid_request_error',
    )
    expect(badRole.param).toBe('messages[0].role')
    await expectOpenaiError(await chat(token, { model: 'm', messages: [] }), 400, 'invalid_request_error', 'messages')
    await expectOpenaiError(
      await chat(token, { model: 'm', messages: [{ role: 'user', content: 'x' }], n: 2 }),
      400,
      'invalid_request_error',
      'n > 1',
    )
    const huge = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'x'.repeat(33 * 1024 * 1024) }] })
    await expectOpenaiError(await chat(token, huge), 413, 'invalid_request_error', 'exceeds')
    // A streamed body declares no length: the cap is counted while reading, and the text is decoded whole
    // (a multi-byte character split across chunks survives).
    const streamed = (text: string, chunkBytes: number) => {
      const bytes = new TextEncoder().encode(text)
      return new ReadableStream<Uint8Array>({
        start(controller) {
          for (let i = 0; i < bytes.length; i += chunkBytes) controller.enqueue(bytes.slice(i, i + chunkBytes))
          controller.close()
        },
      })
    }
    const hugeStreamed = await chat(token, null, {}, streamed(huge, 1024 * 1024))
    await expectOpenaiError(hugeStreamed, 413, 'invalid_request_error', 'exceeds')
    const split = await chat(token, null, {}, streamed(JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'é€😀' }] }), 3))
    expect(split.status).toBe(502) // parsed and validated; the test engine address is unreachable
    await expectOpenaiError(
      await chat(token, null, {}, streamed('{"model": "m", "messages": [é', 3)),
      400,
      'invalid_request_error',
      'Invalid JSON',
    )
    const unknownPath = await SELF.fetch(`${EDGE}/v1/unknown`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}` },
      body: '{}',
    })
    await expectOpenaiError(unknownPath, 404, 'invalid_request_error')
    const unknownGet = await SELF.fetch(`${EDGE}/nothing-here`)
    await expectOpenaiError(unknownGet, 404, 'invalid_request_error', 'no route')
  })

  it('answers health probes', async () => {
    const res = await SELF.fetch(`${EDGE}/`)
    expect(await res.json()).toEqual({ status: 'ok', service: 'rollgate' })
    expect((await SELF.fetch(`${EDGE}/`, { method: 'HEAD' })).status).toBe(200)
  })
})
