/**
 * The real runner agent against the edge under `wrangler dev`, its engine down when it starts (vLLM loading):
 * it registers without an engine and is sent a session that calls the engine directly; that assignment is
 * still on its way to the runner (held by a WebSocket relay between them) when the engine comes up. The runner
 * must say so without re-registering on its live connection (a `register` then lists the sessions held at that
 * instant, without the assignment on its way, and the edge took that one for lost and dispatched it again):
 * one `register`, the engine in a heartbeat, the session assigned once (one dispatch attempt) and completed,
 * and a session that needs the runner's engine dispatched to it once the edge knows the engine.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import type { IncomingMessage } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type RawData, WebSocket, WebSocketServer } from 'ws'
import { loadQwen3 } from '../../engine/qwen3.ts'
import { type EngineHandle, startEngine } from '../../engine/server.ts'
import { RunnerAgent } from '../../runner/agent.ts'
import type { StageHandlers } from '../../runner/pools/pipeline.ts'
import type { SessionJob } from '../../runner/session/session-flow.ts'
import { type EdgeProcess, freePort, startEdge } from '../../scripts/lib/processes.ts'
import type { TaskStatus } from '../../src/contract/rollout.ts'
import { RUNNER_SECRET_HEADER } from '../../src/contract/runner-protocol.ts'
import { eventually } from '../support/stack.ts'
import { ManualStages } from '../unit/runner/manual-stages.ts'

const ADMIN_TOKEN = 'itest-admin-token'
const RUNNER_TOKEN = 'itest-runner-token'
const ENGINE = { model: 'Qwen/Qwen3-8B', kind: 'vllm', max_model_len: 4096 }

type Frame = { type: string; [key: string]: unknown }

/**
 * A WebSocket relay between the runner and the edge that can hold what the edge sends from a chosen frame on
 * (that frame and every later one, in order) until released. Text frames are recorded both ways.
 */
interface Relay {
  url: string
  fromEdge: Frame[]
  fromRunner: Frame[]
  /** Hold the edge's frames from the first one `where` matches; resolves with that frame. */
  holdFrom(where: (frame: Frame) => boolean): Promise<Frame>
  heldFrames(): Frame[]
  release(): void
  close(): Promise<void>
}

async function startRelay(edgeUrl: string): Promise<Relay> {
  const server = new WebSocketServer({ host: '127.0.0.1', port: 0, perMessageDeflate: false })
  await new Promise<void>((resolve) => server.once('listening', () => resolve()))
  const fromEdge: Frame[] = []
  const fromRunner: Frame[] = []
  let hold: { where: (frame: Frame) => boolean; found: (frame: Frame) => void } | null = null
  let holding = false
  const held: { data: RawData; binary: boolean; frame: Frame | null }[] = []
  let toRunner: WebSocket | null = null
  const text = (data: RawData, binary: boolean): Frame | null => (binary ? null : (JSON.parse(String(data)) as Frame))
  server.on('connection', (runner: WebSocket, request: IncomingMessage) => {
    toRunner = runner
    const secret = request.headers[RUNNER_SECRET_HEADER]
    const edge = new WebSocket(`${edgeUrl.replace(/^http/, 'ws')}${request.url}`, {
      headers: { authorization: String(request.headers.authorization), ...(secret ? { [RUNNER_SECRET_HEADER]: String(secret) } : {}) },
      perMessageDeflate: false,
    })
    const pending: { data: RawData; binary: boolean }[] = []
    runner.on('message', (data, binary) => {
      const frame = text(data, binary)
      if (frame) fromRunner.push(frame)
      if (edge.readyState === WebSocket.OPEN) edge.send(data, { binary })
      else pending.push({ data, binary })
    })
    edge.on('open', () => {
      for (const { data, binary } of pending.splice(0)) edge.send(data, { binary })
    })
    edge.on('message', (data, binary) => {
      const frame = text(data, binary)
      if (frame) fromEdge.push(frame)
      if (!holding && frame && hold?.where(frame)) {
        holding = true
        hold.found(frame)
      }
      if (holding) held.push({ data, binary, frame })
      else runner.send(data, { binary })
    })
    const closeCode = (code: number) => (code === 1005 || code === 1006 ? 1000 : code)
    edge.on('close', (code, reason) => runner.close(closeCode(code), reason))
    runner.on('close', (code, reason) =>
      edge.readyState === WebSocket.CONNECTING ? edge.terminate() : edge.close(closeCode(code), reason),
    )
    edge.on('error', () => runner.terminate())
    runner.on('error', () => edge.terminate())
  })
  const address = server.address()
  return {
    url: `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`,
    fromEdge,
    fromRunner,
    holdFrom: (where) => new Promise<Frame>((found) => (hold = { where, found })),
    heldFrames: () => held.flatMap((entry) => (entry.frame ? [entry.frame] : [])),
    release() {
      holding = false
      hold = null
      for (const { data, binary } of held.splice(0)) toRunner?.send(data, { binary })
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const client of server.clients) client.terminate()
        server.close(() => resolve())
      }),
  }
}

let edge: EdgeProcess
let relay: Relay
let persistTo: string
let stateDir: string
let engine: EngineHandle | null = null
let agent: RunnerAgent | null = null

async function admin<T>(path: string, init: RequestInit = {}): Promise<T> {
  const res = await fetch(`${edge.url}${path}`, {
    ...init,
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json', ...init.headers },
  })
  if (res.status !== 200) throw new Error(`${path}: ${res.status} ${await res.text()}`)
  return (await res.json()) as T
}

