/**
 * The hub coordinator's dispatch and runner protocol over a real SQLite (node:sqlite) with a manual clock and
 * scripted sessions: registration (version, id, enrolment, keep/drop), assignment (the runner's environment,
 * routes, refusals at the session), acknowledgement deadlines, status reports, finishing, draining (`drained`
 * only once the runner holds no session), lost runners (re-dispatch before RUNNING, end during it) and the
 * alarm it arms. The restart cases are in `hub-coordinator.test.ts`.
 */
import { DatabaseSync } from 'node:sqlite'
import { describe, expect, it } from 'vitest'
import type { RolloutEvent, StageMetrics } from '../../contract/rollout.ts'
import { type EdgeMessage, RUNNER_CLOSE, RUNNER_PROTOCOL_VERSION } from '../../contract/runner-protocol.ts'
import { nodeSqlExecutor } from '../../../scripts/lib/node-sqlite.ts'
import { Sql } from '../session/sql.ts'
import type { LifecycleOutcome } from '../session/session-lifecycle.ts'
import type { DispatchTicket } from './dispatch-types.ts'
import { EventBus, type EventStore } from './event-bus.ts'
import { ACK_TIMEOUT_MS, HEALTH_FACTOR, HubCoordinator, type SessionHubPort } from './hub-coordinator.ts'
import { RunnerCredentials } from './runner-credentials.ts'
import { RunnerRegistry } from './runner-registry.ts'

const GRACE_MS = 30_000
const HEARTBEAT_MS = 10_000
const OK = { ok: true, transitions: [] } as unknown as LifecycleOutcome

type Outcome = LifecycleOutcome & { requeued?: boolean; route?: 'runner' | 'direct' }
const refused = (status: string | null, reason = 'refused'): Outcome => ({ ok: false, status, reason }) as unknown as Outcome

interface Call {
  session: string
  method: string
  args: unknown[]
}

function hub() {
  const sql = new Sql(nodeSqlExecutor(new DatabaseSync(':memory:')))
  const clock = { now: 1_000_000 }
  const sent: { runner: string; message: EdgeMessage }[] = []
  const closes: string[] = []
  const events: RolloutEvent[] = []
  const alarms: (number | null)[] = []
  const calls: Call[] = []
  const sockets = new Set<string>()
  const refuseSend = new Set<string>()
  /** Scripted answers per session and method (default: ok). */
  const script = new Map<string, Outcome[]>()
  const answer = (session: string, method: string, ...args: unknown[]): Promise<Outcome> => {
    calls.push({ session, method, args })
    const queue = script.get(`${session}:${method}`)
    const next = queue?.shift()
    if (next instanceof Error) return Promise.reject(next)
    return Promise.resolve(next ?? (OK as Outcome))
  }
  const port = (session: string): SessionHubPort => ({
    assignRunner: (...args) => answer(session, 'assignRunner', ...args),
    runnerReport: (...args) => answer(session, 'runnerReport', ...args),
    runnerFinished: (...args) => answer(session, 'runnerFinished', ...args),
    runnerLost: (...args) => answer(session, 'runnerLost', ...args),
  })
  const store: EventStore = {
    append: (event) => events.push(event),
    after: () => [],
    latest: () => events.length,
  }
  const registry = new RunnerRegistry(sql)
  const coordinator = new HubCoordinator({
    registry,
    credentials: new RunnerCredentials(sql),
    bus: new EventBus({ store }),
    session: port,
    send: (runner, message) => {
      if (refuseSend.has(runner)) return false
      sent.push({ runner, message })
      return true
    },
    close: (runner, code, reason) => closes.push(`${runner}:${code}:${reason}`),
    connected: (runner) => sockets.has(runner),
    sessionToken: async (sessionId, timeoutSeconds) => `token-${sessionId}-${timeoutSeconds}`,
    heartbeatIntervalMs: HEARTBEAT_MS,
    graceMs: GRACE_MS,
    now: () => clock.now,
    setAlarm: async (at) => {
      alarms.push(at)
    },
  })
  const of = <T extends EdgeMessage['type']>(type: T, runner?: string) =>
    sent
      .filter((entry) => entry.message.type === type && (runner === undefined || entry.runner === runner))
      .map((entry) => entry.message) as Extract<EdgeMessage, { type: T }>[]
  const called = (method: string, session?: string) =>
    calls.filter((call) => call.method === method && (session === undefined || call.session === session))
  const state = (sessionId: string) => registry.session(sessionId)
  const when = (session: string, method: string, ...outcomes: Outcome[]) => script.set(`${session}:${method}`, outcomes)
  /** Connect and register `runner` (upstream: it serves a model, for `route: runner` tickets). */
  const connect = async (
    runner: string,
    options: { upstream?: boolean; sessions?: { session_id: string; status: string }[]; enrolling?: boolean; connection?: string } = {},
  ) => {
    sockets.add(runner)
    if (options.connection) coordinator.linkOpened(runner, options.connection)
    return coordinator.onMessage(
      runner,
      {
        type: 'register',
        protocol_version: RUNNER_PROTOCOL_VERSION,
        runner_id: runner,
        capacity: { max_init_workers: 4, max_run_workers: 4, max_postrun_workers: 4 },
        upstream: options.upstream ? { model: 'Qwen/Qwen3-8B', kind: 'vllm' } : null,
        sessions: (options.sessions ?? []) as never,
        labels: {},
      } as never,
      false,
      options.enrolling ?? false,
      options.connection ?? null,
    )
  }
  const message = (runner: string, body: Record<string, unknown>) => coordinator.onMessage(runner, body as never, true)
  return {
    coordinator,
    registry,
    clock,
    sent,
    closes,
    events,
    alarms,
    calls,
    sockets,
    refuseSend,
    of,
    called,
    state,
    when,
    connect,
    message,
  }
}

