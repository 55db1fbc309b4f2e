/**
 * The hub coordinator over a real SQLite (node:sqlite) with a manual clock: the restart case of the
 * reliability issue, independent of machine speed. Before the restart a heartbeat arms the alarm at
 * last heartbeat + grace; the edge comes back after that time, so the stored alarm is overdue and runs
 * at start-up, before the runner has reconnected. That stale alarm must not end the fresh grace period
 * that `recoverAfterRestart` started.
 */
import { DatabaseSync } from 'node:sqlite'
import { describe, expect, it } from 'vitest'
import type { StageMetrics } from '../../contract/rollout.ts'
import type { EdgeMessage } from '../../contract/runner-protocol.ts'
import { RUNNER_PROTOCOL_VERSION } from '../../contract/runner-protocol.ts'
import { Sql, type SqlExecutor, type SqlRow, type SqlValue } from '../session/sql.ts'
import type { LifecycleOutcome } from '../session/session-lifecycle.ts'
import { EventBus } from './event-bus.ts'
import { HubCoordinator, type HubDeps, type SessionHubPort } from './hub-coordinator.ts'
import { RunnerCredentials } from './runner-credentials.ts'
import { RunnerRegistry } from './runner-registry.ts'
import type { DispatchTicket } from './dispatch-types.ts'

const GRACE_MS = 10_000
const HEARTBEAT_MS = 1_000

function sqliteExecutor(db: DatabaseSync): SqlExecutor {
  return {
    exec(query: string, ...bindings: SqlValue[]): Iterable<SqlRow> {
      const statement = db.prepare(query)
      const args = bindings.map((value) => (value instanceof ArrayBuffer ? new Uint8Array(value) : value))
      if (/^\s*(SELECT|WITH)/i.test(query) || /RETURNING/i.test(query)) return statement.all(...args) as SqlRow[]
      statement.run(...args)
      return []
    },
  }
}

interface Harness {
  coordinator: HubCoordinator
  sent: EdgeMessage[]
  lost: string[]
  alarms: (number | null)[]
  clock: { now: number }
  sockets: Set<string>
  /** When set, every `close(runner, code, reason)` is recorded as `runner:reason`. */
  closeCalls: string[] | null
}

/** One "incarnation" of the hub object over a database that survives it. */
function incarnation(db: DatabaseSync, clock: { now: number }, sockets: Set<string>): Harness {
  const sent: EdgeMessage[] = []
  const lost: string[] = []
  const alarms: (number | null)[] = []
  const ok: LifecycleOutcome = { ok: true, status: 'RUNNING' } as unknown as LifecycleOutcome
  const port = (sessionId: string): SessionHubPort => ({
    assignRunner: async () => ok,
    runnerReport: async () => ok,
    runnerFinished: async () => ok,
    runnerLost: async () => {
      lost.push(sessionId)
      return ok
    },
  })
  const sql = new Sql(sqliteExecutor(db))
  const harness = { sent, lost, alarms, clock, sockets, closeCalls: null } as unknown as Harness
  const deps: HubDeps = {
    registry: new RunnerRegistry(sql),
    credentials: new RunnerCredentials(sql),
    bus: new EventBus(),
    session: port,
    send: (_runnerId, message) => {
      sent.push(message)
      return true
    },
    close: (runnerId, _code, reason) => {
      harness.closeCalls?.push(`${runnerId}:${reason}`)
    },
    connected: (runnerId) => sockets.has(runnerId),
    sessionToken: async (sessionId) => `token-${sessionId}`,
    heartbeatIntervalMs: HEARTBEAT_MS,
    graceMs: GRACE_MS,
    now: () => clock.now,
    setAlarm: async (at) => {
      alarms.push(at)
    },
  }
  harness.coordinator = new HubCoordinator(deps)
  return harness
}

const ticket = (sessionId: string): DispatchTicket =>
  ({
    session_id: sessionId,
    task_id: 'task-1',
    run_id: 'run-1',
    priority: 0,
    public_url: 'http://edge.test',
    route: 'direct',
    spec: {},
  }) as unknown as DispatchTicket

const register = (sessions: { session_id: string; status: 'ASSIGNED' | 'INITIALIZING' | 'READY' | 'RUNNING' }[]) => ({
  type: 'register' as const,
  protocol_version: RUNNER_PROTOCOL_VERSION,
  runner_id: 'R1',
  capacity: { max_init_workers: 2, max_run_workers: 2, max_postrun_workers: 2 },
  upstream: null,
  sessions,
  labels: {},
})

