/**
 * `ForwardRows`, the forward page reader under a streamed build, statement by statement (a recording executor
 * over node:sqlite): a page per statement, cut at `PAGE_ROWS` rows or `PAGE_BYTES` estimated bytes (at least
 * one row), every row handed out once, and a row asked for again, behind the page or not among the listed
 * seqs read alone.
 */
import { DatabaseSync } from 'node:sqlite'
import { describe, expect, it } from 'vitest'
import { nodeSqlExecutor } from '../../../scripts/lib/node-sqlite.ts'
import { ForwardRows, PAGE_BYTES, PAGE_ROWS } from '../../../src/durable/session/forward-rows.ts'
import { Sql, type SqlValue } from '../../../src/durable/session/sql.ts'

type Row = { v: string }

/** A table holding `stored` seqs, and every statement run against it: `range a..b` or `one s`. */
function table(stored: readonly number[]) {
  const db = new DatabaseSync(':memory:')
  db.exec('CREATE TABLE rg_completions (seq INTEGER PRIMARY KEY, v TEXT NOT NULL)')
  const insert = db.prepare('INSERT INTO rg_completions (seq, v) VALUES (?, ?)')
  for (const seq of stored) insert.run(seq, `v${seq}`)
  const inner = nodeSqlExecutor(db)
  const statements: string[] = []
  const sql = new Sql({
    exec(query: string, ...bindings: SqlValue[]) {
      statements.push(bindings.length === 2 ? `range ${bindings[0]}..${bindings[1]}` : `one ${bindings[0]}`)
      return inner.exec(query, ...bindings)
    },
  })
  return { sql, statements }
}

const range = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => from + i)

describe('ForwardRows', () => {
  it('reads forwards a page per statement and hands out each row once; a row asked for again is read alone', () => {
    const { sql, statements } = table(range(0, 10))
    const rows = new ForwardRows<Row>(sql, 'v', range(0, 10), () => 1)
    for (const seq of range(0, 10)) expect(rows.get(seq)?.v).toBe(`v${seq}`)
    expect(statements).toEqual(['range 0..9'])
    expect(rows.statements).toBe(1)
    expect(rows.get(5)?.v).toBe('v5')
    expect(rows.get(9)?.v).toBe('v9')
    expect(statements).toEqual(['range 0..9', 'one 5', 'one 9'])
    expect(rows.statements).toBe(3)
  })

  it(`a page holds at most PAGE_ROWS (${PAGE_ROWS}) rows; the next starts at the row asked for`, () => {
    const seqs = range(0, 200)
    const { sql, statements } = table(seqs)
    const rows = new ForwardRows<Row>(sql, 'v', seqs, () => 1)
    expect(rows.get(0)?.v).toBe('v0')
    expect(rows.get(PAGE_ROWS - 1)?.v).toBe(`v${PAGE_ROWS - 1}`)
    expect(statements).toEqual([`range 0..${PAGE_ROWS - 1}`])
    // Skipping ahead past the page: a page from there, to the end of the listed seqs when fewer are left.
    expect(rows.get(150)?.v).toBe('v150')
    expect(statements.at(-1)).toBe('range 150..199')
    // Behind the page (a walk back along a delta chain): alone, and the page stays.
    expect(rows.get(20)?.v).toBe('v20')
    expect(rows.get(151)?.v).toBe('v151')
    expect(statements).toEqual([`range 0..${PAGE_ROWS - 1}`, 'range 150..199', 'one 20'])
  })

  it("the page's last row asked for again is read alone, not as a new page", () => {
    const seqs = range(0, 100)
    const { sql, statements } = table(seqs)
    const rows = new ForwardRows<Row>(sql, 'v', seqs, () => 1)
    rows.get(0)
    rows.get(PAGE_ROWS - 1)
    expect(rows.get(PAGE_ROWS - 1)?.v).toBe(`v${PAGE_ROWS - 1}`)
    expect(statements).toEqual([`range 0..${PAGE_ROWS - 1}`, `one ${PAGE_ROWS - 1}`])
    // The next seq after the page starts the next page.
    expect(rows.get(PAGE_ROWS)?.v).toBe(`v${PAGE_ROWS}`)
    expect(statements.at(-1)).toBe(`range ${PAGE_ROWS}..99`)
  })

  it('a seq that is not listed is read alone (null when it has no row); a listed seq without a row is null', () => {
    const { sql, statements } = table([0, 2, 3, 4, 6])
    const rows = new ForwardRows<Row>(sql, 'v', [0, 2, 4, 6, 8], () => 1)
    expect(rows.get(3)?.v).toBe('v3')
    expect(rows.get(1)).toBeNull()
    expect(rows.get(9)).toBeNull()
    expect(statements).toEqual(['one 3', 'one 1', 'one 9'])
    expect(rows.get(4)?.v).toBe('v4')
    expect(rows.get(6)?.v).toBe('v6')
    expect(statements).toEqual(['one 3', 'one 1', 'one 9', 'range 4..8'])
    // Not on the page (it has no row): asked again, alone.
    expect(rows.get(8)).toBeNull()
    expect(statements.at(-1)).toBe('one 8')
  })

  it(`a page holds about PAGE_BYTES (${PAGE_BYTES}) estimated bytes: up to exactly that many, at least one row`, () => {
    const seqs = range(0, 20)
    const quarter = PAGE_BYTES / 4
    const { sql, statements } = table(seqs)
    // Rows of a quarter page: four fit exactly, the fifth would pass the cut.
    const rows = new ForwardRows<Row>(sql, 'v', seqs, () => quarter)
    rows.get(0)
    expect(statements).toEqual(['range 0..3'])
    // A row larger than a page is a page of its own; the rows after it are estimated from its index.
    const sizes = [PAGE_BYTES * 2, quarter + 1, quarter + 1, quarter + 1, quarter]
    const big = table(range(0, 5))
    const pages = new ForwardRows<Row>(big.sql, 'v', range(0, 5), (index) => sizes[index] as number)
    for (const seq of range(0, 5)) expect(pages.get(seq)?.v).toBe(`v${seq}`)
    expect(big.statements).toEqual(['range 0..0', 'range 1..3', 'range 4..4'])
  })
})