function ticket(
  sessionId: string,
  options: { route?: 'runner' | 'direct' | 'auto'; publicUrl?: string; priority?: number } = {},
): DispatchTicket {
  return {
    session_id: sessionId,
    task_id: 'task-1',
    run_id: 'run-1',
    priority: options.priority ?? 0,
    public_url: options.publicUrl ?? 'https://edge.test',
    route: options.route ?? 'auto',
    spec: { session_id: sessionId, task_id: 'task-1', timeout_seconds: 120, instruction: 'do it' },
  } as unknown as DispatchTicket
}

const metrics = (): StageMetrics => ({
  init_queue_depth: 0,
  init_inflight: 0,
  ready_depth: 0,
  run_inflight: 0,
  postrun_queue_depth: 0,
  postrun_inflight: 0,
})

describe('hub: registration', () => {
  it('refuses another protocol version or a runner id that is not the connection’s, with an error and a close', async () => {
    const h = hub()
    h.sockets.add('R1')
    const old = await h.coordinator.onMessage(
      'R1',
      {
        type: 'register',
        protocol_version: RUNNER_PROTOCOL_VERSION + 1,
        runner_id: 'R1',
        capacity: {},
        upstream: null,
        sessions: [],
        labels: {},
      } as never,
      false,
    )
    expect(old).toEqual({ registered: false })
    expect(h.of('error')).toEqual([
      {
        type: 'error',
        message: `protocol_version ${RUNNER_PROTOCOL_VERSION + 1} unsupported; this edge speaks ${RUNNER_PROTOCOL_VERSION}`,
      },
    ])
    const other = await h.coordinator.onMessage(
      'R1',
      {
        type: 'register',
        protocol_version: RUNNER_PROTOCOL_VERSION,
        runner_id: 'R2',
        capacity: {},
        upstream: null,
        sessions: [],
        labels: {},
      } as never,
      false,
    )
    expect(other).toEqual({ registered: false })
    expect(h.of('error').at(-1)).toEqual({ type: 'error', message: 'register.runner_id must match the connect URL' })
    expect(h.closes).toEqual([`R1:${RUNNER_CLOSE.protocol}:unsupported protocol version`, `R1:${RUNNER_CLOSE.protocol}:runner id mismatch`])
    expect(h.registry.runners()).toEqual([])
    expect(h.of('registered')).toEqual([])
    expect(h.events).toEqual([])
  })

  it('a message before registration is refused; after it each message is taken', async () => {
    const h = hub()
    h.sockets.add('R1')
    expect(await h.coordinator.onMessage('R1', { type: 'heartbeat', metrics: metrics() } as never, false)).toEqual({ registered: false })
    expect(h.of('error')).toEqual([{ type: 'error', message: 'send register first' }])
    expect(h.closes).toEqual([`R1:${RUNNER_CLOSE.protocol}:not registered`])
    expect(await h.connect('R1')).toEqual({ registered: true })
    expect(await h.message('R1', { type: 'heartbeat', metrics: { ...metrics(), run_inflight: 3 } })).toEqual({ registered: true })
    expect(h.registry.runner('R1')!.metrics.run_inflight).toBe(3)
    expect(await h.message('R1', { type: 'something.else' })).toEqual({ registered: true })
  })

  it('answers registered with the cadence, the grace, keep and drop; a secret only when enrolling; publishes runner.registered', async () => {
    const h = hub()
    await h.connect('R1')
    expect(h.of('registered')).toEqual([
      {
        type: 'registered',
        protocol_version: RUNNER_PROTOCOL_VERSION,
        runner_id: 'R1',
        heartbeat_interval_ms: HEARTBEAT_MS,
        reconnect_grace_ms: GRACE_MS,
        keep: [],
        drop: [],
      },
    ])
    expect(h.events).toEqual([{ type: 'runner.registered', runner_id: 'R1', at: new Date(h.clock.now).toISOString() }])
    await h.connect('R2', { enrolling: true })
    expect(h.of('registered', 'R2')[0]!.runner_secret).toMatch(/^[A-Za-z0-9_-]{43}$/)
  })

  it('a reconnecting runner keeps what it reports, drops what the edge does not know, and loses what it no longer holds', async () => {
    const h = hub()
    await h.connect('R1')
    for (const id of ['s-run', 's-assigned', 's-gone', 's-flight']) await h.coordinator.enqueue(ticket(id))
    expect(h.of('assign', 'R1').map((m) => m.session.session_id)).toEqual(['s-run', 's-assigned', 's-gone', 's-flight'])
    await h.message('R1', { type: 'ack', session_id: 's-run', accepted: true, reason: null })
    await h.message('R1', { type: 'session.status', session_id: 's-run', status: 'RUNNING' })
    await h.message('R1', { type: 'ack', session_id: 's-gone', accepted: true, reason: null })
    h.sent.length = 0
    h.sockets.delete('R1')
    await h.coordinator.onDisconnect('R1', false, 'network')
    await h.connect('R1', {
      sessions: [
        { session_id: 's-run', status: 'RUNNING' },
        { session_id: 's-assigned', status: 'ASSIGNED' },
        { session_id: 's-stranger', status: 'RUNNING' },
      ],
    })
    expect(h.of('registered')[0]).toMatchObject({ keep: ['s-run', 's-assigned'], drop: ['s-stranger'] })
    // Acknowledged and not reported: lost at once.
    expect(h.called('runnerLost').map((call) => [call.session, call.args[1]])).toEqual([
      ['s-gone', 'runner no longer holds the session after reconnecting'],
    ])
    // RUNNING is reported again to the session; ASSIGNED counts as acknowledged (no ack deadline any more).
    expect(h.called('runnerReport', 's-run').map((call) => call.args)).toEqual([
      ['R1', 'RUNNING'],
      ['R1', 'RUNNING'],
    ])
    expect(h.called('runnerReport', 's-assigned')).toEqual([])
    expect(h.state('s-assigned')!.state).toBe('acked')
    expect(h.state('s-run')!.state).toBe('RUNNING')
    // Sent and not acknowledged, not reported: maybe still on its way; its acknowledgement settles it...
    expect(h.state('s-flight')).toMatchObject({ state: 'assigned', runner_id: 'R1' })
    await h.message('R1', { type: 'ack', session_id: 's-flight', accepted: true, reason: null })
    expect(h.state('s-flight')!.state).toBe('acked')
    expect(h.of('assign')).toEqual([])
  })

  it('an unacknowledged assignment sent on an earlier connection and not reported is lost at once; one sent on this connection waits', async () => {
    const h = hub()
    await h.connect('R1', { connection: 'c1' })
    await h.coordinator.enqueue(ticket('s-old'))
    expect(h.sent.at(-1)).toMatchObject({ runner: 'R1', message: { type: 'assign' } })
    expect(h.state('s-old')).toMatchObject({ state: 'assigned', connection: 'c1' })
    // The runner's link accepts a new socket (the edge has not seen the old one die): what is sent now goes there.
    h.coordinator.linkOpened('R1', 'c2')
    await h.coordinator.enqueue(ticket('s-new'))
    expect(h.state('s-new')).toMatchObject({ state: 'assigned', connection: 'c2' })
    h.sent.length = 0
    h.when('s-old', 'runnerLost', { ...OK, requeued: true } as Outcome)
    await h.connect('R1', { connection: 'c2' })
    // Sent on c1, not listed by c2's register: lost now, and dispatched again at once (on c2).
    expect(h.called('runnerLost').map((call) => [call.session, call.args[1]])).toEqual([
      ['s-old', 'runner no longer holds the session after reconnecting'],
    ])
    expect(h.of('assign', 'R1').map((m) => m.session.session_id)).toEqual(['s-old'])
    expect(h.state('s-old')).toMatchObject({ state: 'assigned', connection: 'c2' })
    // Sent on c2 before its register: on its way; its acknowledgement settles it.
    expect(h.state('s-new')).toMatchObject({ state: 'assigned', connection: 'c2' })
    await h.message('R1', { type: 'ack', session_id: 's-new', accepted: true, reason: null })
    expect(h.state('s-new')!.state).toBe('acked')
  })

  it('an unacknowledged assignment a reconnected runner does not report is dispatched again once its deadline passes', async () => {
    const h = hub()
    await h.connect('R1')
    await h.coordinator.enqueue(ticket('s-lost'))
    h.sockets.delete('R1')
    await h.coordinator.onDisconnect('R1', false, 'network')
    const sentAt = h.clock.now
    await h.connect('R1')
    expect(h.called('runnerLost')).toEqual([])
    // The alarm stays armed for its acknowledgement deadline.
    expect(h.alarms.at(-1)).toBe(sentAt + ACK_TIMEOUT_MS)
    h.clock.now += ACK_TIMEOUT_MS
    await h.coordinator.alarm()
    expect(h.called('runnerLost').map((call) => [call.session, call.args[1]])).toEqual([['s-lost', 'assignment not acknowledged in time']])
    expect(h.of('cancel', 'R1').map((message) => message.session_id)).toEqual(['s-lost'])
  })
})

