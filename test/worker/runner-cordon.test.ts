/**
 * An admin drain (`DELETE /rollout/runners/:id`) is a cordon: it holds across the runner's reconnects (a full
 * `register` on a new connection), across its process restarting under the same id (a clean close, then a
 * fresh registration), until `POST /rollout/runners/:id/resume` undoes it. A runner's own drain (its `drain`
 * message, SIGTERM) stays its own: a resume does not undo it. Only an id the edge knows can be drained (registered,
 * or enrolled and away): one never seen is a 404, so a mistyped id is never a silent "draining".
 */
import { SELF } from 'cloudflare:test'
import { describe, expect, it } from 'vitest'
import type { RolloutStatus, RunnerEntry, RunnerList } from '../../src/contract/rollout.ts'
import { ADMIN, cancelTask, EDGE, eventually, submit, TestRunner, taskBody, taskStatus } from './rollout-support.ts'

async function node(runnerId: string) {
  const overview = (await (await SELF.fetch(`${EDGE}/rollout/status`, { headers: ADMIN })).json()) as RolloutStatus
  return { node: overview.nodes.nodes.find((entry) => entry.node_id === runnerId), pending: overview.pipeline.pending_sessions }
}

async function listed(runnerId: string): Promise<RunnerEntry | undefined> {
  const response = await SELF.fetch(`${EDGE}/rollout/runners`, { headers: ADMIN })
  expect(response.status).toBe(200)
  return ((await response.json()) as RunnerList).runners.find((entry) => entry.runner_id === runnerId)
}

function drain(runnerId: string): Promise<Response> {
  return SELF.fetch(`${EDGE}/rollout/runners/${runnerId}`, { method: 'DELETE', headers: ADMIN })
}

function resume(runnerId: string): Promise<Response> {
  return SELF.fetch(`${EDGE}/rollout/runners/${runnerId}/resume`, { method: 'POST', headers: ADMIN })
}

describe('an admin drain', () => {
  it('holds across reconnects and a restart of the runner until resumed', async () => {
    const first = await TestRunner.start('cordon-r')
    const drained = await drain('cordon-r')
    expect(drained.status).toBe(200)
    expect(await drained.json()).toEqual({ runner_id: 'cordon-r', draining: true })
    await first.next('drained')
    // A network blip: a new connection registers in full (the old one is replaced).
    const second = await TestRunner.start('cordon-r')
    expect((await node('cordon-r')).node).toMatchObject({ draining: true, connected: true })
    await second.next('drained')
    // The runner process restarts under the same id: a clean goodbye (the edge forgets the runner), then a fresh start.
    second.close(1000, 'shutdown')
    await eventually(async () => expect((await node('cordon-r')).node).toBeUndefined())
    const third = await TestRunner.start('cordon-r')
    expect((await node('cordon-r')).node).toMatchObject({ draining: true, connected: true, sessions: 0 })
    // A task submitted now is queued: the only runner is drained (submit returns once its sessions were dispatched).
    expect((await submit(taskBody('cordon-1'))).status).toBe(200)
    expect((await taskStatus('cordon-1', { results: false })).sessions[0]!.status).toBe('REGISTERED')
    expect((await node('cordon-r')).pending).toBe(1)
    expect(third.received.filter((message) => message.type === 'assign')).toEqual([])
    // Undone: the queued session goes to the runner.
    const resumed = await resume('cordon-r')
    expect(resumed.status).toBe(200)
    expect(await resumed.json()).toEqual({ runner_id: 'cordon-r', draining: false })
    const assigned = await third.takeAssignment('cordon-1', ['INITIALIZING'])
    expect(assigned.task_id).toBe('cordon-1')
    expect((await node('cordon-r')).node).toMatchObject({ draining: false, sessions: 1 })
    await cancelTask('cordon-1')
    third.close()
  }, 20_000) // three connections and a task: more than the 5 s default, not a race

  it("a resume leaves a runner's own drain in place; unknown ids are 404", async () => {
    const runner = await TestRunner.start('cordon-self')
    runner.send({ type: 'drain' })
    await runner.next('drained')
    const resumed = await resume('cordon-self')
    expect(resumed.status).toBe(200)
    expect(await resumed.json()).toEqual({ runner_id: 'cordon-self', draining: true })
    expect((await node('cordon-self')).node).toMatchObject({ draining: true })
    expect((await resume('cordon-nobody')).status).toBe(404)
    runner.close(1000, 'drained')
  })

  it('an id never seen is 404; an enrolled runner that is away is drained from its next registration on, listed meanwhile', async () => {
    const never = await drain('cordon-never')
    expect(never.status).toBe(404)
    expect(((await never.json()) as { error: { message: string } }).error.message).toBe(
      'runner cordon-never not found: it has never registered with this edge (GET /rollout/runners lists the ids it knows)',
    )
    expect((await resume('cordon-never')).status).toBe(404)
    expect(await listed('cordon-never')).toBeUndefined()

    const first = await TestRunner.start('cordon-away')
    expect(await listed('cordon-away')).toMatchObject({
      state: 'connected',
      accepting: true,
      healthy: true,
      draining: false,
      cordoned: false,
      cordoned_at: null,
      // Two-phase enrolment: the secret is confirmed by the connection that presents it (the next one).
      credential: 'pending',
      slots: { init: { max: 4 }, run: { inflight: 0, max: 2 }, postrun: { max: 4 }, ready: { max: 2 } },
      sessions: 0,
    })
    // The runner process stops (a clean goodbye: the edge forgets it); its id stays enrolled.
    first.close(1000, 'shutdown')
    await eventually(async () => expect((await listed('cordon-away'))?.state).toBe('absent'))
    // Not drained yet: a resume of the enrolled id is a no-op (not the 404 of an id never seen).
    expect(await (await resume('cordon-away')).json()).toEqual({ runner_id: 'cordon-away', draining: false })
    const away = await drain('cordon-away')
    expect(away.status).toBe(200)
    expect(await listed('cordon-away')).toMatchObject({ state: 'absent', accepting: false, cordoned: true, slots: null })

    // Work waits while the runner is away, and it comes back drained: nothing goes to it until resumed.
    expect((await submit(taskBody('cordon-away-1'))).status).toBe(200)
    const back = await TestRunner.start('cordon-away')
    await back.next('drained')
    expect(await listed('cordon-away')).toMatchObject({
      state: 'connected',
      healthy: true,
      accepting: false,
      cordoned: true,
      credential: 'confirmed',
    })
    expect((await taskStatus('cordon-away-1', { results: false })).sessions[0]!.status).toBe('REGISTERED')
    expect(back.received.filter((message) => message.type === 'assign')).toEqual([])
    expect((await resume('cordon-away')).status).toBe(200)
    expect((await back.takeAssignment('cordon-away-1', ['INITIALIZING'])).task_id).toBe('cordon-away-1')
    expect(await listed('cordon-away')).toMatchObject({ accepting: true, cordoned: false, sessions: 1 })
    await cancelTask('cordon-away-1')
    back.close()
  }, 20_000) // two connections and a task, as above
})
