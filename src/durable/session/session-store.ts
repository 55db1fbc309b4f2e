/**
 * @module
 * The session's own config and state, kept in `rg_meta` as JSON. Plain class over `Sql`.
 */
import type { SessionConfig } from './record.ts'
import type { Sql } from './sql.ts'

export class SessionStore {
  readonly #sql: Sql
  #config: SessionConfig | null | undefined

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

  /** Create once; a second create with the same id returns the stored config unchanged. */
  create(config: SessionConfig): { config: SessionConfig; created: boolean } {
    const existing = this.config()
    if (existing) return { config: existing, created: false }
    this.#sql.run("INSERT INTO rg_meta (key, value) VALUES ('session', ?)", JSON.stringify(config))
    this.#config = config
    return { config, created: true }
  }
}
