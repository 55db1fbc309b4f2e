/**
 * @module
 * Columns of `rg_completions` read forwards, a page of rows per statement: a streamed build routes records in
 * arrival order, so reading a record's prompt suffix (or its message middles) one row at a time cost one
 * statement per record — most of a long session's finalize in workerd. A page holds at most `PAGE_ROWS` rows
 * and about `PAGE_BYTES` (sizes estimated by the caller from the small fields it already read), and each row
 * is handed out once and dropped; a row asked for again, or behind the page (a walk back along a delta
 * chain), is read alone.
 */
import type { Sql, SqlRow } from './sql.ts'

/** Rows per page at most. */
export const PAGE_ROWS = 64
/** Estimated bytes per page at most (at least one row). */
export const PAGE_BYTES = 1024 * 1024

export class ForwardRows<T extends SqlRow> {
  readonly #sql: Sql
  readonly #columns: string
  /** Every seq the pages may cover, ascending. */
  readonly #seqs: readonly number[]
  /** Estimated bytes of the row at `#seqs[index]`. */
  readonly #bytes: (index: number) => number
  #page = new Map<number, T>()
  /** Index in `#seqs` of the page's last row (-1: none read yet). */
  #end = -1
  /** Statements run (tests bound them). */
  statements = 0

  constructor(sql: Sql, columns: string, seqs: readonly number[], bytes: (index: number) => number) {
    this.#sql = sql
    this.#columns = columns
    this.#seqs = seqs
    this.#bytes = bytes
  }

  /** The row of `seq` (null when there is none). */
  get(seq: number): T | null {
    const hit = this.#page.get(seq)
    if (hit !== undefined) {
      this.#page.delete(seq)
      return hit
    }
    const at = this.#indexOf(seq)
    this.statements++
    if (at <= this.#end || this.#seqs[at] !== seq) {
      return this.#sql.first<T>(`SELECT ${this.#columns} FROM rg_completions WHERE seq = ?`, seq)
    }
    let end = at
    let bytes = this.#bytes(at)
    while (end + 1 < this.#seqs.length && end + 1 - at < PAGE_ROWS) {
      bytes += this.#bytes(end + 1)
      if (bytes > PAGE_BYTES) break
      end++
    }
    const rows = this.#sql.all<T & { seq: number }>(
      `SELECT seq, ${this.#columns} FROM rg_completions WHERE seq >= ? AND seq <= ? ORDER BY seq`,
      seq,
      this.#seqs[end] as number,
    )
    this.#page = new Map()
    this.#end = end
    let found: T | null = null
    for (const row of rows) {
      if (row.seq === seq) found = row
      else this.#page.set(row.seq, row)
    }
    return found
  }

  /** Index of the first seq ≥ `seq` (the length when there is none). */
  #indexOf(seq: number): number {
    let low = 0
    let high = this.#seqs.length
    while (low < high) {
      const mid = (low + high) >> 1
      if ((this.#seqs[mid] as number) < seq) low = mid + 1
      else high = mid
    }
    return low
  }
}
