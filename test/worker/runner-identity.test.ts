/**
 * Runner identity (security issue, item 1) in workerd: the shared runner token only enrols; the first
 * registration of an id gets a per-runner secret once; a later connection of that id without it is
 * refused before the live connection is touched; an admin can forget a credential; and a runner can
 * only report on the sessions assigned to it.
 */
import { env, runInDurableObject, SELF } from 'cloudflare:test'
import { describe, expect, it } from 'vitest'
import { RUNNER_CLOSE, RUNNER_PROTOCOL_VERSION, RUNNER_SECRET_HEADER } from '../../src/contract/runner-protocol.ts'
import type { SessionRolloutRpc } from '../../src/durable/session/session-rollout.ts'
import { ADMIN, cancelTask, EDGE, eventually, RUNNER_TOKEN, runnerSecrets, submit, TestRunner, taskBody } from './rollout-support.ts'

function hub() {
  return env.RUNNERS.get(env.RUNNERS.idFromName('default'))
}

async function connectRaw(runnerId: string, secret: string | null): Promise<Response> {
  return SELF.fetch(`${EDGE}/runners/connect?runner_id=${runnerId}`, {
    headers: { upgrade: 'websocket', authorization: `Bearer ${RUNNER_TOKEN}`, ...(secret ? { [RUNNER_SECRET_HEADER]: secret } : {}) },
  })
}

function register(runner: TestRunner): void {
  runner.send({
    type: 'register',
    protocol_version: RUNNER_PROTOCOL_VERSION,
    runner_id: runner.runnerId,
    capacity: { max_init_workers: 2, max_run_workers: 2, max_postrun_workers: 2 },
  })
}