describe('hub: a second register on a live connection', () => {
  it('only updates what the runner offers: the assignment in flight is neither lost nor sent again; draining stays', async () => {
    const h = hub()
    await h.connect('R1')
    await h.coordinator.enqueue(ticket('s-flight'))
    await h.coordinator.enqueue(ticket('s-acked'))
    expect(h.of('assign', 'R1').map((m) => m.session.session_id)).toEqual(['s-flight', 's-acked'])
    await h.message('R1', { type: 'ack', session_id: 's-acked', accepted: true, reason: null })
    await h.coordinator.drain('R1')
    await h.coordinator.enqueue(ticket('s-runner', { route: 'runner' }))
    h.sent.length = 0
    h.clock.now += 1_000
    // Built before s-flight's assignment reached the runner: it lists only s-acked (and one the edge never sent).
    const answer = await h.coordinator.onMessage(
      'R1',
      {
        type: 'register',
        protocol_version: RUNNER_PROTOCOL_VERSION,
        runner_id: 'R1',
        capacity: { max_init_workers: 8, max_run_workers: 6, max_postrun_workers: 8 },
        upstream: { model: 'Qwen/Qwen3-8B', kind: 'vllm', max_model_len: 4096 },
        sessions: [
          { session_id: 's-acked', status: 'ASSIGNED' },
          { session_id: 's-stranger', status: 'RUNNING' },
        ],
        labels: { zone: 'b' },
        evaluators: ['test_on_output'],
      } as never,
      true,
    )
    expect(answer).toEqual({ registered: true })
    expect(h.called('runnerLost')).toEqual([])
    expect(h.of('registered')).toEqual([
      {
        type: 'registered',
        protocol_version: RUNNER_PROTOCOL_VERSION,
        runner_id: 'R1',
        heartbeat_interval_ms: HEARTBEAT_MS,
        reconnect_grace_ms: GRACE_MS,
        keep: ['s-acked'],
        drop: [],
      },
    ])
    expect(h.events.filter((event) => event.type === 'runner.registered')).toHaveLength(1)
    expect(h.state('s-flight')).toMatchObject({ state: 'assigned', runner_id: 'R1', assigned_at: 1_000_000 })
    const runner = h.registry.runner('R1')!
    expect(runner).toMatchObject({
      capacity: { max_init_workers: 8, max_run_workers: 6, max_postrun_workers: 8, ready_buffer: 6 },
      upstream: { model: 'Qwen/Qwen3-8B', kind: 'vllm', max_model_len: 4096 },
      labels: { zone: 'b' },
      evaluators: ['test_on_output'],
      cordoned: true,
      last_seen: 1_001_000,
    })
    // Draining: the runner-route session that its engine now allows is not sent to it; nothing is sent again.
    expect(h.of('assign')).toEqual([])
    await h.message('R1', { type: 'ack', session_id: 's-flight', accepted: true, reason: null })
    expect(h.state('s-flight')!.state).toBe('acked')
    expect(h.of('cancel')).toEqual([])
  })

  it('an update that now serves a model takes the queued runner-route session; a new connection registers in full', async () => {
    const h = hub()
    await h.connect('R1')
    await h.coordinator.enqueue(ticket('s-runner', { route: 'runner' }))
    expect(h.of('assign')).toEqual([])
    await h.coordinator.onMessage(
      'R1',
      {
        type: 'register',
        protocol_version: RUNNER_PROTOCOL_VERSION,
        runner_id: 'R1',
        capacity: { max_init_workers: 4, max_run_workers: 4, max_postrun_workers: 4 },
        upstream: { model: 'Qwen/Qwen3-8B', kind: 'vllm' },
        sessions: [],
        labels: {},
      } as never,
      true,
    )
    // The update starts a dispatch (not awaited); everything here is in-memory: one macrotask turn later it is done.
    await new Promise((resolve) => setImmediate(resolve))
    expect(h.of('assign')[0]!.session.session_id).toBe('s-runner')
    // Not registered on this connection (a reconnect): the full registration, which loses what it does not list
    // (acknowledged: an assignment not acknowledged yet may still be on its way, and waits for its deadline).
    await h.message('R1', { type: 'ack', session_id: 's-runner', accepted: true, reason: null })
    h.sent.length = 0
    await h.connect('R1')
    expect(h.called('runnerLost').map((call) => call.session)).toEqual(['s-runner'])
  })
})