async function submit(taskId: string, upstream: Record<string, unknown>): Promise<void> {
  await admin('/rollout/task/submit', {
    method: 'POST',
    body: JSON.stringify({
      task_id: taskId,
      instruction: 'run',
      timeout_seconds: 300,
      agent: { harness: 'shell', custom_shell: { command: 'true' } },
      evaluator: { strategy: 'session_completed' },
      upstream,
    }),
  })
}

beforeAll(async () => {
  persistTo = mkdtempSync(join(tmpdir(), 'rollgate-engine-up-'))
  stateDir = mkdtempSync(join(tmpdir(), 'rollgate-engine-up-state-'))
  edge = await startEdge({
    persistTo,
    vars: {
      ROLLGATE_ADMIN_TOKEN: ADMIN_TOKEN,
      ROLLGATE_SIGNING_KEY: 'itest-signing-key',
      ROLLGATE_RUNNER_TOKEN: RUNNER_TOKEN,
      ROLLGATE_RUNNER_HEARTBEAT_MS: '1000',
      ROLLGATE_RUNNER_GRACE_MS: '10000',
    },
  })
  relay = await startRelay(edge.url)
  // The engine's tokenizer, loaded now (once per process): the engine then comes up at once, well within the
  // held assignment's acknowledgement deadline (15 s), however loaded the machine.
  await loadQwen3()
})

afterAll(async () => {
  agent?.pipeline.shutdown()
  await agent?.connection.close('shutdown')
  await relay?.close()
  await engine?.close()
  await edge?.stop()
  rmSync(persistTo, { recursive: true, force: true })
  rmSync(stateDir, { recursive: true, force: true })
})

describe('a runner whose engine comes up after it registered (wrangler dev)', () => {
  it('announces the engine in a heartbeat: the assignment on its way is assigned once and completes; runner-route sessions follow', async () => {
    const enginePort = await freePort()
    const stages = new ManualStages()
    agent = new RunnerAgent({
      edgeUrl: relay.url,
      token: RUNNER_TOKEN,
      runnerId: 'r-engine-up',
      stateDir,
      upstreamUrl: `http://127.0.0.1:${enginePort}`,
      servedModel: null,
      modelRetryMs: 50,
      upstreamRefreshMs: 0,
      capacity: { max_init_workers: 2, max_run_workers: 2, max_postrun_workers: 2, ready_buffer: 2 },
      handlers: stages as unknown as StageHandlers<SessionJob, unknown>,
      log: () => {},
      backoff: { baseMs: 50, maxMs: 500 },
    })
    await agent.start()
    await agent.registered()
    expect(relay.fromRunner.filter((frame) => frame.type === 'register').map((frame) => frame.upstream)).toEqual([null])

    // A session that calls its engine directly goes to the runner; its assignment is held on the way.
    const assignment = relay.holdFrom((frame) => frame.type === 'assign')
    await submit('eu-direct', { route: 'direct', url: 'http://127.0.0.1:9', served_model: 'm', max_model_len: 4096 })
    const first = (await assignment) as Frame & { session: { session_id: string } }
    const sessionId = first.session.session_id
    // One that needs the runner's engine waits for it.
    await submit('eu-runner', { route: 'runner' })

    // The engine comes up while the assignment is on its way.
    engine = await startEngine({ port: enginePort, servedModel: ENGINE.model, maxModelLen: ENGINE.max_model_len })
    const node = async () =>
      (await admin<{ nodes: { nodes: { node_id: string; upstream: unknown }[] } }>('/rollout/status')).nodes.nodes.find(
        (entry) => entry.node_id === 'r-engine-up',
      )
    await eventually(async () => expect((await node())?.upstream).toEqual(ENGINE), 30_000)
    // The edge took the engine: the runner-route session is dispatched (its assignment is held behind the first).
    await eventually(async () => {
      const held = relay.heldFrames() as (Frame & { session?: { task_id: string } })[]
      expect(held.filter((frame) => frame.type === 'assign').map((frame) => frame.session?.task_id)).toContain('eu-runner')
    }, 30_000)
    relay.release()

    // The runner runs both to the end.
    for (const kind of ['init', 'run', 'postrun'] as const) {
      await eventually(async () => expect(stages.pending.filter((step) => step.kind === kind)).toHaveLength(2), 30_000)
      for (const step of stages.pending.filter((entry) => entry.kind === kind)) step.succeed()
    }
    const done = await eventually(async () => {
      const status = await admin<TaskStatus>('/rollout/task/eu-direct')
      expect(status.status).toBe('completed')
      return status
    }, 30_000)
    expect(done.results.map((result) => [result.status, result.error ?? null])).toEqual([['COMPLETED', null]])
    // Assigned once: never taken for lost and dispatched again.
    const assigns = relay.fromEdge.filter((frame) => frame.type === 'assign') as (Frame & { session: { session_id: string } })[]
    expect(assigns.filter((frame) => frame.session.session_id === sessionId)).toHaveLength(1)
    expect(relay.fromEdge.filter((frame) => frame.type === 'cancel')).toEqual([])
    expect(await admin<{ dispatch_attempts: number }>(`/rollout/session/${sessionId}`)).toMatchObject({ dispatch_attempts: 1 })
    const registers = relay.fromRunner.filter((frame) => frame.type === 'register')
    expect(registers).toHaveLength(1)
    expect(relay.fromRunner.filter((frame) => frame.type === 'heartbeat' && frame.upstream).map((frame) => frame.upstream)).toEqual([
      ENGINE,
    ])
    await eventually(async () => expect((await admin<TaskStatus>('/rollout/task/eu-runner')).status).toBe('completed'), 30_000)
  })
})