describe('runner identity', () => {
  it('enrols on first registration: a per-runner secret, sent once, stored only as a hash', async () => {
    const runner = await TestRunner.start('ident-enrol')
    const registered = runner.received.find((message) => message.type === 'registered')
    const secret = registered?.type === 'registered' ? registered.runner_secret : undefined
    expect(secret).toMatch(/^[A-Za-z0-9_-]{43}$/)
    const stored = await runInDurableObject(hub(), (_instance, state) =>
      [...state.storage.sql.exec('SELECT * FROM hub_runner_credentials WHERE runner_id = ?', 'ident-enrol')].map((row) =>
        JSON.stringify(row),
      ),
    )
    expect(stored).toHaveLength(1)
    expect(stored[0]).not.toContain(secret)
    // A reconnect with the secret replaces the old socket and is not sent a new secret.
    const again = await TestRunner.connect('ident-enrol')
    register(again)
    const second = await again.next('registered')
    expect(second.runner_secret).toBeUndefined()
    await eventually(async () => expect(runner.closeCode).toBe(RUNNER_CLOSE.replaced))
    again.close()
  })

  it('refuses a takeover (missing or wrong secret) with 401 and leaves the live connection alone', async () => {
    await TestRunner.start('ident-owner')
    // The owner reconnects presenting its secret: that confirms the enrolment.
    const owner = await TestRunner.start('ident-owner')
    for (const secret of [null, 'not-the-secret', `${runnerSecrets.get('ident-owner')}x`]) {
      const res = await connectRaw('ident-owner', secret)
      expect(res.status).toBe(401)
      expect(res.webSocket).toBeNull()
      const body = (await res.json()) as { error: { message: string } }
      expect(body.error.message).toContain(RUNNER_SECRET_HEADER)
    }
    // The owner is still connected and still gets work.
    expect((await submit(taskBody('ident-t1'))).status).toBe(200)
    const { session } = await owner.next('assign', (message) => message.session.task_id === 'ident-t1')
    expect(owner.closed).toBe(false)
    expect(session.task_id).toBe('ident-t1')
    await cancelTask('ident-t1')
    owner.close()
  })

  it('a link dropped after registered but before the secret was presented: the token alone enrols again', async () => {
    const first = await TestRunner.connect('ident-blip', RUNNER_TOKEN, null)
    register(first)
    const lost = (await first.next('registered')).runner_secret
    expect(lost).toBeTruthy()
    // While that connection is live, another token-only enrolment waits (409), as before.
    expect((await connectRaw('ident-blip', null)).status).toBe(409)
    first.close()
    await eventually(async () => expect(first.closed).toBe(true))
    // The runner never kept the secret (the link dropped, or it died before writing its file).
    const again = await TestRunner.connect('ident-blip', RUNNER_TOKEN, null)
    register(again)
    const fresh = (await again.next('registered')).runner_secret
    expect(fresh).toMatch(/^[A-Za-z0-9_-]{43}$/)
    expect(fresh).not.toBe(lost)
    again.close()
    await eventually(async () => expect(again.closed).toBe(true))
    // The stale pending secret was replaced: it no longer opens the id, the new one does (and confirms it).
    expect((await connectRaw('ident-blip', lost ?? null)).status).toBe(401)
    const confirmed = await TestRunner.connect('ident-blip', RUNNER_TOKEN, fresh ?? null)
    register(confirmed)
    expect((await confirmed.next('registered')).runner_secret).toBeUndefined()
    confirmed.close()
    await eventually(async () => expect(confirmed.closed).toBe(true))
    // Confirmed: the shared token alone is refused now, even with no connection live.
    const refused = await connectRaw('ident-blip', null)
    expect(refused.status).toBe(401)
    expect(refused.webSocket).toBeNull()
  })

  it("secret.kept on the enrolling connection confirms the secret at once; one that is not the id's confirms nothing", async () => {
    const first = await TestRunner.connect('ident-kept', RUNNER_TOKEN, null)
    register(first)
    const registered = await first.next('registered')
    expect(registered).toMatchObject({ confirm_secret: true })
    const secret = registered.runner_secret ?? ''
    first.send({ type: 'secret.kept', runner_secret: `${secret.slice(1)}x` })
    expect((await first.next('error')).message).toBe("secret.kept: not this runner id's secret")
    // Still pending: the token alone waits for the live connection (409), it is not refused outright.
    expect((await connectRaw('ident-kept', null)).status).toBe(409)
    first.send({ type: 'secret.kept', runner_secret: secret })
    // Confirmed on this very connection: the token alone is refused (401), now and once it has gone.
    await eventually(async () => expect((await connectRaw('ident-kept', null)).status).toBe(401))
    first.close()
    await eventually(async () => expect(first.closed).toBe(true))
    expect((await connectRaw('ident-kept', null)).status).toBe(401)
  })

  it('answers 409 to a second enrolment of an id whose first connection has not registered yet', async () => {
    const first = await TestRunner.connect('ident-race', RUNNER_TOKEN, null)
    const res = await connectRaw('ident-race', null)
    expect(res.status).toBe(409)
    expect(first.closed).toBe(false)
    register(first)
    expect((await first.next('registered')).runner_secret).toBeTruthy()
    first.close()
  })

  it('an admin can forget a credential so the id enrols again', async () => {
    const missing = await SELF.fetch(`${EDGE}/rollout/runners/ident-nobody/credential`, { method: 'DELETE', headers: ADMIN })
    expect(missing.status).toBe(404)
    const runner = await TestRunner.start('ident-forget')
    const oldSecret = runnerSecrets.get('ident-forget')
    runner.close()
    await eventually(async () => expect(runner.closed).toBe(true))
    const unauthorized = await SELF.fetch(`${EDGE}/rollout/runners/ident-forget/credential`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${RUNNER_TOKEN}` },
    })
    expect(unauthorized.status).toBe(401)
    const forgotten = await SELF.fetch(`${EDGE}/rollout/runners/ident-forget/credential`, { method: 'DELETE', headers: ADMIN })
    expect(forgotten.status).toBe(200)
    expect(await forgotten.json()).toEqual({ runner_id: 'ident-forget', credential: 'forgotten' })
    const fresh = await TestRunner.connect('ident-forget', RUNNER_TOKEN, null)
    register(fresh)
    const registered = await fresh.next('registered')
    expect(registered.runner_secret).toBeTruthy()
    expect(registered.runner_secret).not.toBe(oldSecret)
    fresh.close()
  })

  it('ignores status and results from a runner the session is not assigned to', async () => {
    const owner = await TestRunner.start('ident-holder')
    expect((await submit(taskBody('ident-t2'))).status).toBe(200)
    const session = await owner.takeAssignment('ident-t2')
    const rollout = env.SESSIONS.get(env.SESSIONS.idFromName(session.session_id)) as unknown as SessionRolloutRpc
    await eventually(async () => expect((await rollout.lifecycle())?.status).toBe('RUNNING'))
    const other = await TestRunner.start('ident-other')
    other.send({
      type: 'session.finished',
      session_id: session.session_id,
      agent_result: { status: 'completed', return_code: 0 },
      eval_result: { outcome_reward: 999 },
    })
    other.send({ type: 'session.status', session_id: session.session_id, status: 'READY' })
    const refused = await other.next('cancel', (message) => message.session_id === session.session_id)
    expect(refused.reason).toContain('not assigned to this runner')
    const state = await rollout.lifecycle()
    expect(state?.status).toBe('RUNNING')
    expect(state?.runner_id).toBe('ident-holder')
    await cancelTask('ident-t2')
    owner.close()
    other.close()
  })
})