describe('hub: assignment', () => {
  it('hands the runner the session spec, its token as every API key and the edge base URLs', async () => {
    const h = hub()
    await h.connect('R1')
    expect(await h.coordinator.enqueue(ticket('s1', { publicUrl: 'https://edge.test//' }))).toEqual({ queued: true })
    const [assign] = h.of('assign')
    const token = 'token-s1-120'
    expect(assign!.session).toEqual({
      session_id: 's1',
      task_id: 'task-1',
      timeout_seconds: 120,
      instruction: 'do it',
      token,
      route: 'direct',
      base_urls: { openai: 'https://edge.test/v1', anthropic: 'https://edge.test', google: 'https://edge.test' },
      env: {
        ANTHROPIC_BASE_URL: 'https://edge.test',
        ANTHROPIC_API_KEY: token,
        OPENAI_BASE_URL: 'https://edge.test/v1',
        OPENAI_API_KEY: token,
        GOOGLE_API_URL: 'https://edge.test',
        GOOGLE_API_KEY: token,
        SESSION_ID: 's1',
        TASK_ID: 'task-1',
        SESSION_DIR: '/polar/session',
        ARTIFACTS_DIR: '/polar/session/artifacts',
        LOGS_DIR: '/polar/session/logs',
        AGENT_LOG_DIR: '/polar/session/logs/agent',
      },
    })
    expect(h.called('assignRunner', 's1').map((call) => call.args)).toEqual([['R1', null]])
    expect(h.state('s1')).toMatchObject({ state: 'assigned', runner_id: 'R1', assigned_at: h.clock.now })
    // Enqueueing a known session again changes nothing.
    expect(await h.coordinator.enqueue(ticket('s1'))).toEqual({ queued: false })
    expect(h.of('assign')).toHaveLength(1)
    expect(h.coordinator.status().pipeline).toEqual({ pending_sessions: 0, assigned_sessions: 1 })
  })

  it('the route the session chose is the assignment’s; a runner-only session waits for a runner that serves a model', async () => {
    const h = hub()
    await h.connect('plain')
    h.when('s-runner', 'assignRunner', { ...OK, route: 'runner' } as Outcome)
    await h.coordinator.enqueue(ticket('s-runner', { route: 'runner' }))
    expect(h.of('assign')).toEqual([])
    expect(h.coordinator.status().pipeline).toEqual({ pending_sessions: 1, assigned_sessions: 0 })
    await h.connect('serving', { upstream: true })
    expect(h.of('assign', 'serving').map((m) => [m.session.session_id, m.session.route])).toEqual([['s-runner', 'runner']])
    expect(h.called('assignRunner', 's-runner').map((call) => call.args)).toEqual([['serving', { model: 'Qwen/Qwen3-8B', kind: 'vllm' }]])
  })

  it('nothing is assigned to a runner whose socket is gone; the queue waits', async () => {
    const h = hub()
    await h.connect('R1')
    h.sockets.delete('R1')
    await h.coordinator.enqueue(ticket('s1'))
    expect(h.of('assign')).toEqual([])
    expect(h.state('s1')!.state).toBe('queued')
    h.sockets.add('R1')
    await h.coordinator.pump()
    expect(h.of('assign')).toHaveLength(1)
  })

  it('a session that refuses the runner is re-queued while REGISTERED, dropped once it ended, and kept queued on an RPC failure only if REGISTERED', async () => {
    const h = hub()
    await h.connect('R1')
    h.when('s-later', 'assignRunner', refused('REGISTERED'), OK as Outcome)
    h.when('s-ended', 'assignRunner', refused('ERROR'))
    h.when('s-broken', 'assignRunner', new Error('rpc failed') as unknown as Outcome)
    await h.coordinator.enqueue(ticket('s-ended'))
    await h.coordinator.enqueue(ticket('s-broken'))
    expect(h.state('s-ended')).toBeNull()
    expect(h.state('s-broken')).toBeNull()
    expect(h.of('assign')).toEqual([])
    await h.coordinator.enqueue(ticket('s-later'))
    // Re-queued (not assigned in the same pump: that round assigned nothing), then taken by the next pump.
    expect(h.state('s-later')).toMatchObject({ state: 'queued', runner_id: null })
    expect(h.of('assign')).toEqual([])
    await h.coordinator.pump()
    expect(h.called('assignRunner', 's-later')).toHaveLength(2)
    expect(h.of('assign').map((m) => m.session.session_id)).toEqual(['s-later'])
  })

  it('a send that fails (the socket closed meanwhile) loses the session at once', async () => {
    const h = hub()
    await h.connect('R1')
    h.refuseSend.add('R1')
    h.when('s1', 'runnerLost', { ...OK, requeued: true } as Outcome)
    await h.coordinator.enqueue(ticket('s1'))
    expect(h.called('runnerLost', 's1')[0]!.args).toEqual(['R1', 'runner socket closed during assignment'])
    expect(h.state('s1')!.state).toBe('queued')
  })

  it('higher priority first; the least loaded runner', async () => {
    const h = hub()
    await h.connect('R1')
    await h.connect('R2')
    h.sockets.delete('R1')
    h.sockets.delete('R2')
    await h.coordinator.enqueue(ticket('low', { priority: 1 }))
    await h.coordinator.enqueue(ticket('high', { priority: 9 }))
    h.sockets.add('R1')
    h.sockets.add('R2')
    await h.coordinator.pump()
    const order = h.of('assign').map((m) => m.session.session_id)
    expect(order).toEqual(['high', 'low'])
    const runners = h.sent.filter((entry) => entry.message.type === 'assign').map((entry) => entry.runner)
    expect(new Set(runners).size).toBe(2)
  })
})

