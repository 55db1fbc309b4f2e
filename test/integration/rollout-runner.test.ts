/**
 * Rollout orchestration for real: the edge under `wrangler dev` (workerd, Durable Objects with SQLite,
 * R2), the stand-in engine, scripted runners over real WebSockets (`ws`), the official OpenAI SDK as
 * the harness, and a Node HTTP server as the trainer's callback endpoint.
 *
 * Covers dispatch, acknowledgements and heartbeats, tunnelled inference (streamed and not) with exact
 * token capture, runner loss before and during RUNNING, and an edge restart mid-task.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer, type Server } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import OpenAI from 'openai'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import type { RolloutStatus, TaskStatus } from '../../src/contract/rollout.ts'
import type { SessionAssignment } from '../../src/contract/runner-protocol.ts'
import type { TaskResult } from '../../src/contract/trajectory.ts'
import { type EngineHandle, startEngine } from '../../engine/server.ts'
import { type EdgeProcess, startEdge } from '../../scripts/lib/processes.ts'
import { RunnerClient } from '../support/runner-client.ts'
import { type CompletionRecordJson, eventually } from '../support/stack.ts'

const ADMIN_TOKEN = 'itest-admin-token'
const RUNNER_TOKEN = 'itest-runner-token'
/** Short heartbeats so a lost runner is noticed within seconds (grace 3 s covers an edge restart). */
const HEARTBEAT_MS = 1_000
const GRACE_MS = 3_000

let engine: EngineHandle
let edge: EdgeProcess
let persistTo: string
let vars: Record<string, string>
let trainer: Server
let trainerUrl: string
const deliveries: { headers: Record<string, string | string[] | undefined>; body: TaskResult }[] = []
let failNextDeliveries = 0
const runners: RunnerClient[] = []

async function admin(path: string, init: RequestInit = {}): Promise<Response> {
  return fetch(`${edge.url}${path}`, {
    ...init,
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json', ...init.headers },
  })
}

async function submit(body: Record<string, unknown>): Promise<void> {
  const res = await admin('/rollout/task/submit', { method: 'POST', body: JSON.stringify(body) })
  if (res.status !== 200) throw new Error(`submit ${res.status}: ${await res.text()}`)
}

async function task(taskId: string): Promise<TaskStatus> {
  const res = await admin(`/rollout/task/${taskId}`)
  if (res.status !== 200) throw new Error(`task ${res.status}: ${await res.text()}`)
  return (await res.json()) as TaskStatus
}

async function sessionInfo(sessionId: string): Promise<{ status: string; runner_id: string | null; dispatch_attempts: number }> {
  return (await (await admin(`/rollout/session/${sessionId}`)).json()) as {
    status: string
    runner_id: string | null
    dispatch_attempts: number
  }
}

async function completions(sessionId: string): Promise<CompletionRecordJson[]> {
  const res = await admin(`/v1/sessions/${sessionId}/completions`)
  return ((await res.json()) as { completions: CompletionRecordJson[] }).completions
}

async function runner(
  runnerId: string,
  capacity?: { max_init_workers: number; max_run_workers: number; max_postrun_workers: number },
): Promise<RunnerClient> {
  const client = new RunnerClient({
    edgeUrl: edge.url,
    token: RUNNER_TOKEN,
    runnerId,
    engineUrl: engine.url,
    ...(capacity ? { capacity } : {}),
  })
  runners.push(client)
  await client.start()
  return client
}

function harness(session: SessionAssignment): OpenAI {
  return new OpenAI({ baseURL: session.base_urls.openai, apiKey: session.token, maxRetries: 0 })
}

async function waitStatus(sessionId: string, status: string, timeoutMs = 10_000): Promise<void> {
  await eventually(async () => expect((await sessionInfo(sessionId)).status).toBe(status), timeoutMs)
}

