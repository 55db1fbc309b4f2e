/**
 * @module
 * The session classes' `Sql` and blob-store interfaces over Node's own SQLite and memory, so the plain
 * classes (`CompletionLog`, the streamed trajectory writer) run in Node: unit tests, and the
 * `--max-old-space-size=128` run of `bench:long-session`.
 */
import { DatabaseSync } from 'node:sqlite'
import type { BlobBucket } from '../../src/durable/session/blob-store.ts'
import { Sql, type SqlExecutor, type SqlRow, type SqlValue } from '../../src/durable/session/sql.ts'

export function nodeSqlExecutor(db: DatabaseSync): SqlExecutor {
  const statements = new Map<string, ReturnType<DatabaseSync['prepare']>>()
  return {
    exec(query: string, ...bindings: SqlValue[]): Iterable<SqlRow> {
      let statement = statements.get(query)
      if (!statement) {
        statement = db.prepare(query)
        statements.set(query, statement)
      }
      const args = bindings.map((value) => (value instanceof ArrayBuffer ? new Uint8Array(value) : value))
      if (/^\s*(SELECT|WITH)/i.test(query) || /RETURNING/i.test(query)) {
        // Like a Durable Object's cursor: BLOBs come back as ArrayBuffers.
        return (statement.all(...args) as Record<string, unknown>[]).map((row) => {
          for (const [key, value] of Object.entries(row)) {
            if (value instanceof Uint8Array) row[key] = value.buffer.slice(value.byteOffset, value.byteOffset + value.byteLength)
          }
          return row as SqlRow
        })
      }
      statement.run(...args)
      return []
    },
  }
}

/** A fresh in-memory (or file) SQLite wrapped as the session's `Sql`. */
export function nodeSql(path = ':memory:'): { sql: Sql; db: DatabaseSync } {
  const db = new DatabaseSync(path)
  return { sql: new Sql(nodeSqlExecutor(db)), db }
}

/** An R2-like bucket in memory (what spills and trajectories need), counting writes. */
export class MemoryBucket implements BlobBucket {
  readonly objects = new Map<string, Uint8Array>()
  puts = 0

  async put(key: string, value: ArrayBuffer | string): Promise<unknown> {
    this.puts++
    this.objects.set(key, typeof value === 'string' ? new TextEncoder().encode(value) : new Uint8Array(value.slice(0)))
    return {}
  }

  async get(key: string) {
    const bytes = this.objects.get(key)
    if (!bytes) return null
    return {
      arrayBuffer: async () => bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer,
      text: async () => new TextDecoder().decode(bytes),
    }
  }
}
