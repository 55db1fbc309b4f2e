/**
 * Generation gate (`/admin/inference/*`) and tunnel cancellation in workerd: pause waits for calls in
 * flight (504 when they do not drain), paused calls wait for resume, the resume's policy version is
 * recorded on completions; a client that disconnects cancels the tunnelled engine call.
 */
import { SELF } from 'cloudflare:test'
import { afterEach, describe, expect, it } from 'vitest'
import type { CompletionRecord } from '../../src/contract/completion-record.ts'
import { ADMIN, EDGE, engineAnswer, eventually, sessionToken, submit, TestRunner, type TunnelCall, taskBody } from './rollout-support.ts'

async function chat(sessionId: string, content: string, signal?: AbortSignal, stream = false) {
  return SELF.fetch(`${EDGE}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${await sessionToken(sessionId)}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content }], stream }),
    ...(signal ? { signal } : {}),
  })
}

async function records(sessionId: string): Promise<CompletionRecord[]> {
  const res = await SELF.fetch(`${EDGE}/v1/sessions/${sessionId}/completions`, { headers: ADMIN })
  return ((await res.json()) as { completions: CompletionRecord[] }).completions
}

function admin(path: string, body?: unknown) {
  return SELF.fetch(`${EDGE}${path}`, {
    method: body === undefined ? 'GET' : 'POST',
    headers: ADMIN,
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  })
}

/** A running rollout session whose runner holds engine calls until released. */
async function heldSession(taskId: string, runnerId: string) {
  const runner = await TestRunner.start(runnerId)
  const held: TunnelCall[] = []
  runner.serveTunnel((call) => {
    held.push(call)
    return null
  })
  expect((await submit(taskBody(taskId))).status).toBe(200)
  const session = await runner.takeAssignment(taskId)
  const release = (call: TunnelCall) =>
    runner.send({
      type: 'tunnel.head',
      request_id: call.request_id,
      status: 200,
      headers: {},
      body: engineAnswer([1, 2, 3], [7, 151645]),
      more: false,
    })
  return { runner, held, release, sessionId: session.session_id }
}

afterEach(async () => {
  // Never leave the (deployment-wide) gate paused for the next test.
  await admin('/admin/inference/resume', {})
})

describe('generation gate', () => {
  it('pause waits for in-flight calls (504 on timeout), holds new calls until resume, records the new policy_version', async () => {
    const { runner, held, release, sessionId } = await heldSession('gate-task', 'gate-runner')
    await eventually(async () =>
      expect(((await (await admin(`/rollout/session/${sessionId}`)).json()) as { status: string }).status).toBe('RUNNING'),
    )
    expect(await (await admin('/admin/inference/status')).json()).toMatchObject({ paused: false, inflight: 0, waiting: 0 })

    const inFlight = chat(sessionId, 'long generation')
    await eventually(async () => expect(held).toHaveLength(1))
    expect(await (await admin('/admin/inference/status')).json()).toMatchObject({ inflight: 1 })
    const timedOut = await admin('/admin/inference/pause?timeout_seconds=0.2', { policy_version: 'v2-pending' })
    expect(timedOut.status).toBe(504)
    expect(await (await admin('/admin/inference/status')).json()).toMatchObject({ paused: true, inflight: 1 })

    // While paused, a new call waits at the gate (never reaches the runner): the status counts it as waiting,
    // not in flight; the pause drains with it outstanding, and its record carries the policy version set at
    // resume (a call let through during the pause would carry `v2-pending`).
    const waiting = chat(sessionId, 'queued behind the pause')
    await eventually(async () =>
      expect(await (await admin('/admin/inference/status')).json()).toMatchObject({ paused: true, sessions: 1, waiting: 1, inflight: 1 }),
    )
    expect(held).toHaveLength(1)
    // Bare capture sessions are not under the gate: admitted (and failing at the unreachable upstream).
    const bare = (await (await admin('/v1/sessions', {})).json()) as { session_id: string; token: string }
    const bareCall = await SELF.fetch(`${EDGE}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${bare.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'not gated' }] }),
    })
    expect(bareCall.headers.get('x-rollgate-error-source')).toBe('upstream')

    // The in-flight call finishes; now the pause drains.
    release(held[0]!)
    expect((await inFlight).status).toBe(200)
    const drained = await admin('/admin/inference/pause?timeout_seconds=2', {})
    expect(drained.status).toBe(200)
    expect(await drained.json()).toMatchObject({ paused: true, inflight: 0, waiting: 1 })

    const resumed = await admin('/admin/inference/resume', { policy_version: 8 })
    expect(await resumed.json()).toMatchObject({ paused: false, policy_version: 8 })
    await eventually(async () => expect(held).toHaveLength(2))
    expect(await (await admin('/admin/inference/status')).json()).toMatchObject({ waiting: 0, inflight: 1 })
    release(held[1]!)
    expect((await waiting).status).toBe(200)

    const [first, second] = await records(sessionId)
    // Admitted before the pause: generated by the old weights (the session's own version, none here).
    expect(first!.provenance.policy_version).toBeNull()
    expect(second!.provenance.policy_version).toBe(8)
    runner.close()
  })

  it('validates pause input and refuses other credentials', async () => {
    // timeout_seconds is read strictly: a malformed one is a 400 naming it, never read as 0 (no wait) or 16.
    for (const raw of ['-1', '%20', '0x10', '1e2', 'abc', '3601']) {
      const refused = await admin(`/admin/inference/pause?timeout_seconds=${raw}`, {})
      expect(refused.status, raw).toBe(400)
      expect(((await refused.json()) as { error: { message: string; param: string } }).error).toEqual(
        expect.objectContaining({
          param: 'timeout_seconds',
          message: expect.stringMatching(/^timeout_seconds must be a number in \[0, 3600\], got /),
        }),
      )
    }
    expect(((await (await admin('/admin/inference/status')).json()) as { paused: boolean }).paused).toBe(false)
    expect((await admin('/admin/inference/resume', { policy_version: { nested: true } })).status).toBe(400)
  })
})

