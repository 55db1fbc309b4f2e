/**
 * @module
 * The generation gate (Polar `/admin/inference/pause|resume|status`, `docs/polar-compat.md` §3) for
 * rollout sessions. Plain class over `Sql`: the paused flag, the policy version, and the RUNNING
 * sessions subscribed to it. Model calls never talk to the gate: each RUNNING session holds the gate's
 * view and counts its own in-flight calls (`src/durable/session/session-gate.ts`) inside the RPCs a
 * call makes anyway. `pause` pushes the view to every subscriber and waits until none has a call in
 * flight; `resume` pushes the open view (and a new policy version).
 */
import type { Sql } from '../session/sql.ts'

/** Drain checks re-poll the subscribers on this cadence. */
const RECHECK_MS = 100
/** Subscribers contacted at once. */
const FAN_OUT = 16

export type PolicyVersion = string | number | null

export interface GateView {
  paused: boolean
  policy_version: PolicyVersion
}

export interface GateStatus extends GateView {
  /** Model calls in flight in subscribed sessions (null when a session did not answer). */
  inflight: number
  /** Model calls waiting at the gate (paused) in subscribed sessions. */
  waiting: number
  paused_at: string | null
  /** RUNNING rollout sessions under the gate. */
  sessions: number
  /** Completions captured so far by the RUNNING sessions under the gate (a rate needs two samples). */
  completions_total: number
  /** Subscribers that did not answer the last push. */
  unreachable: number
}

/** A subscribed session: takes the view, says whether it is still RUNNING and how many calls it has in flight. */
export interface GateSubscriber {
  gateSync(view: GateView): Promise<{ subscribed: boolean; inflight: number; waiting?: number; completions?: number }>
}

interface GateRow {
  [key: string]: string | number | null
  paused: number
  policy_version: string | null
  paused_at: number | null
}

export function ensureGateSchema(sql: Sql): void {
  sql.run(
    'CREATE TABLE IF NOT EXISTS gate_state (id INTEGER PRIMARY KEY CHECK (id = 1), paused INTEGER NOT NULL, policy_version TEXT, paused_at INTEGER)',
  )
  sql.run('CREATE TABLE IF NOT EXISTS gate_subscribers (session_id TEXT PRIMARY KEY, since INTEGER NOT NULL)')
  sql.run('INSERT OR IGNORE INTO gate_state (id, paused, policy_version, paused_at) VALUES (1, 0, NULL, NULL)')
}

export class GenerationGate {
  readonly #sql: Sql
  readonly #session: (sessionId: string) => GateSubscriber
  readonly #now: () => number

  constructor(sql: Sql, session: (sessionId: string) => GateSubscriber, now: () => number = Date.now) {
    this.#sql = sql
    this.#session = session
    this.#now = now
    ensureGateSchema(sql)
  }

  view(): GateView & { paused_at: number | null } {
    const row = this.#sql.first<GateRow>('SELECT paused, policy_version, paused_at FROM gate_state WHERE id = 1') as GateRow
    return {
      paused: row.paused === 1,
      // Stryker disable next-line ConditionalExpression: JSON.parse(null) is null too
      policy_version: row.policy_version === null ? null : (JSON.parse(row.policy_version) as PolicyVersion),
      paused_at: row.paused_at,
    }
  }

  /** A session entered RUNNING: it is under the gate from now on. */
  subscribe(sessionId: string): GateView {
    this.#sql.run('INSERT OR REPLACE INTO gate_subscribers (session_id, since) VALUES (?, ?)', sessionId, this.#now())
    const { paused, policy_version } = this.view()
    return { paused, policy_version }
  }

  unsubscribe(sessionId: string): void {
    this.#sql.run('DELETE FROM gate_subscribers WHERE session_id = ?', sessionId)
  }

  /** Block new generations, then wait up to `timeoutMs` for the ones in flight. */
  async pause(timeoutMs: number, policyVersion?: PolicyVersion): Promise<{ drained: boolean; status: GateStatus }> {
    if (!this.view().paused) this.#sql.run('UPDATE gate_state SET paused = 1, paused_at = ? WHERE id = 1', this.#now())
    if (policyVersion !== undefined) this.#setPolicy(policyVersion)
    const deadline = this.#now() + timeoutMs
    for (;;) {
      const status = await this.#sync()
      if (status.inflight === 0 && status.unreachable === 0) return { drained: true, status }
      if (this.#now() >= deadline) return { drained: false, status }
      // Stryker disable next-line MethodExpression,ArithmeticOperator: the re-poll cadence changes when a drain is seen, not whether
      await new Promise((resolve) => setTimeout(resolve, Math.min(RECHECK_MS, Math.max(0, deadline - this.#now()))))
    }
  }

  async resume(policyVersion?: PolicyVersion): Promise<GateStatus> {
    this.#sql.run('UPDATE gate_state SET paused = 0, paused_at = NULL WHERE id = 1')
    if (policyVersion !== undefined) this.#setPolicy(policyVersion)
    return this.#sync()
  }

  status(): Promise<GateStatus> {
    return this.#sync()
  }

  /** Push the current view to every subscriber; count their calls in flight; drop those no longer RUNNING. */
  async #sync(): Promise<GateStatus> {
    const view = this.view()
    const subscribers = this.#sql
      .all<{ session_id: string }>('SELECT session_id FROM gate_subscribers ORDER BY since')
      .map((row) => row.session_id)
    let inflight = 0
    let waiting = 0
    let unreachable = 0
    let sessions = 0
    let completions = 0
    // Stryker disable next-line EqualityOperator: one more (empty) batch asks no one
    for (let offset = 0; offset < subscribers.length; offset += FAN_OUT) {
      await Promise.all(
        subscribers.slice(offset, offset + FAN_OUT).map(async (sessionId) => {
          try {
            const answer = await this.#session(sessionId).gateSync({ paused: view.paused, policy_version: view.policy_version })
            if (!answer.subscribed) this.unsubscribe(sessionId)
            else sessions++
            inflight += answer.inflight
            waiting += answer.waiting ?? 0
            if (answer.subscribed) completions += answer.completions ?? 0
          } catch {
            unreachable++
          }
        }),
      )
    }
    return {
      paused: view.paused,
      policy_version: view.policy_version,
      paused_at: view.paused_at === null ? null : new Date(view.paused_at).toISOString(),
      inflight,
      waiting,
      sessions,
      unreachable,
      completions_total: completions,
    }
  }

  #setPolicy(policyVersion: PolicyVersion): void {
    // Stryker disable next-line ConditionalExpression: null stored as JSON 'null' reads back as null
    this.#sql.run('UPDATE gate_state SET policy_version = ? WHERE id = 1', policyVersion === null ? null : JSON.stringify(policyVersion))
  }
}