/** What the engine samples for exactly this engine body (deterministic per seed). */
async function engineDirect(record: CompletionRecordJson) {
  const response = await fetch(`${engine.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ ...record.request, return_token_ids: true, logprobs: true, top_logprobs: 0, stream: false }),
  })
  return (await response.json()) as { prompt_token_ids: number[]; choices: { token_ids: number[] }[] }
}

const MESSAGES = [
  { role: 'system' as const, content: 'You are a coding agent.' },
  { role: 'user' as const, content: 'create hello.txt containing hi' },
]

beforeAll(async () => {
  engine = await startEngine({ seed: 7 })
  trainer = createServer((request, response) => {
    let body = ''
    request.on('data', (chunk: Buffer) => {
      body += chunk.toString()
    })
    request.on('end', () => {
      deliveries.push({ headers: request.headers, body: JSON.parse(body) as TaskResult })
      if (failNextDeliveries > 0) {
        failNextDeliveries--
        response.writeHead(503).end('warming up')
        return
      }
      response.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}')
    })
  })
  await new Promise<void>((resolve) => trainer.listen(0, '127.0.0.1', resolve))
  const address = trainer.address()
  trainerUrl = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`
  persistTo = mkdtempSync(join(tmpdir(), 'rollgate-rollout-itest-'))
  vars = {
    ROLLGATE_ADMIN_TOKEN: ADMIN_TOKEN,
    ROLLGATE_SIGNING_KEY: 'itest-signing-key',
    ROLLGATE_RUNNER_TOKEN: RUNNER_TOKEN,
    ROLLGATE_UPSTREAM_URL: engine.url,
    ROLLGATE_SERVED_MODEL: 'Qwen/Qwen3-8B',
    ROLLGATE_HEARTBEAT_MS: '200',
    ROLLGATE_RUNNER_HEARTBEAT_MS: String(HEARTBEAT_MS),
    ROLLGATE_RUNNER_GRACE_MS: String(GRACE_MS),
    ROLLGATE_CALLBACK_BASE_DELAY_MS: '300',
  }
  edge = await startEdge({ persistTo, vars })
})

// Each test's runners end with it, passed or failed: a runner a failed test left connected would take the next
// test's sessions and fail it too.
afterEach(async () => {
  for (const client of runners.splice(0)) await client.shutdown().catch(() => {})
})

afterAll(async () => {
  await edge?.stop()
  await engine?.close()
  await new Promise<void>((resolve) => (trainer ? trainer.close(() => resolve()) : resolve()))
  if (persistTo) rmSync(persistTo, { recursive: true, force: true })
})

