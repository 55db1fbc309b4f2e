/**
 * An admin drain (`DELETE /rollout/runners/:id`) is a cordon: it holds across the runner's reconnects (a full
 * `register` on a new connection), across its process restarting under the same id (a clean close, then a
 * fresh registration), until `POST /rollout/runners/:id/resume` undoes it. A runner's own drain (its `drain`
 * message, SIGTERM) stays its own: a resume does not undo it.
 */
import { SELF } from 'cloudflare:test'
import { describe, expect, it } from 'vitest'
import type { RolloutStatus } from '../../src/contract/rollout.ts'
import { ADMIN, cancelTask, EDGE, eventually, submit, TestRunner, taskBody, taskStatus } from './rollout-support.ts'

async function node(runnerId: string) {
  const overview = (await (await SELF.fetch(`${EDGE}/rollout/status`, { headers: ADMIN })).json()) as RolloutStatus
  return { node: overview.nodes.nodes.find((entry) => entry.node_id === runnerId), pending: overview.pipeline.pending_sessions }
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
})
