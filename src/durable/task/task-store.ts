/**
 * @module
 * A task's durable state: the current run (request, status, callback delivery) as one JSON row and
 * one row per sample. Plain class over `Sql`; a resubmission after the previous run ended replaces
 * both (session ids are never reused: each run gets fresh ones).
 */
import type { UpstreamKind } from '../../contract/completion-record.ts'
import type { CallbackStatus, TaskRequest, TaskSessionSummary } from '../../contract/rollout.ts'
import type { SessionStatus, TaskStatusValue } from '../../contract/trajectory.ts'
import type { Sql } from '../session/sql.ts'

const MIGRATIONS: readonly string[] = [
  `CREATE TABLE IF NOT EXISTS task_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
   CREATE TABLE IF NOT EXISTS task_sessions (
     session_id TEXT PRIMARY KEY,
     idx INTEGER NOT NULL,
     status TEXT NOT NULL,
     dispatched INTEGER NOT NULL DEFAULT 0,
     resolved INTEGER NOT NULL DEFAULT 0,
     usable INTEGER NOT NULL DEFAULT 0,
     runner_id TEXT,
     result_key TEXT,
     updated_at INTEGER NOT NULL
   );
   CREATE INDEX IF NOT EXISTS task_sessions_idx ON task_sessions (idx);`,
  // Callbacks per run: a resubmission never drops the previous run's pending delivery.
  `CREATE TABLE IF NOT EXISTS task_callbacks (
     run_id TEXT PRIMARY KEY,
     status TEXT NOT NULL,
     body_key TEXT NOT NULL,
     created_at INTEGER NOT NULL
   );`,
  // The session's reward (mean of its traces' rewards) for overviews; null until resolved or when unscored.
  'ALTER TABLE task_sessions ADD COLUMN reward REAL',
]

export function ensureTaskSchema(sql: Sql): void {
  sql.run('CREATE TABLE IF NOT EXISTS task_schema (version INTEGER NOT NULL)')
  const row = sql.first<{ version: number }>('SELECT version FROM task_schema')
  const current = row?.version ?? 0
  if (current >= MIGRATIONS.length) return
  for (let version = current; version < MIGRATIONS.length; version++) {
    for (const statement of (MIGRATIONS[version] as string).split(';')) {
      if (statement.trim()) sql.run(statement)
    }
  }
  if (row) sql.run('UPDATE task_schema SET version = ?', MIGRATIONS.length)
  else sql.run('INSERT INTO task_schema (version) VALUES (?)', MIGRATIONS.length)
}

export interface TaskRun {
  task_id: string
  run_id: string
  request: TaskRequest
  status: TaskStatusValue
  submitted_at: string
  completed_at: string | null
  cancelled: boolean
  cancel_reason: string | null
  early_stopped: boolean
  /** Origin harnesses use to reach the edge (base URLs in assignments). */
  public_url: string
  /** The edge's default upstream at submission (for `direct` routes without a URL of their own). */
  default_upstream: { url: string; kind: UpstreamKind; served_model: string | null }
  task_result_key: string | null
  /** Epoch ms of the next safety-net poll of unresolved sessions. */
  next_poll_at: number | null
  /** Epoch ms of the next cancellation sweep (cancelled or early-stopped runs). */
  next_sweep_at: number | null
}

interface SessionRow {
  [key: string]: string | number | null
  session_id: string
  idx: number
  status: string
  dispatched: number
  resolved: number
  usable: number
  runner_id: string | null
  result_key: string | null
  reward: number | null
}

export class TaskStore {
  readonly #sql: Sql
  #run: TaskRun | null | undefined

  constructor(sql: Sql) {
    this.#sql = sql
    ensureTaskSchema(sql)
  }

  run(): TaskRun | null {
    if (this.#run === undefined) {
      const row = this.#sql.first<{ value: string }>("SELECT value FROM task_meta WHERE key = 'run'")
      this.#run = row ? (JSON.parse(row.value) as TaskRun) : null
    }
    return this.#run
  }

  saveRun(run: TaskRun): void {
    this.#sql.run("INSERT OR REPLACE INTO task_meta (key, value) VALUES ('run', ?)", JSON.stringify(run))
    this.#run = run
  }

