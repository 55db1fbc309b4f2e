/**
 * The runner agent's protocol duties against a scripted edge (a real `ws` server): acknowledge and run
 * assignments reporting each status, refuse new work while draining, keep a result that finished while the
 * link was down (listed as held at re-registration, sent once registered), and stop silently what the edge
 * drops after a reconnect; and tell the edge when its engine comes up or back with another window — in a
 * heartbeat, never a second `register` on a live connection. Nothing is said twice on one connection: a result,
 * `drain`.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { type WebSocket, WebSocketServer } from 'ws'
import { RunnerAgent } from '../../../runner/agent.ts'
import type { StageHandlers } from '../../../runner/pools/pipeline.ts'
import type { SessionJob } from '../../../runner/session/session-flow.ts'
import type { RunnerMessageInput, SessionAssignment } from '../../../src/contract/runner-protocol.ts'
import { flush, ManualStages } from './manual-stages.ts'

const cleanups: (() => Promise<void> | void)[] = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

interface Edge {
  port: number
  received: RunnerMessageInput[]
  socket(): WebSocket
  send(message: Record<string, unknown>): void
  /** What `registered` answers next: which reported sessions to drop. */
  dropNext: string[]
  connections: number
  /** While set, `registered` waits until it resolves (the edge is slow to answer a registration). */
  registeredGate: Promise<void> | null
}

async function scriptedEdge(): Promise<Edge> {
  const wss = new WebSocketServer({ port: 0, host: '127.0.0.1' })
  await new Promise<void>((resolve) => wss.once('listening', () => resolve()))
  let current: WebSocket | null = null
  const edge: Edge = {
    port: 0,
    received: [],
    dropNext: [],
    connections: 0,
    registeredGate: null,
    socket: () => current as WebSocket,
    send: (message) => current?.send(JSON.stringify(message)),
  }
  wss.on('connection', (ws) => {
    current = ws
    edge.connections++
    ws.on('message', (data) => {
      const message = JSON.parse(String(data)) as RunnerMessageInput
      edge.received.push(message)
      if (message.type === 'register') {
        const reported = message.sessions?.map((entry) => entry.session_id) ?? []
        const drop = reported.filter((id) => edge.dropNext.includes(id))
        void (edge.registeredGate ?? Promise.resolve()).then(() =>
          ws.send(
            JSON.stringify({
              type: 'registered',
              protocol_version: 1,
              runner_id: 'r1',
              heartbeat_interval_ms: 60_000,
              keep: reported.filter((id) => !drop.includes(id)),
              drop,
            }),
          ),
        )
      }
    })
  })
  const address = wss.address()
  edge.port = typeof address === 'object' && address ? address.port : 0
  cleanups.push(
    () =>
      new Promise<void>((resolve) => {
        for (const client of wss.clients) client.terminate()
        wss.close(() => resolve())
      }),
  )
  return edge
}

function assignment(id: string): SessionAssignment {
  return {
    session_id: id,
    task_id: 't',
    run_id: 'run',
    index: 0,
    token: 'tok',
    instruction: 'do it',
    runtime: null,
    agent: {
      harness: 'shell',
      import_path: null,
      model_name: null,
      settings: {},
      env: {},
      mcp_servers: [],
      skills_path: null,
      custom_shell: { command: 'true' },
    },
    builder: { strategy: 'per_request', config: {} },
    evaluator: null,
    metadata: {},
    timeout_seconds: 600,
    agent_timeout_seconds: null,
    dispatch_priority: 0,
    base_urls: { openai: 'http://edge/v1', anthropic: 'http://edge', google: 'http://edge' },
    env: {},
    route: 'direct',
  } as SessionAssignment
}

async function until(check: () => boolean, label: string): Promise<void> {
  const deadline = Date.now() + 10_000
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${label}`)
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
}

async function start(edge: Edge, extra: { upstreamUrl?: string; modelRetryMs?: number; upstreamRefreshMs?: number } = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'rollgate-agent-'))
  const stages = new ManualStages()
  const agent = new RunnerAgent({
    edgeUrl: `http://127.0.0.1:${edge.port}`,
    token: 't',
    runnerId: 'r1',
    stateDir: dir,
    upstreamUrl: extra.upstreamUrl ?? null,
    servedModel: null,
    ...(extra.modelRetryMs ? { modelRetryMs: extra.modelRetryMs } : {}),
    upstreamRefreshMs: extra.upstreamRefreshMs ?? 0,
    capacity: { max_init_workers: 2, max_run_workers: 2, max_postrun_workers: 2, ready_buffer: 2 },
    handlers: stages as unknown as StageHandlers<SessionJob, unknown>,
    log: () => {},
    backoff: { baseMs: 10, maxMs: 30 },
  })
  cleanups.push(async () => {
    agent.pipeline.shutdown()
    for (const step of [...stages.pending]) step.fail()
    await agent.connection.close('shutdown')
    rmSync(dir, { recursive: true, force: true })
  })
  await agent.start()
  await agent.registered()
  return { agent, stages }
}

