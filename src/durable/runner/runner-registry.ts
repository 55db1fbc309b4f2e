/**
 * @module
 * The runner hub's durable state: registered runners (capacity, served model, last metrics, health)
 * and the dispatch table (queued and assigned sessions), plus a small index of task states for
 * `GET /rollout/status`. Plain class over `Sql`.
 */
import type { RunnerInfo, StageMetrics, TaskUpstream } from '../../contract/rollout.ts'
import type { RunnerCapacity } from '../../contract/runner-protocol.ts'
import type { TaskStatusValue } from '../../contract/trajectory.ts'
import type { Sql } from '../session/sql.ts'
import type { RunnerLoad } from './dispatch-score.ts'
import type { DispatchTicket } from './dispatch-types.ts'

const MIGRATIONS: readonly string[] = [
  `CREATE TABLE IF NOT EXISTS hub_runners (
     runner_id TEXT PRIMARY KEY,
     capacity TEXT NOT NULL,
     upstream TEXT,
     metrics TEXT NOT NULL,
     labels TEXT NOT NULL,
     draining INTEGER NOT NULL DEFAULT 0,
     connected INTEGER NOT NULL DEFAULT 1,
     registered_at INTEGER NOT NULL,
     last_seen INTEGER NOT NULL,
     disconnected_at INTEGER,
     reservations INTEGER NOT NULL DEFAULT 0
   );
   CREATE TABLE IF NOT EXISTS hub_sessions (
     session_id TEXT PRIMARY KEY,
     task_id TEXT NOT NULL,
     run_id TEXT NOT NULL,
     priority INTEGER NOT NULL,
     enqueued_at INTEGER NOT NULL,
     ticket TEXT NOT NULL,
     state TEXT NOT NULL,
     runner_id TEXT,
     assigned_at INTEGER
   );
   CREATE INDEX IF NOT EXISTS hub_sessions_queue ON hub_sessions (state, priority DESC, enqueued_at);
   CREATE INDEX IF NOT EXISTS hub_sessions_runner ON hub_sessions (runner_id);
   CREATE TABLE IF NOT EXISTS hub_tasks (task_id TEXT PRIMARY KEY, status TEXT NOT NULL, updated_at INTEGER NOT NULL);`,
  // The time the hub's alarm was last armed for: an alarm that runs late (or after a restart) clamps its clock
  // with this stored value, never with a deadline re-derived from state that a restart has since changed.
  'CREATE TABLE IF NOT EXISTS hub_alarm (id INTEGER PRIMARY KEY CHECK (id = 1), armed_for INTEGER)',
  // Per-runner credentials (`runner-credentials.ts`): apart from hub_runners, so they outlive a runner declared lost.
  'CREATE TABLE IF NOT EXISTS hub_runner_credentials (runner_id TEXT PRIMARY KEY, secret_sha256 TEXT NOT NULL, enrolled_at INTEGER NOT NULL)',
  // Runner-side evaluators a runner reports at register (JSON array; NULL: not reported).
  'ALTER TABLE hub_runners ADD COLUMN evaluators TEXT',
  // The event stream's replay window (`event-log.ts`): `Last-Event-ID` works across a restart.
  'CREATE TABLE IF NOT EXISTS hub_events (id INTEGER PRIMARY KEY AUTOINCREMENT, event TEXT NOT NULL)',
  // The connection (its link's id for the socket) a runner is on, and the one each assignment was sent on: a
  // register on a newer connection that does not list an assignment sent on an older one takes it for lost.
  `ALTER TABLE hub_runners ADD COLUMN connection TEXT;
   ALTER TABLE hub_sessions ADD COLUMN connection TEXT`,
  // Admin drains (`DELETE /rollout/runners/:id`): apart from hub_runners, so they hold across reconnects, a
  // restarted runner process and a runner declared lost, until `POST /rollout/runners/:id/resume`.
  'CREATE TABLE IF NOT EXISTS hub_cordons (runner_id TEXT PRIMARY KEY, cordoned_at INTEGER NOT NULL)',
  // Two-phase enrolment (`runner-credentials.ts`): a minted secret is pending (0) until a connection presents it.
  // Credentials from before this column count as confirmed.
  'ALTER TABLE hub_runner_credentials ADD COLUMN confirmed INTEGER NOT NULL DEFAULT 1',
]

/** Task states kept for the overview (oldest dropped beyond this). */
const MAX_TASK_INDEX = 1_000