describe('hub: acknowledgement, status, finish', () => {
  it('an ack of a session the runner does not hold is answered with a cancel; a refusal loses the session (with its reason)', async () => {
    const h = hub()
    await h.connect('R1')
    await h.message('R1', { type: 'ack', session_id: 'nobody', accepted: true, reason: null })
    expect(h.of('cancel')).toEqual([{ type: 'cancel', session_id: 'nobody', reason: 'not assigned to this runner' }])
    h.when('s1', 'runnerLost', refused('ERROR'))
    h.when('s2', 'runnerLost', { ...OK, requeued: false } as Outcome)
    await h.coordinator.enqueue(ticket('s1'))
    await h.coordinator.enqueue(ticket('s2'))
    await h.message('R1', { type: 'ack', session_id: 's1', accepted: false, reason: 'disk full' })
    await h.message('R1', { type: 'ack', session_id: 's2', accepted: false, reason: null })
    expect(h.called('runnerLost').map((call) => [call.session, call.args[1]])).toEqual([
      ['s1', 'runner refused: disk full'],
      ['s2', 'runner refused: no reason'],
    ])
    expect(h.state('s1')).toBeNull()
    expect(h.state('s2')).toMatchObject({ state: 'finishing', runner_id: null })
  })

  it('an assignment not acknowledged within ACK_TIMEOUT_MS is cancelled and lost; an acknowledged one is not', async () => {
    const h = hub()
    await h.connect('R1')
    h.when('slow', 'runnerLost', refused('REGISTERED'))
    await h.coordinator.enqueue(ticket('slow'))
    await h.coordinator.enqueue(ticket('quick'))
    await h.message('R1', { type: 'ack', session_id: 'quick', accepted: true, reason: null })
    expect(h.state('quick')!.state).toBe('acked')
    // A second ack does not move a session that has gone further.
    await h.message('R1', { type: 'session.status', session_id: 'quick', status: 'RUNNING' })
    await h.message('R1', { type: 'ack', session_id: 'quick', accepted: true, reason: null })
    expect(h.state('quick')!.state).toBe('RUNNING')
    // The alarm is armed for the acknowledgement deadline (sooner than the runner's health check).
    expect(h.alarms.at(-1)).toBe(h.clock.now + ACK_TIMEOUT_MS)
    h.sockets.delete('R1') // not re-dispatched to R1 within this test
    h.clock.now += ACK_TIMEOUT_MS
    await h.coordinator.alarm()
    expect(h.of('cancel')).toEqual([{ type: 'cancel', session_id: 'slow', reason: 'not acknowledged in time' }])
    expect(h.called('runnerLost').map((call) => [call.session, call.args])).toEqual([
      ['slow', ['R1', 'assignment not acknowledged in time']],
    ])
    expect(h.state('slow')).toMatchObject({ state: 'queued', runner_id: null })
  })

  it('a heartbeat does not wait for a busy dispatch loop: the acknowledgement the runner sent after it is taken meanwhile', async () => {
    // R7 at --scale 0.2 on a loaded edge: the link forwards a runner's messages in order, and a heartbeat that awaited
    // a pump busy assigning a large submit held the runner's acks behind it past their deadline (re-dispatch churn).
    const h = hub()
    await h.connect('R1')
    await h.coordinator.enqueue(ticket('s1'))
    expect(h.of('assign', 'R1').map((assign) => assign.session.session_id)).toEqual(['s1'])
    let answer!: (outcome: Outcome) => void
    h.when('s2', 'assignRunner', new Promise<Outcome>((resolve) => (answer = resolve)) as unknown as Outcome)
    const enqueued = h.coordinator.enqueue(ticket('s2'))
    const beat = h.message('R1', { type: 'heartbeat', metrics: metrics() }).then(() => 'answered')
    // Everything here is in-memory (microtasks): one macrotask turn later the heartbeat has answered, or is stuck.
    const turn = new Promise<string>((resolve) => setImmediate(() => resolve('still waiting for the dispatch loop')))
    expect(await Promise.race([beat, turn])).toBe('answered')
    await h.message('R1', { type: 'ack', session_id: 's1', accepted: true, reason: null })
    expect(h.state('s1')!.state).toBe('acked')
    answer(OK as Outcome)
    await enqueued
    expect(h.of('assign', 'R1').map((assign) => assign.session.session_id)).toEqual(['s1', 's2'])
  })

  it('the acknowledgement deadline runs from the sending of the assignment, not from the slow session answer before it', async () => {
    const h = hub()
    await h.connect('R1')
    let answer!: (outcome: Outcome) => void
    h.when('s1', 'assignRunner', new Promise<Outcome>((resolve) => (answer = resolve)) as unknown as Outcome)
    const enqueued = h.coordinator.enqueue(ticket('s1'))
    h.clock.now += ACK_TIMEOUT_MS - 1_000 // the session object answers late (a loaded edge)
    answer(OK as Outcome)
    await enqueued
    const sentAt = h.clock.now
    expect(h.of('assign', 'R1')).toHaveLength(1)
    // Armed for (and counted from) the sending; from the reservation it would be due 1 s after the sending.
    expect(h.state('s1')).toMatchObject({ state: 'assigned', runner_id: 'R1', assigned_at: sentAt })
    expect(h.alarms.at(-1)).toBe(sentAt + ACK_TIMEOUT_MS)
    h.clock.now = sentAt + ACK_TIMEOUT_MS
    h.when('s1', 'runnerLost', { ok: true, transitions: [], requeued: true } as unknown as Outcome)
    h.sockets.delete('R1')
    await h.coordinator.alarm()
    expect(h.of('cancel')).toEqual([{ type: 'cancel', session_id: 's1', reason: 'not acknowledged in time' }])
    expect(h.state('s1')).toMatchObject({ state: 'queued', runner_id: null })
  })

  it('status reports move the hub row when the session takes them; a refused report cancels unless the session is already there', async () => {
    const h = hub()
    await h.connect('R1')
    await h.connect('R2')
    await h.coordinator.enqueue(ticket('s1'))
    const holder = h.state('s1')!.runner_id as string
    const other = holder === 'R1' ? 'R2' : 'R1'
    await h.message(other, { type: 'session.status', session_id: 's1', status: 'RUNNING' })
    expect(h.of('cancel', other)).toEqual([{ type: 'cancel', session_id: 's1', reason: 'not assigned to this runner' }])
    expect(h.called('runnerReport')).toEqual([])
    await h.message(holder, { type: 'session.status', session_id: 's1', status: 'INITIALIZING' })
    expect(h.state('s1')!.state).toBe('INITIALIZING')
    h.when('s1', 'runnerReport', refused('READY', 'already READY'), refused('TIMEOUT', 'session is TIMEOUT'))
    await h.message(holder, { type: 'session.status', session_id: 's1', status: 'READY' })
    expect(h.of('cancel', holder)).toEqual([])
    expect(h.state('s1')!.state).toBe('INITIALIZING')
    await h.message(holder, { type: 'session.status', session_id: 's1', status: 'RUNNING' })
    expect(h.of('cancel', holder)).toEqual([{ type: 'cancel', session_id: 's1', reason: 'session is TIMEOUT' }])
  })

  it('finished: only from the session’s runner; hands the outcome to the session and frees the slot', async () => {
    const h = hub()
    await h.connect('R1')
    await h.connect('R2')
    await h.coordinator.enqueue(ticket('s1'))
    const holder = h.state('s1')!.runner_id as string
    const other = holder === 'R1' ? 'R2' : 'R1'
    const finished = { type: 'session.finished', session_id: 's1', agent_result: { status: 'completed' }, eval_result: null, error: 'e' }
    await h.message(other, finished)
    expect(h.called('runnerFinished')).toEqual([])
    await h.message(holder, finished)
    expect(h.called('runnerFinished', 's1').map((call) => call.args)).toEqual([[holder, { status: 'completed' }, null, 'e']])
    expect(h.state('s1')).toMatchObject({ state: 'finishing', runner_id: null })
    expect(h.registry.occupying(holder)).toBe(0)
  })
})

