/**
 * @module
 * The event stream's replay window in the runner hub's SQLite (table `hub_events`, created by
 * `ensureHubSchema`): the last `RING_SIZE` events, ids from an AUTOINCREMENT key (increasing, never
 * reused), so a client's `Last-Event-ID` replays what it missed even across an edge restart.
 */
import type { RolloutEvent } from '../../contract/rollout.ts'
import type { Sql } from '../session/sql.ts'
import { type EventStore, RING_SIZE } from './event-bus.ts'

export class EventLog implements EventStore {
  readonly #sql: Sql

  constructor(sql: Sql) {
    this.#sql = sql
  }

  append(event: RolloutEvent): number {
    const row = this.#sql.first<{ id: number }>('INSERT INTO hub_events (event) VALUES (?) RETURNING id', JSON.stringify(event))
    const id = row?.id ?? 0
    this.#sql.run('DELETE FROM hub_events WHERE id <= ?', id - RING_SIZE)
    return id
  }

  latest(): number {
    return this.#sql.first<{ id: number | null }>('SELECT MAX(id) AS id FROM hub_events')?.id ?? 0
  }

  after(id: number): { id: number; event: RolloutEvent }[] {
    return this.#sql
      .all<{ id: number; event: string }>('SELECT id, event FROM hub_events WHERE id > ? ORDER BY id', id)
      .map((row) => ({ id: row.id, event: JSON.parse(row.event) as RolloutEvent }))
  }
}