export function ensureHubSchema(sql: Sql): void {
  sql.run('CREATE TABLE IF NOT EXISTS hub_schema (version INTEGER NOT NULL)')
  const row = sql.first<{ version: number }>('SELECT version FROM hub_schema')
  const current = row?.version ?? 0
  if (current >= MIGRATIONS.length) return
  for (let version = current; version < MIGRATIONS.length; version++) {
    for (const statement of (MIGRATIONS[version] as string).split(';')) {
      if (statement.trim()) sql.run(statement)
    }
  }
  if (row) sql.run('UPDATE hub_schema SET version = ?', MIGRATIONS.length)
  else sql.run('INSERT INTO hub_schema (version) VALUES (?)', MIGRATIONS.length)
}

/** Where a dispatched session is, as the hub tracks it. */
export type HubSessionState = 'queued' | 'assigned' | 'acked' | 'INITIALIZING' | 'READY' | 'RUNNING' | 'finishing'
/** States that occupy a runner slot. */
export const OCCUPYING: readonly HubSessionState[] = ['assigned', 'acked', 'INITIALIZING', 'READY', 'RUNNING']

export interface RunnerRow {
  runner_id: string
  capacity: Required<RunnerCapacity>
  upstream: { model: string; kind: NonNullable<TaskUpstream['kind']>; max_model_len?: number } | null
  metrics: StageMetrics
  labels: Record<string, string>
  /** Runner-side evaluator strategies it reported at register; null when it did not say. */
  evaluators: string[] | null
  /** The runner's own drain (its `drain` message; a full register of a new connection clears it). */
  draining: boolean
  /** An admin drain: holds across reconnects until undone (`hub_cordons`). */
  cordoned: boolean
  connected: boolean
  /** The link's id of the socket the runner is on (null: not told, older link). */
  connection: string | null
  registered_at: number
  last_seen: number
  disconnected_at: number | null
  reservations: number
}

export interface HubSession {
  session_id: string
  task_id: string
  run_id: string
  priority: number
  enqueued_at: number
  ticket: DispatchTicket
  state: HubSessionState
  runner_id: string | null
  assigned_at: number | null
  /** The connection its assignment was sent on (null: not sent yet, or not known). */
  connection: string | null
}

type Row = Record<string, string | number | null>

const RUNNER_SELECT =
  'SELECT hub_runners.*, EXISTS (SELECT 1 FROM hub_cordons WHERE hub_cordons.runner_id = hub_runners.runner_id) AS cordoned FROM hub_runners'

const EMPTY_METRICS: StageMetrics = {
  init_queue_depth: 0,
  init_inflight: 0,
  ready_depth: 0,
  run_inflight: 0,
  postrun_queue_depth: 0,
  postrun_inflight: 0,
}

/** What a runner offers, as stored: capacity (with its READY buffer filled in), engine, labels, evaluators. */
function offerColumns(
  capacity: RunnerCapacity,
  upstream: RunnerRow['upstream'],
  labels: Record<string, string>,
  evaluators: readonly string[] | null,
): { capacity: string; upstream: string | null; labels: string; evaluators: string | null } {
  const full: Required<RunnerCapacity> = { ...capacity, ready_buffer: capacity.ready_buffer ?? capacity.max_run_workers }
  return {
    capacity: JSON.stringify(full),
    upstream: upstream ? JSON.stringify(upstream) : null,
    labels: JSON.stringify(labels),
    evaluators: evaluators ? JSON.stringify(evaluators) : null,
  }
}

function runnerFromRow(row: Row): RunnerRow {
  return {
    runner_id: row.runner_id as string,
    capacity: JSON.parse(row.capacity as string),
    upstream: row.upstream ? JSON.parse(row.upstream as string) : null,
    metrics: JSON.parse(row.metrics as string),
    labels: JSON.parse(row.labels as string),
    evaluators: typeof row.evaluators === 'string' ? JSON.parse(row.evaluators) : null,
    draining: row.draining === 1,
    cordoned: row.cordoned === 1,
    connected: row.connected === 1,
    connection: (row.connection as string | null) ?? null,
    registered_at: row.registered_at as number,
    last_seen: row.last_seen as number,
    disconnected_at: (row.disconnected_at as number | null) ?? null,
    reservations: row.reservations as number,
  }
}

