/**
 * The event stream: the replay window survives a restart (SQLite store, ids kept), and a subscriber
 * gets a `: ping` comment every heartbeat interval (15 s by default; a short interval here, and the
 * test waits for the ping itself, never for a fixed time).
 */
import { DatabaseSync } from 'node:sqlite'
import { describe, expect, it } from 'vitest'
import type { RolloutEvent } from '../../contract/rollout.ts'
import { Sql, type SqlExecutor, type SqlRow, type SqlValue } from '../session/sql.ts'
import { EventBus, HEARTBEAT_MS } from './event-bus.ts'
import { EventLog } from './event-log.ts'
import { ensureHubSchema } from './runner-registry.ts'

function sqliteExecutor(db: DatabaseSync): SqlExecutor {
  return {
    exec(query: string, ...bindings: SqlValue[]): Iterable<SqlRow> {
      const statement = db.prepare(query)
      if (/^\s*(SELECT|WITH)/i.test(query) || /RETURNING/i.test(query)) return statement.all(...(bindings as never[])) as SqlRow[]
      statement.run(...(bindings as never[]))
      return []
    },
  }
}

function hubBus(db: DatabaseSync, heartbeatMs?: number): EventBus {
  const sql = new Sql(sqliteExecutor(db))
  ensureHubSchema(sql)
  return new EventBus({ store: new EventLog(sql), ...(heartbeatMs ? { heartbeatMs } : {}) })
}

const event = (runnerId: string): RolloutEvent => ({ type: 'runner.registered', runner_id: runnerId, at: '2026-01-01T00:00:00.000Z' })

/** Read the stream until `until` matches what arrived (or the stream ends). */
async function readUntil(response: Response, until: (text: string) => boolean): Promise<string> {
  const reader = (response.body as ReadableStream<Uint8Array>).pipeThrough(new TextDecoderStream()).getReader()
  let text = ''
  for (;;) {
    const { value, done } = await reader.read()
    if (done) break
    text += value
    if (until(text)) break
  }
  await reader.cancel()
  return text
}

function subscribe(bus: EventBus, lastEventId: string | null, signal: AbortSignal) {
  return bus.subscribe({ taskId: null, types: [], lastEventId, durationMs: 60_000, signal })
}

describe('event stream', () => {
  it('Last-Event-ID replays what was missed across a restart (the window is in SQLite)', async () => {
    const db = new DatabaseSync(':memory:')
    const before = hubBus(db)
    const ids = ['r1', 'r2', 'r3'].map((runnerId) => before.publish(event(runnerId)))
    expect(ids).toEqual(['1', '2', '3'])
    // A new object over the same storage: the edge restarted.
    const after = hubBus(db)
    const controller = new AbortController()
    const text = await readUntil(subscribe(after, ids[0] as string, controller.signal), (seen) => seen.includes('id: 3\n'))
    controller.abort()
    expect(text).toContain('"replay":true')
    expect(text).not.toContain('"runner_id":"r1"')
    expect(text).toContain('id: 2\nevent: runner.registered\ndata: {"type":"runner.registered","runner_id":"r2"')
    expect(text).toContain('id: 3\n')
    // Ids keep increasing after the restart.
    expect(after.publish(event('r4'))).toBe('4')
  })

  it('an unknown id (newer than any issued) replays the whole window', async () => {
    const db = new DatabaseSync(':memory:')
    const bus = hubBus(db)
    bus.publish(event('r1'))
    const controller = new AbortController()
    const text = await readUntil(subscribe(bus, '999', controller.signal), (seen) => seen.includes('id: 1\n'))
    controller.abort()
    expect(text).toContain('"runner_id":"r1"')
  })

  it('pings every heartbeat interval (15 s by default)', async () => {
    expect(HEARTBEAT_MS).toBe(15_000)
    const bus = hubBus(new DatabaseSync(':memory:'), 5)
    const controller = new AbortController()
    const text = await readUntil(subscribe(bus, null, controller.signal), (seen) => seen.split(': ping\n\n').length > 2)
    controller.abort()
    expect(text.startsWith('retry: 2000\nevent: hello\n')).toBe(true)
    expect(text.split(': ping\n\n').length).toBeGreaterThan(2)
    await expect.poll(() => bus.subscribers).toBe(0)
  })
})