describe('hub: draining', () => {
  it('drained only once the runner holds no session: at once when idle, else when its last session finishes or ends', async () => {
    const h = hub()
    expect(await h.coordinator.drain('nobody')).toBe(false)
    await h.connect('idle')
    expect(await h.coordinator.drain('idle')).toBe(true)
    expect(h.of('drained', 'idle')).toHaveLength(1)
    expect(h.events.at(-1)).toEqual({ type: 'runner.draining', runner_id: 'idle', at: new Date(h.clock.now).toISOString() })

    await h.connect('busy')
    await h.coordinator.enqueue(ticket('a'))
    await h.coordinator.enqueue(ticket('b'))
    expect(h.registry.occupying('busy')).toBe(2)
    await h.message('busy', { type: 'drain' })
    expect(h.registry.runner('busy')!.draining).toBe(true)
    expect(h.of('drained', 'busy')).toEqual([])
    // A draining runner gets no new work.
    await h.coordinator.enqueue(ticket('c'))
    expect(h.of('assign', 'busy').map((m) => m.session.session_id)).toEqual(['a', 'b'])
    await h.message('busy', { type: 'session.finished', session_id: 'a', agent_result: null, eval_result: null, error: null })
    expect(h.of('drained', 'busy')).toEqual([])
    await h.coordinator.sessionEnded('b', 'COMPLETED')
    expect(h.of('cancel', 'busy')).toEqual([{ type: 'cancel', session_id: 'b', reason: 'session COMPLETED' }])
    expect(h.state('b')).toBeNull()
    expect(h.of('drained', 'busy')).toHaveLength(1)
  })

  it("an admin drain holds across a full register until resumed; a resume leaves the runner's own drain", async () => {
    const h = hub()
    await h.connect('R1')
    await h.coordinator.drain('R1')
    h.sockets.delete('R1')
    await h.coordinator.onDisconnect('R1', false, 'network')
    h.sent.length = 0
    await h.connect('R1')
    expect(h.registry.runner('R1')).toMatchObject({ cordoned: true, draining: false })
    expect(h.of('drained', 'R1')).toHaveLength(1)
    await h.coordinator.enqueue(ticket('q'))
    expect(h.of('assign')).toEqual([])
    expect(await h.coordinator.resume('R1')).toEqual({ draining: false })
    expect(h.events.at(-1)).toMatchObject({ type: 'runner.resumed', runner_id: 'R1' })
    expect(h.of('assign', 'R1').map((m) => m.session.session_id)).toEqual(['q'])
    // Its own drain: a resume does not undo it (and has no admin drain to undo: no event).
    await h.message('R1', { type: 'drain' })
    const events = h.events.length
    expect(await h.coordinator.resume('R1')).toEqual({ draining: true })
    expect(h.events).toHaveLength(events)
    expect(await h.coordinator.resume('nobody')).toBeNull()
  })

  it('a session that ends while queued or finishing is forgotten without a cancel', async () => {
    const h = hub()
    await h.coordinator.enqueue(ticket('queued'))
    await h.coordinator.sessionEnded('queued', 'TIMEOUT')
    await h.coordinator.sessionEnded('unknown', 'TIMEOUT')
    expect(h.state('queued')).toBeNull()
    await h.connect('R1')
    await h.coordinator.enqueue(ticket('done'))
    await h.message('R1', { type: 'session.finished', session_id: 'done', agent_result: null, eval_result: null, error: null })
    await h.coordinator.sessionEnded('done', 'COMPLETED')
    expect(h.of('cancel')).toEqual([])
    expect(h.state('done')).toBeNull()
  })
})