function sessionFromRow(row: Row): HubSession {
  return {
    session_id: row.session_id as string,
    task_id: row.task_id as string,
    run_id: row.run_id as string,
    priority: row.priority as number,
    enqueued_at: row.enqueued_at as number,
    ticket: JSON.parse(row.ticket as string),
    state: row.state as HubSessionState,
    runner_id: (row.runner_id as string | null) ?? null,
    assigned_at: (row.assigned_at as number | null) ?? null,
    connection: (row.connection as string | null) ?? null,
  }
}

export class RunnerRegistry {
  readonly #sql: Sql

  constructor(sql: Sql) {
    this.#sql = sql
    ensureHubSchema(sql)
  }

  // --- alarm ---

  /** Remember the time the alarm is armed for (null: disarmed). */
  setArmedAlarm(at: number | null): void {
    this.#sql.run('INSERT INTO hub_alarm (id, armed_for) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET armed_for = excluded.armed_for', at)
  }

  /** The time the alarm was last armed for, as stored when arming. */
  armedAlarm(): number | null {
    return this.#sql.first<{ armed_for: number | null }>('SELECT armed_for FROM hub_alarm WHERE id = 1')?.armed_for ?? null
  }

  // --- runners ---

  upsertRunner(
    runnerId: string,
    capacity: RunnerCapacity,
    upstream: RunnerRow['upstream'],
    labels: Record<string, string>,
    now: number,
    evaluators: readonly string[] | null = null,
    connection: string | null = null,
  ): RunnerRow {
    const offer = offerColumns(capacity, upstream, labels, evaluators)
    // `draining` is the runner's own (it says `drain` again on each connection); an admin drain is in hub_cordons.
    this.#sql.run(
      `INSERT INTO hub_runners (runner_id, capacity, upstream, metrics, labels, evaluators, draining, connected, registered_at, last_seen, disconnected_at, reservations, connection)
       VALUES (?, ?, ?, ?, ?, ?, 0, 1, ?, ?, NULL, 0, ?)
       ON CONFLICT (runner_id) DO UPDATE SET capacity = excluded.capacity, upstream = excluded.upstream, labels = excluded.labels,
         evaluators = excluded.evaluators, draining = 0, connected = 1, last_seen = excluded.last_seen, disconnected_at = NULL, reservations = 0,
         connection = excluded.connection`,
      runnerId,
      offer.capacity,
      offer.upstream,
      JSON.stringify(EMPTY_METRICS),
      offer.labels,
      offer.evaluators,
      now,
      now,
      connection,
    )
    return this.runner(runnerId) as RunnerRow
  }

  /**
   * What a registered runner offers changed (a second `register` on its live connection): capacity, engine,
   * labels, evaluators. Its dispatch state (draining, reservations, connection) stays.
   */
  updateRunner(
    runnerId: string,
    capacity: RunnerCapacity,
    upstream: RunnerRow['upstream'],
    labels: Record<string, string>,
    now: number,
    evaluators: readonly string[] | null = null,
  ): void {
    const offer = offerColumns(capacity, upstream, labels, evaluators)
    this.#sql.run(
      'UPDATE hub_runners SET capacity = ?, upstream = ?, labels = ?, evaluators = ?, last_seen = ? WHERE runner_id = ?',
      offer.capacity,
      offer.upstream,
      offer.labels,
      offer.evaluators,
      now,
      runnerId,
    )
  }

  runner(runnerId: string): RunnerRow | null {
    const row = this.#sql.first<Row>(`${RUNNER_SELECT} WHERE hub_runners.runner_id = ?`, runnerId)
    return row ? runnerFromRow(row) : null
  }

  runners(): RunnerRow[] {
    return this.#sql.all<Row>(`${RUNNER_SELECT} ORDER BY hub_runners.runner_id`).map(runnerFromRow)
  }

  heartbeat(runnerId: string, metrics: StageMetrics, now: number): void {
    this.#sql.run(
      'UPDATE hub_runners SET metrics = ?, last_seen = ?, reservations = 0, disconnected_at = NULL, connected = 1 WHERE runner_id = ?',
      JSON.stringify(metrics),
      now,
      runnerId,
    )
  }

  /** The runner's engine now serves another model or window (its heartbeat said so). */
  setUpstream(runnerId: string, upstream: NonNullable<RunnerRow['upstream']>): void {
    this.#sql.run('UPDATE hub_runners SET upstream = ? WHERE runner_id = ?', JSON.stringify(upstream), runnerId)
  }

  touch(runnerId: string, now: number): void {
    this.#sql.run('UPDATE hub_runners SET last_seen = ? WHERE runner_id = ?', now, runnerId)
  }

  reserve(runnerId: string): void {
    this.#sql.run('UPDATE hub_runners SET reservations = reservations + 1 WHERE runner_id = ?', runnerId)
  }

  /** The runner drains itself (its `drain` message). */
  setDraining(runnerId: string): void {
    this.#sql.run('UPDATE hub_runners SET draining = 1 WHERE runner_id = ?', runnerId)
  }

  /** An admin drain of this runner id, until `uncordon`. */
  cordon(runnerId: string, now: number): void {
    this.#sql.run('INSERT INTO hub_cordons (runner_id, cordoned_at) VALUES (?, ?) ON CONFLICT (runner_id) DO NOTHING', runnerId, now)
  }

  /** Every admin drain in force (runner id → when), registered runner or not. */
  cordons(): Map<string, number> {
    const rows = this.#sql.all<{ runner_id: string; cordoned_at: number }>('SELECT runner_id, cordoned_at FROM hub_cordons')
    return new Map(rows.map((row) => [row.runner_id, row.cordoned_at]))
  }

  /** Undo an admin drain; false when there was none. */
  uncordon(runnerId: string): boolean {
    const had = this.#sql.first<{ n: number }>('SELECT COUNT(*) AS n FROM hub_cordons WHERE runner_id = ?', runnerId)?.n ?? 0
    this.#sql.run('DELETE FROM hub_cordons WHERE runner_id = ?', runnerId)
    return had > 0
  }

  /** The link's id of the socket the runner is on now (a new connection, before its register). */
  setConnection(runnerId: string, connection: string): void {
    this.#sql.run('UPDATE hub_runners SET connection = ? WHERE runner_id = ?', connection, runnerId)
  }

  /** The socket went away; the runner has a grace period to come back. */
  markDisconnected(runnerId: string, now: number): void {
    this.#sql.run('UPDATE hub_runners SET connected = 0, disconnected_at = COALESCE(disconnected_at, ?) WHERE runner_id = ?', now, runnerId)
  }

  /** The edge restarted: the runner's grace starts over now, whenever its socket went away. */
  restartGrace(runnerId: string, now: number): void {
    this.#sql.run('UPDATE hub_runners SET connected = 0, disconnected_at = ? WHERE runner_id = ?', now, runnerId)
  }

  removeRunner(runnerId: string): void {
    this.#sql.run('DELETE FROM hub_runners WHERE runner_id = ?', runnerId)
  }

  load(runner: RunnerRow, healthy: boolean): RunnerLoad {
    return {
      runner_id: runner.runner_id,
      max_init_workers: runner.capacity.max_init_workers,
      max_run_workers: runner.capacity.max_run_workers,
      max_postrun_workers: runner.capacity.max_postrun_workers,
      ready_buffer: runner.capacity.ready_buffer,
      metrics: runner.metrics,
      reservations: runner.reservations,
      total: this.occupying(runner.runner_id),
      healthy,
      draining: runner.draining || runner.cordoned,
    }
  }

  info(runner: RunnerRow, healthy: boolean, heartbeatIntervalMs: number): RunnerInfo {
    return {
      node_id: runner.runner_id,
      max_init_workers: runner.capacity.max_init_workers,
      max_run_workers: runner.capacity.max_run_workers,
      max_postrun_workers: runner.capacity.max_postrun_workers,
      ready_buffer: runner.capacity.ready_buffer,
      metrics: runner.metrics,
      dispatch_reservations: runner.reservations,
      healthy,
      draining: runner.draining || runner.cordoned,
      connected: runner.connected,
      heartbeat_interval_seconds: heartbeatIntervalMs / 1000,
      last_heartbeat: new Date(runner.last_seen).toISOString(),
      upstream: runner.upstream,
      evaluators: runner.evaluators,
      sessions: this.occupying(runner.runner_id),
    }
  }

  // --- sessions ---

  /** Queue a session (idempotent: a known session id is left as it is). */
  enqueue(ticket: DispatchTicket, now: number): boolean {
    const before = this.session(ticket.session_id)
    if (before) return false
    this.#sql.run(
      'INSERT INTO hub_sessions (session_id, task_id, run_id, priority, enqueued_at, ticket, state) VALUES (?, ?, ?, ?, ?, ?, ?)',
      ticket.session_id,
      ticket.task_id,
      ticket.run_id,
      ticket.priority,
      now,
      JSON.stringify(ticket),
      'queued',
    )
    return true
  }

  session(sessionId: string): HubSession | null {
    const row = this.#sql.first<Row>('SELECT * FROM hub_sessions WHERE session_id = ?', sessionId)
    return row ? sessionFromRow(row) : null
  }

  /** Queued sessions, highest priority first, then oldest. */
  queued(limit: number): HubSession[] {
    return this.#sql
      .all<Row>("SELECT * FROM hub_sessions WHERE state = 'queued' ORDER BY priority DESC, enqueued_at, session_id LIMIT ?", limit)
      .map(sessionFromRow)
  }

  sessionsOf(runnerId: string): HubSession[] {
    return this.#sql.all<Row>('SELECT * FROM hub_sessions WHERE runner_id = ? ORDER BY enqueued_at', runnerId).map(sessionFromRow)
  }

  occupying(runnerId: string): number {
    const placeholders = OCCUPYING.map(() => '?').join(', ')
    return (
      this.#sql.first<{ n: number }>(
        `SELECT COUNT(*) AS n FROM hub_sessions WHERE runner_id = ? AND state IN (${placeholders})`,
        runnerId,
        ...OCCUPYING,
      )?.n ?? 0
    )
  }

  /** Assigned but not acknowledged by `cutoff` (epoch ms). */
  unacknowledged(cutoff: number): HubSession[] {
    return this.#sql.all<Row>("SELECT * FROM hub_sessions WHERE state = 'assigned' AND assigned_at <= ?", cutoff).map(sessionFromRow)
  }

  assign(sessionId: string, runnerId: string, now: number): void {
    this.#sql.run(
      "UPDATE hub_sessions SET state = 'assigned', runner_id = ?, assigned_at = ?, connection = NULL WHERE session_id = ?",
      runnerId,
      now,
      sessionId,
    )
  }

  /** The assignment went out now, on `connection`: its acknowledgement deadline counts from here. */
  sentAt(sessionId: string, now: number, connection: string | null = null): void {
    this.#sql.run(
      "UPDATE hub_sessions SET assigned_at = ?, connection = ? WHERE session_id = ? AND state = 'assigned'",
      now,
      connection,
      sessionId,
    )
  }

  setState(sessionId: string, state: HubSessionState): void {
    this.#sql.run('UPDATE hub_sessions SET state = ? WHERE session_id = ?', state, sessionId)
  }

  requeue(sessionId: string): void {
    this.#sql.run(
      "UPDATE hub_sessions SET state = 'queued', runner_id = NULL, assigned_at = NULL, connection = NULL WHERE session_id = ?",
      sessionId,
    )
  }

  /** The runner is done with the session (the edge concludes it): frees the slot. */
  release(sessionId: string): void {
    this.#sql.run("UPDATE hub_sessions SET state = 'finishing', runner_id = NULL WHERE session_id = ?", sessionId)
  }

  remove(sessionId: string): void {
    this.#sql.run('DELETE FROM hub_sessions WHERE session_id = ?', sessionId)
  }

  counts(): { queued: number; assigned: number } {
    const row = this.#sql.first<{ queued: number | null; assigned: number | null }>(
      "SELECT SUM(state = 'queued') AS queued, SUM(runner_id IS NOT NULL) AS assigned FROM hub_sessions",
    )
    return { queued: row?.queued ?? 0, assigned: row?.assigned ?? 0 }
  }

  // --- task index ---

  taskState(taskId: string, status: TaskStatusValue, now: number): void {
    this.#sql.run('INSERT OR REPLACE INTO hub_tasks (task_id, status, updated_at) VALUES (?, ?, ?)', taskId, status, now)
    this.#sql.run(
      'DELETE FROM hub_tasks WHERE task_id NOT IN (SELECT task_id FROM hub_tasks ORDER BY updated_at DESC LIMIT ?)',
      MAX_TASK_INDEX,
    )
  }

  tasks(): Record<string, TaskStatusValue> {
    const out: Record<string, TaskStatusValue> = {}
    for (const row of this.#sql.all<Row>('SELECT task_id, status FROM hub_tasks ORDER BY updated_at DESC')) {
      out[row.task_id as string] = row.status as TaskStatusValue
    }
    return out
  }
}
