/**
 * Session token hygiene (security issue, items 5–6): tokens expire (claims in the signed part), are
 * revoked when a bare session is finalized or a rollout session ends or is cancelled, and count_tokens
 * obeys the rollout session gate and goes through the runner's tunnel for runner-routed sessions.
 */
import { env, SELF } from 'cloudflare:test'
import { describe, expect, it } from 'vitest'
import { createSessionToken } from '../../src/contract/session-token.ts'
import type { SessionRolloutRpc } from '../../src/durable/session/session-rollout.ts'
import { ADMIN, cancelTask, EDGE, eventually, submit, TestRunner, taskBody } from './rollout-support.ts'

function rolloutSession(sessionId: string): SessionRolloutRpc {
  return env.SESSIONS.get(env.SESSIONS.idFromName(sessionId)) as unknown as SessionRolloutRpc
}

function chat(token: string): Promise<Response> {
  return SELF.fetch(`${EDGE}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }),
  })
}

function countTokens(token: string): Promise<Response> {
  return SELF.fetch(`${EDGE}/v1/messages/count_tokens`, {
    method: 'POST',
    headers: { 'x-api-key': token, 'anthropic-version': '2023-06-01', 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'count me' }] }),
  })
}

async function errorOf(res: Response): Promise<{ status: number; message: string }> {
  const body = (await res.json()) as { error: { message: string } }
  return { status: res.status, message: body.error.message }
}

async function createSession(body: Record<string, unknown> = {}): Promise<{ session_id: string; token: string; token_expires_at: string }> {
  const res = await SELF.fetch(`${EDGE}/v1/sessions`, { method: 'POST', headers: ADMIN, body: JSON.stringify(body) })
  expect(res.status).toBe(201)
  return (await res.json()) as { session_id: string; token: string; token_expires_at: string }
}

describe('session token expiry', () => {
  it('says when the token expires (default 24 h, or token_ttl_seconds) and refuses an expired one', async () => {
    const before = Date.now()
    const session = await createSession()
    const expires = Date.parse(session.token_expires_at)
    expect(expires).toBeGreaterThan(before + 24 * 3600_000 - 2_000)
    expect(expires).toBeLessThanOrEqual(Date.now() + 24 * 3600_000)
    const short = await createSession({ token_ttl_seconds: 60 })
    expect(Date.parse(short.token_expires_at)).toBeLessThanOrEqual(Date.now() + 60_000)
    const expired = await createSessionToken(session.session_id, 'test-signing-key', { expiresAt: Date.now() - 1_000 })
    expect(await errorOf(await chat(expired))).toEqual({ status: 401, message: 'session token expired' })
    expect((await countTokens(expired)).status).toBe(401)
  })
})

describe('session token revocation', () => {
  it('finalizing a bare session revokes its token (model calls and count_tokens)', async () => {
    const session = await createSession()
    const finalized = await SELF.fetch(`${EDGE}/v1/sessions/${session.session_id}/finalize`, {
      method: 'POST',
      headers: ADMIN,
      body: JSON.stringify({ builder: 'per_request' }),
    })
    expect(finalized.status).toBe(200)
    const refused = await errorOf(await chat(session.token))
    expect(refused.status).toBe(401)
    expect(refused.message).toContain('session token revoked: session was finalized')
    expect((await countTokens(session.token)).status).toBe(401)
  })

  it('cancelling a rollout session revokes its token', async () => {
    const runner = await TestRunner.start('revoke-r')
    expect((await submit(taskBody('revoke-1'))).status).toBe(200)
    const session = await runner.takeAssignment('revoke-1')
    await eventually(async () => expect((await rolloutSession(session.session_id).lifecycle())?.status).toBe('RUNNING'))
    await cancelTask('revoke-1')
    await eventually(async () => expect((await rolloutSession(session.session_id).lifecycle())?.status).toBe('ERROR'))
    const refused = await errorOf(await chat(session.token))
    expect(refused).toEqual({ status: 401, message: 'session token revoked: session ended ERROR' })
    expect((await countTokens(session.token)).status).toBe(401)
    runner.close()
  })
})

describe('count_tokens on rollout sessions', () => {
  it('obeys the session gate and counts with the runner’s engine through the tunnel', async () => {
    const runner = await TestRunner.start('count-r')
    const seen: string[] = []
    runner.serveTunnel((call) => {
      seen.push(call.path)
      return call.path === '/tokenize' ? { status: 200, body: JSON.stringify({ count: 42, tokens: [], max_model_len: 4096 }) } : null
    })
    expect((await submit(taskBody('count-1'))).status).toBe(200)
    const session = await runner.takeAssignment('count-1', ['INITIALIZING'])
    await eventually(async () => expect((await rolloutSession(session.session_id).lifecycle())?.status).toBe('INITIALIZING'))
    const early = await countTokens(session.token)
    expect(early.status).toBe(403)
    runner.send({ type: 'session.status', session_id: session.session_id, status: 'READY' })
    runner.send({ type: 'session.status', session_id: session.session_id, status: 'RUNNING' })
    await eventually(async () => expect((await rolloutSession(session.session_id).lifecycle())?.status).toBe('RUNNING'))
    const counted = await countTokens(session.token)
    expect(counted.status).toBe(200)
    expect(await counted.json()).toEqual({ input_tokens: 42 })
    expect(counted.headers.get('x-rollgate-token-count')).toBe('tokenize')
    expect(seen).toEqual(['/tokenize'])
    runner.send({ type: 'session.finished', session_id: session.session_id, agent_result: { status: 'completed', return_code: 0 } })
    await eventually(async () => expect((await rolloutSession(session.session_id).lifecycle())?.status).toBe('COMPLETED'))
    expect((await countTokens(session.token)).status).toBe(401)
    runner.close()
  })
})
