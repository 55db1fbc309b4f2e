/**
 * The session object's schema carries no index a query does not use: every index is one more B-tree insert in
 * each record's commit (docs/hot-path.md, fifth pass). A new session and one written by an older schema (v1's
 * own statements, the checked-in v3 session) both end with the completion id's unique index only.
 */
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { nodeSql } from '../../../scripts/lib/node-sqlite.ts'
import { ensureSchema, MIGRATIONS, SCHEMA_VERSION } from '../../../src/durable/session/schema.ts'
import type { Sql } from '../../../src/durable/session/sql.ts'

const indexesOf = (sql: Sql) =>
  sql
    .all<{ name: string }>("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'rg_completions' ORDER BY name")
    .map((row) => row.name)

/** The completion id's `UNIQUE`: the record's duplicate check (`ON CONFLICT (completion_id)`) and reads by id. */
const ONLY = ['sqlite_autoindex_rg_completions_1']

describe('session schema indexes', () => {
  it('a new session has only the completion id index', () => {
    const { sql } = nodeSql()
    ensureSchema(sql)
    expect(indexesOf(sql)).toEqual(ONLY)
  })

  it('a v1 session loses the unused (agent, seq) index on upgrade', () => {
    const { sql } = nodeSql()
    sql.run('CREATE TABLE rg_schema (version INTEGER NOT NULL)')
    sql.run('INSERT INTO rg_schema (version) VALUES (1)')
    for (const statement of (MIGRATIONS[0] as string).split(';')) if (statement.trim()) sql.run(statement)
    expect(indexesOf(sql)).toContain('rg_completions_agent')
    ensureSchema(sql)
    expect(sql.first<{ version: number }>('SELECT version FROM rg_schema')?.version).toBe(SCHEMA_VERSION)
    expect(indexesOf(sql)).toEqual(ONLY)
  })

  it('the checked-in v3 session loses it too', () => {
    const { sql, db } = nodeSql()
    db.exec(readFileSync(join(import.meta.dirname, '../../fixtures/session-v3/session.sql'), 'utf8'))
    expect(indexesOf(sql)).toContain('rg_completions_agent')
    ensureSchema(sql)
    expect(indexesOf(sql)).toEqual(ONLY)
  })
})
