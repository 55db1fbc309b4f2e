/**
 * A runner whose link went half-open connects again; the edge had not noticed the old socket was dead, so it
 * may send an assignment on the new connection before that connection's `register` reached it. The register
 * was built before the assignment arrived and does not list it: the assignment is still on its way, not lost.
 * It is settled by its acknowledgement (or its deadline), never dispatched a second time.
 * An assignment sent on the old connection that the runner never received (lost with the dead socket) is not
 * on its way: the register on the new connection that does not list it has it dispatched again at once, not
 * after its 15 s acknowledgement deadline.
 */
import { env, runInDurableObject, SELF } from 'cloudflare:test'
import { describe, expect, it } from 'vitest'
import { RUNNER_PROTOCOL_VERSION } from '../../src/contract/runner-protocol.ts'
import { RUNNER_HUB_NAME } from '../../src/durable/runner/names.ts'
import { linkStub } from '../../src/worker/pipeline/rollout-stubs.ts'
import { ADMIN, cancelTask, EDGE, eventually, submit, TestRunner, taskBody } from './rollout-support.ts'

describe('a reconnecting runner', () => {
  it('an assignment sent on the new connection before its register is assigned once', async () => {
    const first = await TestRunner.start('reconnect-assign')
    // The runner connects again (its old link went half-open): the new connection replaces the old one.
    const second = await TestRunner.connect('reconnect-assign')
    await eventually(async () => expect(first.closed).toBe(true))
    expect((await submit(taskBody('rc-assign'))).status).toBe(200)
    // Sent on the new connection: the edge had not seen the old one die, nor this one register.
    const { session } = await second.next('assign')
    second.send({
      type: 'register',
      protocol_version: RUNNER_PROTOCOL_VERSION,
      runner_id: second.runnerId,
      capacity: { max_init_workers: 4, max_run_workers: 2, max_postrun_workers: 4 },
      upstream: { model: 'Qwen/Qwen3-8B', kind: 'vllm' },
      sessions: [],
    })
    expect(await second.next('registered')).toMatchObject({ keep: [], drop: [] })
    second.send({ type: 'ack', session_id: session.session_id, accepted: true })
    for (const status of ['INITIALIZING', 'READY', 'RUNNING'] as const) {
      second.send({ type: 'session.status', session_id: session.session_id, status })
    }
    await eventually(async () => {
      const res = await SELF.fetch(`${EDGE}/rollout/session/${session.session_id}`, { headers: ADMIN })
      expect(await res.json()).toMatchObject({ status: 'RUNNING', runner_id: second.runnerId, dispatch_attempts: 1 })
    })
    expect(second.received.filter((message) => message.type === 'assign')).toHaveLength(1)
    expect(second.received.filter((message) => message.type === 'cancel')).toEqual([])
    await cancelTask('rc-assign')
    second.close()
  }, 20_000) // two connections, a task and a session walked to RUNNING: more than the 5 s default, not a race

  it('an assignment sent on the old connection and not listed by the new one is dispatched again at once', async () => {
    const first = await TestRunner.start('reconnect-lost')
    expect((await submit(taskBody('rc-lost'))).status).toBe(200)
    // Sent on the old connection; the runner never got it (the socket was already dead): no ack.
    const { session: lost } = await first.next('assign')
    const second = await TestRunner.connect('reconnect-lost')
    await eventually(async () => expect(first.closed).toBe(true))
    second.send({
      type: 'register',
      protocol_version: RUNNER_PROTOCOL_VERSION,
      runner_id: second.runnerId,
      capacity: { max_init_workers: 4, max_run_workers: 2, max_postrun_workers: 4 },
      upstream: { model: 'Qwen/Qwen3-8B', kind: 'vllm' },
      sessions: [],
    })
    expect(await second.next('registered')).toMatchObject({ keep: [], drop: [] })
    // Dispatched again right after the register (well within the 5 s wait; its deadline is 15 s away).
    const { session: again } = await second.next('assign')
    expect(again.session_id).toBe(lost.session_id)
    // Never delivered on the new connection before it registered.
    expect(second.received.map((message) => message.type)).toEqual(['registered', 'assign'])
    second.send({ type: 'ack', session_id: again.session_id, accepted: true })
    second.send({ type: 'session.status', session_id: again.session_id, status: 'INITIALIZING' })
    await eventually(async () => {
      const res = await SELF.fetch(`${EDGE}/rollout/session/${again.session_id}`, { headers: ADMIN })
      expect(await res.json()).toMatchObject({ status: 'INITIALIZING', runner_id: second.runnerId, dispatch_attempts: 2 })
    })
    await cancelTask('rc-lost')
    second.close()
  }, 20_000) // two connections and a session dispatched twice: more than the 5 s default, not a race

  it("the runner's link delivers a message sent for one connection only on that connection", async () => {
    const first = await TestRunner.start('link-addressed')
    const second = await TestRunner.start('link-addressed')
    await eventually(async () => expect(first.closed).toBe(true))
    // The connection the hub sends this runner's assignments to: the link's id of the second socket.
    const hub = env.RUNNERS.get(env.RUNNERS.idFromName(RUNNER_HUB_NAME))
    const connection = await runInDurableObject(hub, async (_instance, state) => {
      const row = state.storage.sql
        .exec<{ connection: string | null }>('SELECT connection FROM hub_runners WHERE runner_id = ?', 'link-addressed')
        .one()
      return row.connection
    })
    expect(connection).toEqual(expect.any(String))
    const link = linkStub(env, 'link-addressed')
    // Sent for an older (or any other) connection: not delivered on this one.
    expect(await link.deliver([{ message: { type: 'error', message: 'for another connection' }, connection: 'an-older-one' }])).toBe(false)
    expect(await link.deliver([{ message: { type: 'error', message: 'for this connection' }, connection: connection as string }])).toBe(
      true,
    )
    expect(await second.next('error')).toEqual({ type: 'error', message: 'for this connection' })
    expect(second.received.filter((message) => message.type === 'error')).toHaveLength(1)
    second.close()
  })
})
