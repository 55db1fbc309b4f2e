/**
 * A runner whose engine was down when it registered (no `upstream`) takes a session that calls the engine
 * directly; the assignment is still on its way (not acknowledged) when its engine comes up. What the runner
 * then says must not cost that assignment: `heartbeat.upstream` (this runner) and a second `register` on the
 * live connection (runners before it) both only update the runner at the edge (engine, window, capacity),
 * the session is assigned once (one dispatch attempt, no cancel), and sessions that need the runner's engine
 * follow.
 */
import { SELF } from 'cloudflare:test'
import { describe, expect, it } from 'vitest'
import { RUNNER_PROTOCOL_VERSION } from '../../src/contract/runner-protocol.ts'
import { ADMIN, cancelTask, EDGE, eventually, submit, TestRunner, taskBody } from './rollout-support.ts'

const ENGINE = { model: 'Qwen/Qwen3-8B', kind: 'vllm' as const, max_model_len: 8192 }
const METRICS = { init_queue_depth: 0, init_inflight: 0, ready_depth: 0, run_inflight: 0, postrun_queue_depth: 0, postrun_inflight: 0 }

async function admin<T>(path: string): Promise<T> {
  const res = await SELF.fetch(`${EDGE}${path}`, { headers: ADMIN })
  expect(res.status).toBe(200)
  return (await res.json()) as T
}

interface NodeInfo {
  node_id: string
  max_run_workers: number
  upstream: typeof ENGINE | null
}

async function node(runnerId: string): Promise<NodeInfo | undefined> {
  const status = await admin<{ nodes: { nodes: NodeInfo[] } }>('/rollout/status')
  return status.nodes.nodes.find((entry) => entry.node_id === runnerId)
}

/** A direct-route session (it needs no runner engine) and a runner-route one (it does), in two tasks. */
async function submitBoth(prefix: string): Promise<void> {
  const direct = { route: 'direct', url: 'http://127.0.0.1:8000', served_model: 'm', max_model_len: 4096 }
  expect((await submit(taskBody(`${prefix}-direct`, { upstream: direct }))).status).toBe(200)
  expect((await submit(taskBody(`${prefix}-runner`, { upstream: { route: 'runner' } }))).status).toBe(200)
}

async function assignedOnce(runner: TestRunner, sessionId: string): Promise<void> {
  const info = await admin<{ status: string; runner_id: string | null; dispatch_attempts: number }>(`/rollout/session/${sessionId}`)
  expect(info).toMatchObject({ status: 'RUNNING', runner_id: runner.runnerId, dispatch_attempts: 1 })
  const assigns = runner.received.filter((message) => message.type === 'assign' && message.session.session_id === sessionId)
  expect(assigns).toHaveLength(1)
  expect(runner.received.filter((message) => message.type === 'cancel')).toEqual([])
}

describe('a runner whose engine comes up after it registered', () => {
  it('heartbeat.upstream: the assignment in flight runs once; runner-route sessions follow it', async () => {
    const runner = await TestRunner.start('engine-up-beat', { upstream: null })
    await submitBoth('eu-beat')
    const { session } = await runner.next('assign', (message) => message.session.task_id === 'eu-beat-direct')
    expect(runner.received.filter((message) => message.type === 'assign')).toHaveLength(1)
    // The engine answers before the runner has read the assignment.
    runner.send({ type: 'heartbeat', metrics: METRICS, upstream: ENGINE })
    const followed = await runner.next('assign', (message) => message.session.task_id === 'eu-beat-runner')
    expect(followed.session.route).toBe('runner')
    expect((await node(runner.runnerId))?.upstream).toEqual(ENGINE)
    for (const id of [session.session_id, followed.session.session_id]) {
      runner.send({ type: 'ack', session_id: id, accepted: true })
      for (const status of ['INITIALIZING', 'READY', 'RUNNING'] as const) runner.send({ type: 'session.status', session_id: id, status })
    }
    await eventually(() => assignedOnce(runner, session.session_id))
    await cancelTask('eu-beat-direct')
    await cancelTask('eu-beat-runner')
    runner.close()
  })

  it('a second register on the live connection (older runners): an update only, nothing lost or sent twice', async () => {
    const runner = await TestRunner.start('engine-up-again', { upstream: null })
    await submitBoth('eu-again')
    const { session } = await runner.next('assign', (message) => message.session.task_id === 'eu-again-direct')
    // Built before the assignment arrived: it lists no session.
    runner.send({
      type: 'register',
      protocol_version: RUNNER_PROTOCOL_VERSION,
      runner_id: runner.runnerId,
      capacity: { max_init_workers: 4, max_run_workers: 3, max_postrun_workers: 4 },
      upstream: ENGINE,
      sessions: [],
    })
    expect(await runner.next('registered')).toMatchObject({ keep: [], drop: [] })
    const followed = await runner.next('assign', (message) => message.session.task_id === 'eu-again-runner')
    expect(await node(runner.runnerId)).toMatchObject({ upstream: ENGINE, max_run_workers: 3 })
    for (const id of [session.session_id, followed.session.session_id]) {
      runner.send({ type: 'ack', session_id: id, accepted: true })
      for (const status of ['INITIALIZING', 'READY', 'RUNNING'] as const) runner.send({ type: 'session.status', session_id: id, status })
    }
    await eventually(() => assignedOnce(runner, session.session_id))
    await cancelTask('eu-again-direct')
    await cancelTask('eu-again-runner')
    runner.close()
  })
})