/** One model call in each provider's wire format, with the session token where that provider's SDK puts it. */
const PROVIDER_CALLS = {
  openai: (token: string) =>
    SELF.fetch(`${EDGE}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }),
    }),
  responses: (token: string) =>
    SELF.fetch(`${EDGE}/v1/responses`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', input: 'hi' }),
    }),
  anthropic: (token: string) =>
    SELF.fetch(`${EDGE}/v1/messages`, {
      method: 'POST',
      headers: { 'x-api-key': token, 'anthropic-version': '2023-06-01', 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'claude', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] }),
    }),
  gemini: (token: string) =>
    SELF.fetch(`${EDGE}/v1beta/models/m:generateContent`, {
      method: 'POST',
      headers: { 'x-goog-api-key': token, 'content-type': 'application/json' },
      body: JSON.stringify({ contents: [{ role: 'user', parts: [{ text: 'hi' }] }] }),
    }),
}

/** The refusal as each provider's SDK reads it: status, error kind and message. */
async function refusal(name: keyof typeof PROVIDER_CALLS, res: Response) {
  const body = (await res.json()) as Record<string, unknown>
  const error = body.error as { type?: string; status?: string; message: string; code?: number }
  if (name === 'anthropic') expect(body.type).toBe('error')
  if (name === 'gemini') expect(error.code).toBe(res.status)
  return { status: res.status, kind: name === 'gemini' ? error.status : error.type, message: error.message }
}

describe('status gate', () => {
  it('admits model calls only while the session is RUNNING: 403 before, 401 (revoked) once ended, in each caller shape', async () => {
    const runner = await TestRunner.start('status-gate-runner')
    runner.serveTunnel(() => ({ status: 200, body: engineAnswer([1, 2, 3], [7, 151645]) }))
    expect((await submit(taskBody('status-gate-task'))).status).toBe(200)
    const session = await runner.takeAssignment('status-gate-task', [])
    const sessionId = session.session_id
    const token = await sessionToken(sessionId)
    const status = async () => ((await (await admin(`/rollout/session/${sessionId}`)).json()) as { status: string }).status
    const expectRefused = async (state: string) => {
      for (const name of Object.keys(PROVIDER_CALLS) as (keyof typeof PROVIDER_CALLS)[]) {
        const got = await refusal(name, await PROVIDER_CALLS[name](token))
        expect(got, `${name} while ${state}`).toEqual({
          status: 403,
          kind: name === 'gemini' ? 'PERMISSION_DENIED' : 'permission_error',
          message: `session is ${state}: model calls are accepted only while the session is RUNNING`,
        })
      }
    }

    expect(await status()).toBe('REGISTERED')
    await expectRefused('REGISTERED')
    for (const state of ['INITIALIZING', 'READY'] as const) {
      runner.send({ type: 'session.status', session_id: sessionId, status: state })
      await eventually(async () => expect(await status()).toBe(state))
      await expectRefused(state)
    }
    expect(await records(sessionId)).toEqual([])

    runner.send({ type: 'session.status', session_id: sessionId, status: 'RUNNING' })
    await eventually(async () => expect(await status()).toBe('RUNNING'))
    for (const name of Object.keys(PROVIDER_CALLS) as (keyof typeof PROVIDER_CALLS)[]) {
      expect((await PROVIDER_CALLS[name](token)).status, name).toBe(200)
    }
    expect(await records(sessionId)).toHaveLength(4)

    runner.send({
      type: 'session.finished',
      session_id: sessionId,
      agent_result: { status: 'completed', return_code: 0, error: null, timeout_stage: null },
      eval_result: null,
      error: null,
    })
    await eventually(async () => expect(await status()).toBe('COMPLETED'))
    for (const name of Object.keys(PROVIDER_CALLS) as (keyof typeof PROVIDER_CALLS)[]) {
      const got = await refusal(name, await PROVIDER_CALLS[name](token))
      expect(got, name).toMatchObject({ status: 401, message: expect.stringContaining('session ended COMPLETED') })
    }
    expect(await records(sessionId)).toHaveLength(4)
    runner.close()
  })
})

describe('inference tunnel', () => {
  it.each([true, false])(
    'a client that disconnects cancels the tunnelled engine call; the completion is kept as abandoned (stream: %s)',
    async (STREAM) => {
      const { runner, held, sessionId } = await heldSession(`tunnel-cancel-${STREAM}`, `tunnel-runner-${STREAM}`)
      await eventually(async () =>
        expect(((await (await admin(`/rollout/session/${sessionId}`)).json()) as { status: string }).status).toBe('RUNNING'),
      )
      const controller = new AbortController()
      const pending = chat(sessionId, 'abandon me', controller.signal, STREAM).catch((error: unknown) => error)
      await eventually(async () => expect(held).toHaveLength(1))
      controller.abort()
      await pending
      const cancel = await runner.next('tunnel.cancel')
      expect(cancel.request_id).toBe(held[0]!.request_id)
      const [record] = await eventually(async () => {
        const found = await records(sessionId)
        expect(found).toHaveLength(1)
        return found
      })
      expect(record).toMatchObject({ status: 'abandoned', trainable: false, provenance: { route: `runner:tunnel-runner-${STREAM}` } })
      runner.close()
    },
  )

  it('answers 502 when the runner fails the request and carries large bodies in several frames', async () => {
    const runner = await TestRunner.start('tunnel-big')
    let bodyLength = 0
    runner.serveTunnel((call) => {
      bodyLength = call.body.length
      if (call.body.includes('please fail')) {
        runner.send({ type: 'tunnel.error', request_id: call.request_id, message: 'engine crashed' })
        return null
      }
      return { status: 200, body: engineAnswer([1, 2], [5, 151645], 'x'.repeat(300_000)), chunkChars: 64 * 1024 }
    })
    expect((await submit(taskBody('tunnel-big'))).status).toBe(200)
    const { session_id: sessionId } = await runner.takeAssignment('tunnel-big')
    await eventually(async () =>
      expect(((await (await admin(`/rollout/session/${sessionId}`)).json()) as { status: string }).status).toBe('RUNNING'),
    )
    const big = await chat(sessionId, 'y'.repeat(400_000))
    expect(big.status).toBe(200)
    expect(bodyLength).toBeGreaterThan(400_000)
    const frames = runner.received.filter((message) => message.type === 'tunnel.body')
    expect(frames.length).toBeGreaterThanOrEqual(3)
    expect(((await big.json()) as { choices: { message: { content: string } }[] }).choices[0]!.message.content).toHaveLength(300_000)
    const failed = await chat(sessionId, 'please fail')
    expect(failed.status).toBe(502)
    expect(((await failed.json()) as { error: { message: string } }).error.message).toContain('engine crashed')
    runner.close()
  })
})
