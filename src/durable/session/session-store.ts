/**
 * @module
 * The session's own config and state, kept in `rg_meta` as JSON. Plain class over `Sql`.
 */
import type { SessionConfig } from './record.ts'

/** Where a finalized session's trajectory was written, and when. */
export interface SessionFinalization {
  finalized_at: string
  builder: string
  trajectory_key: string
  trace_count: number
  completion_count: number
  /** Size of the R2 object and the parts it was uploaded in (0: a single put). */
  trajectory_bytes?: number
  trajectory_parts?: number
  /** The builder config the trajectory was built with (null: the builder's defaults). */
  config?: Record<string, unknown> | null
}

/**
 * Opens the message of the error a finalized session throws when asked to record a model call (an error
 * crosses Durable Object RPC as its message); the edge answers it with a 409 in the caller's shape.
 */
export const SESSION_CLOSED = 'session closed:'

import type { Sql } from './sql.ts'

export class SessionStore {
  readonly #sql: Sql
  #config: SessionConfig | null | undefined
  /** Read on every model call (revocation check, record): kept once read; only `setFinalization` changes it. */
  #finalization: SessionFinalization | null | undefined

  constructor(sql: Sql) {
    this.#sql = sql
  }

  config(): SessionConfig | null {
    if (this.#config === undefined) {
      const row = this.#sql.first<{ value: string }>("SELECT value FROM rg_meta WHERE key = 'session'")
      this.#config = row ? (JSON.parse(row.value) as SessionConfig) : null
    }
    return this.#config
  }

  finalization(): SessionFinalization | null {
    if (this.#finalization === undefined) {
      const row = this.#sql.first<{ value: string }>("SELECT value FROM rg_meta WHERE key = 'finalized'")
      this.#finalization = row ? (JSON.parse(row.value) as SessionFinalization) : null
    }
    return this.#finalization
  }

  setFinalization(finalization: SessionFinalization): void {
    this.#sql.run("INSERT OR REPLACE INTO rg_meta (key, value) VALUES ('finalized', ?)", JSON.stringify(finalization))
    this.#finalization = finalization
  }

  /** Create once; a second create with the same id returns the stored config unchanged. */
  create(config: SessionConfig): { config: SessionConfig; created: boolean } {
    const existing = this.config()
    if (existing) return { config: existing, created: false }
    this.#sql.run("INSERT INTO rg_meta (key, value) VALUES ('session', ?)", JSON.stringify(config))
    this.#config = config
    return { config, created: true }
  }
}