describe('rollout with runners over WebSockets', () => {
  it('dispatches, takes acks and heartbeats, tunnels inference (streamed and not) with exact tokens, and calls the trainer back', async () => {
    const alpha = await runner('alpha')
    failNextDeliveries = 1
    await submit({
      task_id: 'it-task-1',
      instruction: 'create hello.txt containing hi',
      num_samples: 2,
      agent: { harness: 'qwen_code' },
      builder: { strategy: 'prefix_merging' },
      evaluator: { strategy: 'session_completed' },
      callback_url: `${trainerUrl}/rollout-callback`,
      metadata: { group_id: 'g-it', policy_version: 5 },
    })
    const first = await alpha.take('it-task-1')
    const second = await alpha.take('it-task-1')
    expect(first.route).toBe('runner')
    await waitStatus(first.session_id, 'RUNNING')
    await waitStatus(second.session_id, 'RUNNING')

    // Heartbeats carry the runner's stage metrics into the overview.
    await eventually(async () => {
      const overview = (await (await admin('/rollout/status')).json()) as RolloutStatus
      const node = overview.nodes.nodes.find((entry) => entry.node_id === 'alpha')
      expect(node).toMatchObject({ healthy: true, connected: true, sessions: 2, metrics: { run_inflight: 2 } })
    })
    expect(alpha.stats.heartbeats).toBeGreaterThan(0)

    // The harness talks to the edge; the edge tunnels to alpha's engine.
    const client = harness(first)
    const plain = await client.chat.completions.create({ model: 'harness-model', messages: MESSAGES })
    expect(plain.choices[0]!.message.content ?? plain.choices[0]!.message.tool_calls).toBeTruthy()
    const stream = await client.chat.completions.create({ model: 'harness-model', messages: MESSAGES, stream: true })
    const deltas: unknown[] = []
    for await (const chunk of stream) if (chunk.choices[0]?.delta) deltas.push(chunk.choices[0].delta)
    expect(deltas.length).toBeGreaterThan(0)
    expect(alpha.stats.tunnelRequests).toBe(2)
    const records = await completions(first.session_id)
    expect(records).toHaveLength(2)
    for (const record of records) {
      expect(record).toMatchObject({ status: 'ok', trainable: true })
      expect((record.provenance as unknown as { route: string }).route).toBe('runner:alpha')
      const direct = await engineDirect(record)
      expect(record.prompt_token_ids).toEqual(direct.prompt_token_ids)
      expect(record.response_token_ids).toEqual(direct.choices[0]!.token_ids)
    }
    expect(records.map((record) => record.stream)).toEqual([false, true])
    expect((records[0]!.provenance as unknown as { policy_version: unknown }).policy_version).toBe(5)

    alpha.finish(first.session_id, { status: 'completed', return_code: 0 })
    alpha.finish(second.session_id, { status: 'failed', return_code: 1, error: 'tests failed' })
    const done = await eventually(async () => {
      const status = await task('it-task-1')
      expect(status.status).toBe('completed')
      return status
    }, 15_000)
    const byId = new Map(done.results.map((result) => [result.session_id, result]))
    const completed = byId.get(first.session_id)!
    expect(completed.status).toBe('COMPLETED')
    expect(completed.trajectory.traces.length).toBeGreaterThan(0)
    expect(completed.trajectory.traces.every((trace) => trace.reward === 1)).toBe(true)
    const sampled = completed.trajectory.traces.flatMap((trace) => trace.response_ids.filter((_, i) => trace.loss_mask[i] === 1))
    expect(sampled).toEqual(records.flatMap((record) => record.response_token_ids))
    expect(byId.get(second.session_id)).toMatchObject({ status: 'ERROR', error: 'tests failed' })

    // The trainer's endpoint failed once, then got the TaskResult, with one idempotency key.
    await eventually(async () => expect((await task('it-task-1')).callback?.state).toBe('delivered'), 15_000)
    const mine = deliveries.filter((delivery) => delivery.body.task_id === 'it-task-1')
    expect(mine).toHaveLength(2)
    expect(new Set(mine.map((delivery) => delivery.headers['idempotency-key'])).size).toBe(1)
    expect(mine[1]!.body.results).toHaveLength(2)
    await alpha.shutdown()
  })

  it('re-dispatches a session whose runner dies before RUNNING; a runner dying during RUNNING keeps every completion', async () => {
    const early = await runner('early')
    await submit({
      task_id: 'it-task-2',
      instruction: 'create hello.txt containing hi',
      agent: { harness: 'qwen_code' },
      builder: { strategy: 'per_request' },
    })
    const session = await early.take('it-task-2', ['INITIALIZING'])
    await waitStatus(session.session_id, 'INITIALIZING')
    early.crash()
    // No close frame: the edge waits out the grace period, then re-queues the session.
    await waitStatus(session.session_id, 'REGISTERED', GRACE_MS + 10_000)

    const late = await runner('late')
    const again = await late.take('it-task-2')
    expect(again.session_id).toBe(session.session_id)
    await waitStatus(session.session_id, 'RUNNING')
    expect((await sessionInfo(session.session_id)).runner_id).toBe('late')
    const client = harness(again)
    for (let turn = 0; turn < 3; turn++)
      await client.chat.completions.create({ model: 'm', messages: [...MESSAGES, { role: 'user', content: `turn ${turn}` }] })
    const before = await completions(session.session_id)
    expect(before).toHaveLength(3)

    late.crash()
    const status = await eventually(async () => {
      const current = await task('it-task-2')
      expect(current.status).not.toBe('running')
      return current
    }, GRACE_MS + 15_000)
    const [result] = status.results
    expect(result).toMatchObject({ session_id: session.session_id, status: 'ERROR', node_id: 'late' })
    expect(result!.error).toContain('did not reconnect')
    expect(result!.trajectory.traces).toHaveLength(3)
    expect(result!.trajectory.traces.map((trace) => trace.response_ids)).toEqual(before.map((record) => record.response_token_ids))
  })

  it('a second client with the shared token cannot take over a runner id; only the holder can finish and score', async () => {
    const owner = await runner('victim')
    expect(owner.secret).toMatch(/^[A-Za-z0-9_-]{43}$/)
    await submit({
      task_id: 'it-task-takeover',
      instruction: 'create hello.txt containing hi',
      agent: { harness: 'qwen_code' },
      builder: { strategy: 'per_request' },
      evaluator: { strategy: 'evaluators/hidden-tests.ts:hiddenTests' },
    })
    const session = await owner.take('it-task-takeover')
    await waitStatus(session.session_id, 'RUNNING')

    // The impostor holds the shared runner token (one compromised host) but not victim's secret. The owner is on
    // its first connection, its secret still pending (confirmed by its next connect, `docs/runner.md`): the token
    // alone is refused while that connection is live (409), a wrong secret always (401).
    for (const [secret, refusal] of [
      [undefined, /HTTP 409/],
      ['guessed-secret', /HTTP 401/],
    ] as const) {
      const impostor = new RunnerClient({
        edgeUrl: edge.url,
        token: RUNNER_TOKEN,
        runnerId: 'victim',
        engineUrl: engine.url,
        reconnect: false,
        ...(secret ? { secret } : {}),
      })
      await expect(impostor.start()).rejects.toThrow(refusal)
      await impostor.shutdown()
    }
    // The real victim was not touched: same connection, still RUNNING, still answering its session's calls.
    expect(owner.connected).toBe(true)
    expect(owner.stats.connects).toBe(1)
    expect(owner.received.some((message) => message.type === 'cancel')).toBe(false)
    expect(await sessionInfo(session.session_id)).toMatchObject({ status: 'RUNNING', runner_id: 'victim' })
    await harness(session).chat.completions.create({ model: 'm', messages: MESSAGES })
    expect(owner.stats.tunnelRequests).toBe(1)

    // A runner under its own id cannot finish or score a session it does not hold.
    const mallory = await runner('mallory')
    mallory.send({
      type: 'session.finished',
      session_id: session.session_id,
      agent_result: { status: 'completed', return_code: 0 },
      eval_result: { outcome_reward: 999 },
    })
    mallory.send({ type: 'session.status', session_id: session.session_id, status: 'READY' })
    await mallory.next('cancel', (message) => message.session_id === session.session_id)
    expect((await sessionInfo(session.session_id)).status).toBe('RUNNING')

    owner.send({
      type: 'session.finished',
      session_id: session.session_id,
      agent_result: { status: 'completed', return_code: 0 },
      eval_result: { outcome_reward: 0.25 },
    })
    owner.held.delete(session.session_id)
    const done = await eventually(async () => {
      const status = await task('it-task-takeover')
      expect(status.status).toBe('completed')
      return status
    }, 15_000)
    const [result] = done.results
    expect(result).toMatchObject({ status: 'COMPLETED', node_id: 'victim' })
    expect(result!.trajectory.traces.map((trace) => trace.reward)).toEqual([0.25])
    await mallory.shutdown()
    await owner.shutdown()
  })

  it('an edge restart mid-task loses no session and no completion', async () => {
    const steady = await runner('steady', { max_init_workers: 1, max_run_workers: 1, max_postrun_workers: 1 })
    await submit({
      task_id: 'it-task-3',
      instruction: 'create hello.txt containing hi',
      num_samples: 2,
      agent: { harness: 'qwen_code' },
      builder: { strategy: 'per_request' },
    })
    const running = await steady.take('it-task-3')
    await waitStatus(running.session_id, 'RUNNING')
    const client = harness(running)
    await client.chat.completions.create({ model: 'm', messages: [...MESSAGES, { role: 'user', content: 'before restart' }] })
    const beforeStatus = await task('it-task-3')
    const queued = beforeStatus.sessions.find((entry) => entry.session_id !== running.session_id)!
    // Not started yet (at most handed to the runner's ready buffer): REGISTERED at the edge.
    expect(queued.status).toBe('REGISTERED')
    const connectsBefore = steady.stats.connects

    const port = edge.port
    await edge.stop()
    edge = await startEdge({ persistTo, vars, port })
    // The runner reconnects by itself and re-registers the session it still runs.
    const registered = await steady.next('registered', undefined, 20_000)
    expect(steady.stats.connects).toBeGreaterThan(connectsBefore)
    // It keeps what it held: the running session (and the second sample, already assigned to it as ready buffer).
    expect(registered.drop).toEqual([])
    expect(registered.keep).toContain(running.session_id)
    expect((await sessionInfo(running.session_id)).status).toBe('RUNNING')

    await client.chat.completions.create({ model: 'm', messages: [...MESSAGES, { role: 'user', content: 'after restart' }] })
    steady.finish(running.session_id, { status: 'completed', return_code: 0 })
    // The queued sample was dispatched after the restart too.
    const next = await steady.take('it-task-3')
    expect(next.session_id).toBe(queued.session_id)
    steady.finish(next.session_id, { status: 'completed', return_code: 0 })

    const done = await eventually(async () => {
      const status = await task('it-task-3')
      expect(status.status).toBe('completed')
      return status
    }, 15_000)
    expect(done.completed_sessions).toBe(2)
    const result = done.results.find((entry) => entry.session_id === running.session_id)!
    expect(result.status).toBe('COMPLETED')
    expect(result.trajectory.traces).toHaveLength(2)
    const records = await completions(running.session_id)
    expect(records.map((record) => record.status)).toEqual(['ok', 'ok'])
    expect(result.trajectory.traces.map((trace) => trace.response_ids)).toEqual(records.map((record) => record.response_token_ids))
    await steady.shutdown()
  })
})