  /** Start a new run: replaces the previous run's rows. */
  startRun(run: TaskRun, sessionIds: readonly string[], now: number): void {
    this.#sql.run('DELETE FROM task_sessions')
    sessionIds.forEach((sessionId, index) => {
      this.#sql.run(
        'INSERT INTO task_sessions (session_id, idx, status, updated_at) VALUES (?, ?, ?, ?)',
        sessionId,
        index,
        'REGISTERED',
        now,
      )
    })
    this.saveRun(run)
  }

  sessions(): TaskSessionSummary[] {
    return this.#sql.all<SessionRow>('SELECT * FROM task_sessions ORDER BY idx').map((row) => ({
      session_id: row.session_id,
      index: row.idx,
      status: row.status as SessionStatus,
      usable: row.usable === 1,
      runner_id: row.runner_id,
      result_path: row.result_key,
      reward: row.reward ?? null,
    }))
  }

  undispatched(): { session_id: string; index: number }[] {
    return this.#sql
      .all<SessionRow>('SELECT session_id, idx FROM task_sessions WHERE dispatched = 0 AND resolved = 0 ORDER BY idx')
      .map((row) => ({ session_id: row.session_id, index: row.idx }))
  }

  unresolved(): string[] {
    return this.#sql.all<SessionRow>('SELECT session_id FROM task_sessions WHERE resolved = 0 ORDER BY idx').map((row) => row.session_id)
  }

  has(sessionId: string): boolean {
    return this.#sql.first('SELECT 1 AS one FROM task_sessions WHERE session_id = ?', sessionId) !== null
  }

  isResolved(sessionId: string): boolean {
    return this.#sql.first<SessionRow>('SELECT resolved FROM task_sessions WHERE session_id = ?', sessionId)?.resolved === 1
  }

  markDispatched(sessionId: string, now: number): void {
    this.#sql.run('UPDATE task_sessions SET dispatched = 1, updated_at = ? WHERE session_id = ?', now, sessionId)
  }

  markResolved(
    sessionId: string,
    status: SessionStatus,
    usable: boolean,
    runnerId: string | null,
    resultKey: string,
    now: number,
    reward: number | null = null,
  ): void {
    this.#sql.run(
      'UPDATE task_sessions SET resolved = 1, dispatched = 1, status = ?, usable = ?, runner_id = ?, result_key = ?, updated_at = ?, reward = ? WHERE session_id = ?',
      status,
      usable ? 1 : 0,
      runnerId,
      resultKey,
      now,
      reward,
      sessionId,
    )
  }

  /** Last known status of an unresolved session (from polling); display only. */
  noteStatus(sessionId: string, status: SessionStatus, runnerId: string | null, now: number): void {
    this.#sql.run(
      'UPDATE task_sessions SET status = ?, runner_id = ?, updated_at = ? WHERE session_id = ? AND resolved = 0',
      status,
      runnerId,
      now,
      sessionId,
    )
  }

  counts(): { total: number; resolved: number; usable: number } {
    const row = this.#sql.first<{ total: number; resolved: number | null; usable: number | null }>(
      'SELECT COUNT(*) AS total, SUM(resolved) AS resolved, SUM(usable) AS usable FROM task_sessions',
    )
    return { total: row?.total ?? 0, resolved: row?.resolved ?? 0, usable: row?.usable ?? 0 }
  }

  // --- trainer callbacks (one per run) ---

  putCallback(runId: string, status: CallbackStatus, bodyKey: string, now: number): void {
    this.#sql.run(
      'INSERT INTO task_callbacks (run_id, status, body_key, created_at) VALUES (?, ?, ?, ?) ON CONFLICT (run_id) DO UPDATE SET status = excluded.status',
      runId,
      JSON.stringify(status),
      bodyKey,
      now,
    )
  }

  callback(runId: string): CallbackStatus | null {
    const row = this.#sql.first<{ status: string }>('SELECT status FROM task_callbacks WHERE run_id = ?', runId)
    return row ? (JSON.parse(row.status) as CallbackStatus) : null
  }

  /** Callbacks still to deliver, oldest run first. */
  pendingCallbacks(): { run_id: string; status: CallbackStatus; body_key: string }[] {
    return this.#sql
      .all<{ run_id: string; status: string; body_key: string }>('SELECT run_id, status, body_key FROM task_callbacks ORDER BY created_at')
      .map((row) => ({ run_id: row.run_id, status: JSON.parse(row.status) as CallbackStatus, body_key: row.body_key }))
      .filter((entry) => entry.status.state === 'pending')
  }

  resultKeys(): string[] {
    return this.#sql
      .all<SessionRow>('SELECT result_key FROM task_sessions WHERE result_key IS NOT NULL ORDER BY idx')
      .map((row) => row.result_key as string)
  }
}