describe('hub coordinator: restart', () => {
  it('an overdue alarm that runs at start-up does not end the grace period the restart just started', async () => {
    const db = new DatabaseSync(':memory:')
    const clock = { now: 1_000 }
    const sockets = new Set<string>(['R1'])
    const before = incarnation(db, clock, sockets)
    await before.coordinator.onMessage('R1', register([]), false)
    await before.coordinator.enqueue(ticket('ses-a'))
    const assign = before.sent.find((message) => message.type === 'assign')
    expect(assign).toBeDefined()
    await before.coordinator.onMessage('R1', { type: 'ack', session_id: 'ses-a', accepted: true, reason: null }, true)
    await before.coordinator.onMessage('R1', { type: 'session.status', session_id: 'ses-a', status: 'RUNNING' }, true)
    clock.now = 2_000
    await before.coordinator.onMessage('R1', { type: 'heartbeat', metrics: emptyMetrics() }, true)
    const armedFor = before.alarms.at(-1)
    expect(armedFor).toBe(2_000 + GRACE_MS)

    // The edge is down past that alarm time; it comes back without the socket.
    sockets.clear()
    clock.now = 2_000 + GRACE_MS + 5_000
    const after = incarnation(db, clock, sockets)
    after.coordinator.recoverAfterRestart()
    // workerd runs the overdue alarm at start-up, 100 ms before the runner reconnects.
    clock.now += 100
    await after.coordinator.alarm()
    expect(after.lost).toEqual([])
    expect(after.sent.filter((message) => message.type === 'assign')).toEqual([])

    // The runner reconnects within its grace and keeps its RUNNING session.
    sockets.add('R1')
    clock.now += 400
    await after.coordinator.onMessage('R1', register([{ session_id: 'ses-a', status: 'RUNNING' }]), false)
    const registered = after.sent.find((message) => message.type === 'registered')
    expect(registered).toMatchObject({ keep: ['ses-a'], drop: [] })
    expect(after.lost).toEqual([])
  })

  it('a runner whose socket closed as the edge went down gets its grace from the restart, not from the close', async () => {
    const db = new DatabaseSync(':memory:')
    const clock = { now: 1_000 }
    const sockets = new Set<string>(['R1'])
    const before = incarnation(db, clock, sockets)
    await before.coordinator.onMessage('R1', register([]), false)
    await before.coordinator.enqueue(ticket('ses-a'))
    await before.coordinator.onMessage('R1', { type: 'ack', session_id: 'ses-a', accepted: true, reason: null }, true)
    await before.coordinator.onMessage('R1', { type: 'session.status', session_id: 'ses-a', status: 'RUNNING' }, true)
    // The edge shuts down: the socket closes first (not final), then the process is gone.
    clock.now = 2_000
    sockets.clear()
    await before.coordinator.onDisconnect('R1', false, 'edge going away')
    // The restart takes longer than the grace.
    clock.now = 2_000 + GRACE_MS * 3
    const after = incarnation(db, clock, sockets)
    after.coordinator.recoverAfterRestart()
    clock.now += 100
    await after.coordinator.alarm()
    expect(after.lost).toEqual([])
    sockets.add('R1')
    clock.now += GRACE_MS / 3
    await after.coordinator.onMessage('R1', register([{ session_id: 'ses-a', status: 'RUNNING' }]), false)
    expect(after.sent.find((message) => message.type === 'registered')).toMatchObject({
      keep: ['ses-a'],
      drop: [],
      reconnect_grace_ms: GRACE_MS,
    })
    expect(after.lost).toEqual([])
  })

  it('a runner that never comes back is still declared lost once its grace has passed', async () => {
    const db = new DatabaseSync(':memory:')
    const clock = { now: 1_000 }
    const sockets = new Set<string>(['R1'])
    const before = incarnation(db, clock, sockets)
    await before.coordinator.onMessage('R1', register([]), false)
    await before.coordinator.enqueue(ticket('ses-a'))
    await before.coordinator.onMessage('R1', { type: 'ack', session_id: 'ses-a', accepted: true, reason: null }, true)
    await before.coordinator.onMessage('R1', { type: 'session.status', session_id: 'ses-a', status: 'RUNNING' }, true)
    sockets.clear()
    clock.now = 50_000
    const after = incarnation(db, clock, sockets)
    after.coordinator.recoverAfterRestart()
    clock.now += 100
    await after.coordinator.alarm()
    expect(after.lost).toEqual([])
    // The alarm it armed is the end of the fresh grace; running it then declares the runner lost.
    const armed = after.alarms.at(-1)
    expect(armed).toBe(50_000 + GRACE_MS)
    clock.now = armed as number
    await after.coordinator.alarm()
    expect(after.lost).toEqual(['ses-a'])
  })
})

