/**
 * @module
 * The minimal SQL surface the session classes need, so they run over a Durable Object's SQLite in
 * production and over any compatible executor in tests. Failures carry the query.
 */

export type SqlValue = string | number | null | ArrayBuffer
export type SqlRow = Record<string, SqlValue>

export interface SqlExecutor {
  exec(query: string, ...bindings: SqlValue[]): Iterable<SqlRow>
}

export class SqlError extends Error {
  readonly query: string
  constructor(query: string, cause: unknown) {
    super(`SQL failed: ${cause instanceof Error ? cause.message : String(cause)} [${query.slice(0, 120)}]`, { cause })
    this.name = 'SqlError'
    this.query = query
  }
}

export class Sql {
  readonly #executor: SqlExecutor
  constructor(executor: SqlExecutor) {
    this.#executor = executor
  }

  all<T extends SqlRow = SqlRow>(query: string, ...bindings: SqlValue[]): T[] {
    try {
      return [...this.#executor.exec(query, ...bindings)] as T[]
    } catch (error) {
      throw new SqlError(query, error)
    }
  }

  first<T extends SqlRow = SqlRow>(query: string, ...bindings: SqlValue[]): T | null {
    return this.all<T>(query, ...bindings)[0] ?? null
  }

  run(query: string, ...bindings: SqlValue[]): void {
    this.all(query, ...bindings)
  }
}