describe('hub: lost runners', () => {
  it('a final disconnect loses the runner: closed, runner.lost, sessions handed back (re-dispatched, ended or dropped)', async () => {
    const h = hub()
    await h.connect('R1')
    for (const id of ['requeued', 'ended', 'registered', 'gone']) await h.coordinator.enqueue(ticket(id))
    h.when('requeued', 'runnerLost', { ...OK, requeued: true } as Outcome)
    h.when('ended', 'runnerLost', OK as Outcome)
    h.when('registered', 'runnerLost', refused('REGISTERED'))
    h.when('gone', 'runnerLost', refused(null))
    h.sockets.delete('R1')
    await h.coordinator.onDisconnect('R1', true, 'runner shut down')
    expect(h.closes).toEqual([`R1:${RUNNER_CLOSE.lost}:runner shut down`])
    expect(h.events.at(-1)).toEqual({
      type: 'runner.lost',
      runner_id: 'R1',
      reason: 'runner shut down',
      at: new Date(h.clock.now).toISOString(),
    })
    expect(h.called('runnerLost').map((call) => [call.session, ...call.args])).toEqual([
      ['requeued', 'R1', 'runner shut down'],
      ['ended', 'R1', 'runner shut down'],
      ['registered', 'R1', 'runner shut down'],
      ['gone', 'R1', 'runner shut down'],
    ])
    expect(h.state('requeued')).toMatchObject({ state: 'queued', runner_id: null })
    expect(h.state('ended')).toMatchObject({ state: 'finishing', runner_id: null })
    expect(h.state('registered')).toMatchObject({ state: 'queued', runner_id: null })
    expect(h.state('gone')).toBeNull()
    expect(h.registry.runner('R1')).toBeNull()
    // Lost twice (or unknown): nothing more happens.
    await h.coordinator.onDisconnect('R1', true, 'again')
    await h.coordinator.runnerLost('R1', 'again')
    expect(h.closes).toHaveLength(1)
    // The re-queued sessions go to the next runner.
    await h.connect('R2')
    expect(
      h
        .of('assign', 'R2')
        .map((m) => m.session.session_id)
        .sort(),
    ).toEqual(['registered', 'requeued'])
  })

  it('a runner that disconnects keeps its sessions for the grace; the alarm then loses it ("did not reconnect")', async () => {
    const h = hub()
    await h.connect('R1')
    await h.coordinator.enqueue(ticket('s1'))
    await h.message('R1', { type: 'ack', session_id: 's1', accepted: true, reason: null })
    h.sockets.delete('R1')
    const at = h.clock.now
    await h.coordinator.onDisconnect('R1', false, 'network')
    expect(h.registry.runner('R1')).toMatchObject({ connected: false, disconnected_at: at })
    expect(h.alarms.at(-1)).toBe(at + Math.max(GRACE_MS, HEARTBEAT_MS * HEALTH_FACTOR))
    h.clock.now = at + GRACE_MS
    await h.coordinator.alarm()
    expect(h.called('runnerLost').map((call) => call.args)).toEqual([['R1', 'did not reconnect']])
    expect(h.alarms.at(-1)).toBeNull()
    await h.coordinator.onDisconnect('unknown', false, 'x')
  })

  it('a connected runner that stops heartbeating is lost after the grace ("heartbeat timeout"); a heartbeat keeps it', async () => {
    const h = hub()
    await h.connect('R1')
    await h.coordinator.enqueue(ticket('s1'))
    await h.message('R1', { type: 'ack', session_id: 's1', accepted: true, reason: null })
    const start = h.clock.now
    h.clock.now = start + GRACE_MS - 1
    await h.message('R1', { type: 'heartbeat', metrics: metrics() })
    h.clock.now = start + GRACE_MS
    await h.coordinator.alarm()
    expect(h.called('runnerLost')).toEqual([])
    expect(h.coordinator.status().nodes.nodes[0]).toMatchObject({ node_id: 'R1', healthy: true, connected: true, sessions: 1 })
    h.clock.now = start + GRACE_MS - 1 + HEARTBEAT_MS * HEALTH_FACTOR
    expect(h.coordinator.status().nodes.nodes[0]).toMatchObject({ healthy: false })
    h.clock.now = start + 2 * GRACE_MS - 1
    await h.coordinator.alarm()
    expect(h.called('runnerLost').map((call) => call.args)).toEqual([['R1', 'heartbeat timeout']])
  })
})

describe('hub: status and events', () => {
  it('status lists tasks, the pipeline and the runners; publish goes to the event bus', async () => {
    const h = hub()
    h.coordinator.taskState('task-1', 'running')
    h.coordinator.publish({ type: 'task.submitted', task_id: 'task-1' } as unknown as RolloutEvent)
    expect(h.events).toEqual([{ type: 'task.submitted', task_id: 'task-1' }])
    await h.coordinator.enqueue(ticket('s1'))
    expect(h.coordinator.status()).toEqual({
      tasks: { 'task-1': 'running' },
      pipeline: { pending_sessions: 1, assigned_sessions: 0 },
      nodes: { nodes: [] },
    })
    await h.connect('R1')
    const status = h.coordinator.status()
    expect(status.pipeline).toEqual({ pending_sessions: 0, assigned_sessions: 1 })
    expect(status.nodes.nodes).toEqual([
      expect.objectContaining({ node_id: 'R1', healthy: true, heartbeat_interval_seconds: HEARTBEAT_MS / 1000 }),
    ])
  })
})