describe('hub coordinator: silent runner', () => {
  it('a runner whose socket stays open but that stops heartbeating is declared lost after the grace (heartbeat timeout)', async () => {
    const db = new DatabaseSync(':memory:')
    const clock = { now: 1_000 }
    const hub = incarnation(db, clock, new Set(['R1']))
    await hub.coordinator.onMessage('R1', register([]), false)
    await hub.coordinator.enqueue(ticket('ses-a'))
    await hub.coordinator.onMessage('R1', { type: 'ack', session_id: 'ses-a', accepted: true, reason: null }, true)
    await hub.coordinator.onMessage('R1', { type: 'session.status', session_id: 'ses-a', status: 'RUNNING' }, true)
    await hub.coordinator.onMessage('R1', { type: 'heartbeat', metrics: emptyMetrics() }, true)
    const lastBeat = clock.now
    // The alarm is armed for the last sign of life + grace. Silent past 2.5 intervals: unhealthy, still connected.
    expect(hub.alarms.at(-1)).toBe(lastBeat + GRACE_MS)
    clock.now = lastBeat + HEARTBEAT_MS * 3
    expect(hub.coordinator.status().nodes.nodes[0]).toMatchObject({ node_id: 'R1', healthy: false, connected: true })
    expect(hub.lost).toEqual([])
    // Silent for the whole grace: lost, its RUNNING session ended, the socket closed.
    clock.now = lastBeat + GRACE_MS
    const closed: string[] = []
    hub.closeCalls = closed
    await hub.coordinator.alarm()
    expect(hub.lost).toEqual(['ses-a'])
    expect(hub.coordinator.status().nodes.nodes).toEqual([])
    expect(closed).toEqual(['R1:heartbeat timeout'])
  })
})

describe('hub coordinator: drain', () => {
  async function runnerWith(sessionIds: string[]) {
    const db = new DatabaseSync(':memory:')
    const hub = incarnation(db, { now: 1_000 }, new Set(['R1']))
    await hub.coordinator.onMessage('R1', register([]), false)
    for (const sessionId of sessionIds) {
      await hub.coordinator.enqueue(ticket(sessionId))
      await hub.coordinator.onMessage('R1', { type: 'ack', session_id: sessionId, accepted: true, reason: null }, true)
      await hub.coordinator.onMessage('R1', { type: 'session.status', session_id: sessionId, status: 'RUNNING' }, true)
    }
    return hub
  }
  const drainedCount = (hub: Harness) => hub.sent.filter((message) => message.type === 'drained').length

  it('says drained only once the runner holds no session', async () => {
    const hub = await runnerWith(['ses-a', 'ses-b'])
    expect(await hub.coordinator.drain('R1')).toBe(true)
    expect(drainedCount(hub)).toBe(0)
    await hub.coordinator.onMessage(
      'R1',
      {
        type: 'session.finished',
        session_id: 'ses-a',
        agent_result: { status: 'completed', return_code: 0 },
        eval_result: null,
        error: null,
      },
      true,
    )
    expect(drainedCount(hub)).toBe(0)
    await hub.coordinator.sessionEnded('ses-b', 'CANCELLED')
    expect(drainedCount(hub)).toBe(1)
    // A drained runner gets no new work.
    await hub.coordinator.enqueue(ticket('ses-c'))
    expect(hub.sent.filter((message) => message.type === 'assign')).toHaveLength(2)
  })

  it('an idle runner is drained at once; an unknown one is not found', async () => {
    const hub = await runnerWith([])
    expect(await hub.coordinator.drain('R1')).toBe(true)
    expect(drainedCount(hub)).toBe(1)
    expect(await hub.coordinator.drain('R9')).toBe(false)
  })
})

function emptyMetrics(): StageMetrics {
  return { init_queue_depth: 0, init_inflight: 0, ready_depth: 0, run_inflight: 1, postrun_queue_depth: 0, postrun_inflight: 0 }
}

describe('hub coordinator: engine window', () => {
  it("a heartbeat's upstream (the runner's engine restarted with another window) replaces the one registered", async () => {
    const db = new DatabaseSync(':memory:')
    const hub = incarnation(db, { now: 1_000 }, new Set(['R1']))
    const registry = new RunnerRegistry(new Sql(sqliteExecutor(db)))
    const upstream = { model: 'm', kind: 'vllm' as const, max_model_len: 32_768 }
    await hub.coordinator.onMessage('R1', { ...register([]), upstream }, false)
    expect(registry.runner('R1')?.upstream).toEqual(upstream)
    await hub.coordinator.onMessage('R1', { type: 'heartbeat', metrics: emptyMetrics() }, true)
    expect(registry.runner('R1')?.upstream).toEqual(upstream)
    const restarted = { ...upstream, max_model_len: 8_192 }
    await hub.coordinator.onMessage('R1', { type: 'heartbeat', metrics: emptyMetrics(), upstream: restarted }, true)
    expect(registry.runner('R1')?.upstream).toEqual(restarted)
  })
})
