/**
 * @module
 * The generation gate as one RUNNING rollout session sees it: the deployment's paused flag and
 * policy version (pushed by the InferenceGate object, which every RUNNING session subscribes to) and
 * the session's own in-flight model calls as leases. A call takes a lease when it is admitted
 * (`admit`, the RPC every rollout call makes anyway) and returns it with its record
 * (`recordAdmitted`), so gating adds no round trip to a call. Leases are rows (they survive the
 * object being evicted during a long generation) and expire, so a lost record cannot block a drain.
 */
import type { Sql } from './sql.ts'

export type PolicyVersion = string | number | null

export interface GateView {
  paused: boolean
  policy_version: PolicyVersion
}

/** Resume checks also run on this cadence (bounded waits). */
const RECHECK_MS = 250

export class SessionGate {
  readonly #sql: Sql
  readonly #now: () => number
  readonly #wakers = new Set<() => void>()
  #view: GateView | undefined

  constructor(sql: Sql, now: () => number = Date.now) {
    this.#sql = sql
    this.#now = now
    sql.run('CREATE TABLE IF NOT EXISTS rg_gate_leases (ticket TEXT PRIMARY KEY, expires_at INTEGER NOT NULL)')
  }

  view(): GateView {
    // Stryker disable next-line ConditionalExpression: the cache only saves a read (update() writes the row it caches)
    if (this.#view === undefined) {
      const row = this.#sql.first<{ value: string }>("SELECT value FROM rg_meta WHERE key = 'gate'")
      this.#view = row ? (JSON.parse(row.value) as GateView) : { paused: false, policy_version: null }
    }
    return this.#view
  }

  update(view: GateView): void {
    this.#sql.run("INSERT OR REPLACE INTO rg_meta (key, value) VALUES ('gate', ?)", JSON.stringify(view))
    this.#view = view
    for (const wake of [...this.#wakers]) wake()
  }

  /** Wait (up to `maxWaitMs`) while paused; true when open. */
  waitOpen(maxWaitMs: number): Promise<boolean> {
    if (!this.view().paused) return Promise.resolve(true)
    return new Promise((resolve) => {
      const finish = (open: boolean) => {
        clearTimeout(deadline)
        clearInterval(recheck)
        this.#wakers.delete(check)
        resolve(open)
      }
      const check = () => {
        if (!this.view().paused) finish(true)
      }
      const deadline = setTimeout(() => finish(!this.view().paused), maxWaitMs)
      const recheck = setInterval(check, RECHECK_MS)
      this.#wakers.add(check)
    })
  }

  /** Take a lease for one call (synchronous with the paused check: no call slips past a pause). */
  lease(leaseMs: number): string | null {
    if (this.view().paused) return null
    const ticket = crypto.randomUUID()
    this.#sql.run('INSERT INTO rg_gate_leases (ticket, expires_at) VALUES (?, ?)', ticket, this.#now() + leaseMs)
    return ticket
  }

  release(ticket: string): void {
    this.#sql.run('DELETE FROM rg_gate_leases WHERE ticket = ?', ticket)
  }

  /** Calls waiting in `waitOpen` for the gate to open (observable in `/admin/inference/status`). */
  waiting(): number {
    return this.#wakers.size
  }

  inflight(): number {
    this.#sql.run('DELETE FROM rg_gate_leases WHERE expires_at <= ?', this.#now())
    // Stryker disable next-line OptionalChaining: COUNT(*) always answers one row
    return this.#sql.first<{ n: number }>('SELECT COUNT(*) AS n FROM rg_gate_leases')?.n ?? 0
  }
}
