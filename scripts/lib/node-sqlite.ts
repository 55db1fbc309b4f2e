/**
 * @module
 * The session classes' `Sql` and blob-store interfaces over Node's own SQLite and memory, so the plain
 * classes (`CompletionLog`, the streamed trajectory writer) run in Node: unit tests, and the
 * `--max-old-space-size=128` run of `bench:long-session`.
 */
import { DatabaseSync } from 'node:sqlite'
import type { BlobBucket } from '../../src/durable/session/blob-store.ts'
import type { MultipartUpload, PartBucket, UploadedPart } from '../../src/durable/session/r2-part-writer.ts'
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

/**
 * An R2-like bucket in memory (what spills and trajectories need), counting writes. With `keep: false`
 * written objects are only measured (a heap-bounded run must not hold what it wrote).
 */
export class MemoryBucket implements BlobBucket, PartBucket {
  readonly objects = new Map<string, Uint8Array>()
  readonly sizes = new Map<string, number>()
  puts = 0
  parts = 0
  readonly #keep: boolean

  constructor(options: { keep?: boolean } = {}) {
    this.#keep = options.keep ?? true
  }

  async createMultipartUpload(key: string): Promise<MultipartUpload> {
    const parts = new Map<number, Uint8Array>()
    /** Part sizes (`keep: false` holds no bytes: a part's size is all it keeps). */
    const sizes = new Map<number, number>()
    return {
      uploadPart: async (partNumber: number, value: Uint8Array): Promise<UploadedPart> => {
        this.parts++
        sizes.set(partNumber, value.byteLength)
        if (this.#keep) parts.set(partNumber, value.slice())
        return { partNumber, etag: `etag-${partNumber}` }
      },
      complete: async (uploaded: UploadedPart[]) => {
        const size = uploaded.reduce((sum, part) => sum + (sizes.get(part.partNumber) ?? 0), 0)
        this.sizes.set(key, size)
        if (!this.#keep) return {}
        const chunks = uploaded.map((part) => parts.get(part.partNumber) as Uint8Array)
        const out = new Uint8Array(size)
        let at = 0
        for (const chunk of chunks) {
          out.set(chunk, at)
          at += chunk.byteLength
        }
        this.objects.set(key, out)
        return {}
      },
      abort: async () => {
        parts.clear()
        sizes.clear()
      },
    }
  }

  async put(key: string, value: ArrayBuffer | ArrayBufferView | string): Promise<unknown> {
    this.puts++
    const bytes =
      typeof value === 'string'
        ? new TextEncoder().encode(value)
        : ArrayBuffer.isView(value)
          ? new Uint8Array(value.buffer.slice(value.byteOffset, value.byteOffset + value.byteLength))
          : new Uint8Array(value.slice(0))
    this.sizes.set(key, bytes.byteLength)
    if (this.#keep || !key.startsWith('trajectories/')) this.objects.set(key, bytes)
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