const of = (edge: Edge, type: string, id?: string) =>
  edge.received.filter((message) => message.type === type && (id === undefined || ('session_id' in message && message.session_id === id)))

describe('runner agent protocol', () => {
  it('an engine still loading at start is asked again; once it answers, a heartbeat says so (never a second register)', async () => {
    let loaded = false
    const engine = createServer((request, response) => {
      if (request.url === '/v1/models' && loaded)
        response.writeHead(200, { 'content-type': 'application/json' }).end('{"data":[{"id":"m-1","max_model_len":4096}]}')
      else response.writeHead(503, { 'content-type': 'application/json' }).end('{"error":"loading"}')
    })
    await new Promise<void>((resolve) => engine.listen(0, '127.0.0.1', resolve))
    cleanups.push(() => new Promise<void>((resolve) => engine.close(() => resolve())))
    const address = engine.address()
    const edge = await scriptedEdge()
    const { stages } = await start(edge, {
      upstreamUrl: `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`,
      modelRetryMs: 20,
    })
    const registers = () => of(edge, 'register') as Extract<RunnerMessageInput, { type: 'register' }>[]
    const announced = () =>
      (of(edge, 'heartbeat') as Extract<RunnerMessageInput, { type: 'heartbeat' }>[]).flatMap((beat) =>
        beat.upstream ? [beat.upstream] : [],
      )
    expect(registers()[0]?.upstream).toBeNull()
    // An assignment arrives while the engine is still down; the runner holds it when the engine comes up.
    edge.send({ type: 'assign', session: assignment('s-early') })
    await until(() => stages.pending.some((step) => step.id === 's-early'), 'the assignment taken')
    loaded = true
    await until(() => announced().length === 1, 'the engine announced')
    expect(announced()[0]).toEqual({ model: 'm-1', kind: 'vllm', max_model_len: 4_096 })
    expect({ connections: edge.connections, registers: registers().length }).toEqual({ connections: 1, registers: 1 })
    // Announced once: later heartbeats carry no engine until it changes.
    const beats = of(edge, 'heartbeat').length
    stages.step('s-early', 'init').succeed()
    await until(() => of(edge, 'heartbeat').length > beats + 1, 'more heartbeats')
    expect(announced()).toHaveLength(1)
    // The next connection's register carries it.
    edge.socket().terminate()
    await until(() => registers().length === 2, 'the reconnect')
    expect(registers()[1]?.upstream).toEqual({ model: 'm-1', kind: 'vllm', max_model_len: 4_096 })
    expect(registers()[1]?.sessions).toEqual([{ session_id: 's-early', status: 'RUNNING' }])
  })

  it("an engine that answers between the register and the edge's registered is announced once registered", async () => {
    let loaded = false
    const engine = createServer((request, response) => {
      if (request.url === '/v1/models' && loaded)
        response.writeHead(200, { 'content-type': 'application/json' }).end('{"data":[{"id":"m-2"}]}')
      else response.writeHead(503).end()
    })
    await new Promise<void>((resolve) => engine.listen(0, '127.0.0.1', resolve))
    cleanups.push(() => new Promise<void>((resolve) => engine.close(() => resolve())))
    const address = engine.address()
    const edge = await scriptedEdge()
    let answer = () => {}
    edge.registeredGate = new Promise<void>((resolve) => {
      answer = resolve
    })
    const logs: string[] = []
    const dir = mkdtempSync(join(tmpdir(), 'rollgate-agent-'))
    const agent = new RunnerAgent({
      edgeUrl: `http://127.0.0.1:${edge.port}`,
      token: 't',
      runnerId: 'r1',
      stateDir: dir,
      upstreamUrl: `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`,
      servedModel: null,
      modelRetryMs: 20,
      upstreamRefreshMs: 0,
      capacity: { max_init_workers: 1, max_run_workers: 1, max_postrun_workers: 1, ready_buffer: 1 },
      handlers: new ManualStages() as unknown as StageHandlers<SessionJob, unknown>,
      log: (event) => logs.push(event),
      backoff: { baseMs: 10, maxMs: 30 },
    })
    cleanups.push(async () => {
      await agent.connection.close('shutdown')
      rmSync(dir, { recursive: true, force: true })
    })
    await agent.start()
    await until(() => of(edge, 'register').length === 1, 'the register')
    loaded = true
    await until(() => logs.includes('upstream.discovered'), 'the engine found before the edge answered')
    answer()
    await agent.registered()
    await until(() => of(edge, 'heartbeat').some((beat) => 'upstream' in beat && beat.upstream !== undefined), 'the engine announced')
    expect(of(edge, 'register')).toHaveLength(1)
  })

  it("a restarted engine's new window reaches the edge in a heartbeat: after a failed call once it answers, on reconnect, and on the periodic re-read", async () => {
    // The engine: /v1/models says its window; while `down`, every call is refused mid-way (socket destroyed).
    const engineState = { window: 32_768, down: false, modelsAsked: 0 }
    const engine = createServer((request, response) => {
      if (engineState.down) {
        request.socket.destroy()
        return
      }
      if (request.url === '/v1/models') {
        engineState.modelsAsked++
        response.writeHead(200, { 'content-type': 'application/json' })
        response.end(JSON.stringify({ data: [{ id: 'm-1', max_model_len: engineState.window }] }))
      } else response.writeHead(200, { 'content-type': 'application/json' }).end('{}')
    })
    await new Promise<void>((resolve) => engine.listen(0, '127.0.0.1', resolve))
    cleanups.push(() => new Promise<void>((resolve) => engine.close(() => resolve())))
    const address = engine.address()
    const upstreamUrl = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`
    const edge = await scriptedEdge()
    const { agent } = await start(edge, { upstreamUrl, modelRetryMs: 20 })
    const registers = () => of(edge, 'register') as Extract<RunnerMessageInput, { type: 'register' }>[]
    const announced = () =>
      (of(edge, 'heartbeat') as Extract<RunnerMessageInput, { type: 'heartbeat' }>[]).flatMap((beat) =>
        beat.upstream ? [beat.upstream] : [],
      )
    expect(registers()[0]?.upstream).toEqual({ model: 'm-1', kind: 'vllm', max_model_len: 32_768 })

    // 1. The engine goes down and comes back with another window: a tunnelled call fails, the runner asks
    //    /v1/models until it answers, then tells the edge (a heartbeat, on the same connection).
    engineState.down = true
    engineState.window = 8_192
    const asked = engineState.modelsAsked
    const request = { type: 'tunnel.request', method: 'POST', path: '/v1/chat/completions', headers: {}, more: false, timeout_ms: 5_000 }
    edge.send({ ...request, request_id: 'q1', body: '{}' })
    await until(() => of(edge, 'tunnel.error').length === 1, 'the failed call')
    engineState.down = false
    await until(() => announced().length === 1, 'the new window announced')
    expect(announced()[0]).toEqual({ model: 'm-1', kind: 'vllm', max_model_len: 8_192 })
    expect(engineState.modelsAsked).toBeGreaterThan(asked)
    expect({ connections: edge.connections, registers: registers().length }).toEqual({ connections: 1, registers: 1 })

    // 2. The link drops and the engine restarted meanwhile: re-read once registered again.
    engineState.window = 16_384
    edge.socket().terminate()
    await until(() => announced().length === 2, 'the window re-read after the reconnect')
    expect(announced()[1]).toEqual({ model: 'm-1', kind: 'vllm', max_model_len: 16_384 })
    expect(edge.connections).toBe(2)

    // 3. Nothing failed and the link stayed: the periodic re-read (off in this agent) is the only way to notice.
    engineState.window = 4_096
    edge.send({ ...request, request_id: 'q2', body: '{}' })
    await until(() => of(edge, 'tunnel.head').length === 1, 'an answered call')
    expect(announced()).toHaveLength(2)
    await agent.connection.close('shutdown')
    await start(edge, { upstreamUrl, upstreamRefreshMs: 20 })
    engineState.window = 2_048
    await until(() => announced().some((upstream) => upstream.max_model_len === 2_048), 'the periodic re-read')
  })

  it('acks an assignment and reports INITIALIZING → READY → RUNNING, then session.finished', async () => {
    const edge = await scriptedEdge()
    const { stages } = await start(edge)
    edge.send({ type: 'assign', session: assignment('s1') })
    await until(() => of(edge, 'session.status', 's1').length === 1, 'INITIALIZING')
    expect(of(edge, 'ack', 's1')).toEqual([{ type: 'ack', session_id: 's1', accepted: true }])
    stages.step('s1', 'init').succeed()
    await until(() => of(edge, 'session.status', 's1').length === 3, 'READY, RUNNING')
    stages.step('s1', 'run').succeed()
    await until(() => stages.pending.some((step) => step.id === 's1' && step.kind === 'postrun'), 'POSTRUN')
    stages.step('s1', 'postrun').succeed()
    await until(() => of(edge, 'session.finished', 's1').length === 1, 'finished')
    expect(of(edge, 'session.status', 's1').map((message) => (message as { status: string }).status)).toEqual([
      'INITIALIZING',
      'READY',
      'RUNNING',
    ])
    expect(of(edge, 'session.finished', 's1')[0]).toMatchObject({
      agent_result: { status: 'completed' },
      eval_result: { outcome_reward: 1 },
      error: null,
    })
  })

  it('a result that finished while the link was down is reported as held at re-registration, then sent', async () => {
    const edge = await scriptedEdge()
    const { stages } = await start(edge)
    edge.send({ type: 'assign', session: assignment('s2') })
    await until(() => stages.pending.some((step) => step.id === 's2'), 'init started')
    stages.step('s2', 'init').succeed()
    await until(() => stages.pending.some((step) => step.id === 's2' && step.kind === 'run'), 'running')
    edge.socket().terminate()
    stages.step('s2', 'run').succeed()
    await until(() => stages.pending.some((step) => step.id === 's2' && step.kind === 'postrun'), 'POSTRUN')
    stages.step('s2', 'postrun').succeed()
    await flush()
    await until(() => edge.connections === 2 && of(edge, 'session.finished', 's2').length === 1, 'reported after reconnect')
    const registers = of(edge, 'register') as Extract<RunnerMessageInput, { type: 'register' }>[]
    expect(registers[1]?.sessions).toEqual([{ session_id: 's2', status: 'RUNNING' }])
  })

  it('drops silently what the edge no longer assigns after a reconnect; refuses assignments while draining', async () => {
    const edge = await scriptedEdge()
    const { agent, stages } = await start(edge)
    edge.send({ type: 'assign', session: assignment('s3') })
    await until(() => stages.pending.some((step) => step.id === 's3'), 'init started')
    edge.dropNext = ['s3']
    edge.socket().terminate()
    await until(() => edge.connections === 2 && stages.step('s3', 'init').signal.aborted, 'dropped')
    stages.step('s3', 'init').fail()
    await agent.pipeline.idle()
    expect(of(edge, 'session.finished', 's3')).toEqual([])

    // Draining with a session still held: new assignments are refused, the held one finishes, then "drained".
    edge.send({ type: 'assign', session: assignment('s5') })
    await until(() => stages.pending.some((step) => step.id === 's5'), 's5 init started')
    const drained = agent.drain()
    await until(() => of(edge, 'drain').length === 1, 'drain sent')
    edge.send({ type: 'assign', session: assignment('s4') })
    await until(() => of(edge, 'ack', 's4').length === 1, 'refusal')
    expect(of(edge, 'ack', 's4')[0]).toMatchObject({ accepted: false, reason: 'runner is draining' })
    stages.step('s5', 'init').fail()
    await drained
    expect(of(edge, 'session.finished', 's5')[0]).toMatchObject({ error: 'init failed: init of s5 failed' })
  })
  it('a result is written once per connection, even when another session finishes before its write completed', async () => {
    const edge = await scriptedEdge()
    const { stages } = await start(edge)
    for (const id of ['f1', 'f2']) edge.send({ type: 'assign', session: assignment(id) })
    await until(() => stages.pending.filter((step) => step.kind === 'init').length === 2, 'both started')
    for (const id of ['f1', 'f2']) stages.step(id, 'init').succeed()
    await until(() => stages.pending.filter((step) => step.kind === 'run').length === 2, 'both running')
    for (const id of ['f1', 'f2']) stages.step(id, 'run').succeed()
    await until(() => stages.pending.filter((step) => step.kind === 'postrun').length === 2, 'both in POST_RUN')
    // In one tick: the second result is queued before the socket wrote the first.
    stages.step('f1', 'postrun').succeed()
    stages.step('f2', 'postrun').succeed()
    // Sent in order: a second f1 would have been written before f2.
    await until(() => of(edge, 'session.finished', 'f2').length === 1, 'both reported')
    expect([of(edge, 'session.finished', 'f1').length, of(edge, 'session.finished', 'f2').length]).toEqual([1, 1])
  })
  it("drain is said once per connection, also when it starts between the register and the edge's answer", async () => {
    const edge = await scriptedEdge()
    const { agent, stages } = await start(edge)
    edge.send({ type: 'assign', session: assignment('d1') })
    await until(() => stages.pending.some((step) => step.id === 'd1'), 'init started')
    let answer = () => {}
    edge.registeredGate = new Promise<void>((resolve) => {
      answer = resolve
    })
    edge.socket().terminate()
    await until(() => of(edge, 'register').length === 2, 'the second connection registering')
    const drained = agent.drain()
    await until(() => of(edge, 'drain').length === 1, 'drain said')
    answer()
    await agent.registered()
    // A frame after the answer: anything the answer made the runner send arrives before it.
    agent.connection.beat()
    await until(() => of(edge, 'heartbeat').length === agent.connection.stats.heartbeats, 'every heartbeat sent so far')
    expect(of(edge, 'drain')).toHaveLength(1)
    // The next connection is told again.
    edge.registeredGate = null
    edge.socket().terminate()
    await until(() => of(edge, 'drain').length === 2, 'drain said on the third connection')
    stages.step('d1', 'init').fail()
    await drained
  })
})
