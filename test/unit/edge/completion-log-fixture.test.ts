/**
 * A session written by the schema-v3 code (checked in as SQL text: `test/fixtures/session-v3/`, made by its
 * `generate.ts` from commit 44a1eaa) migrates on open, and the current readers serve it byte for byte what the
 * v3 code served (GET completion, bodies, every build and export, a rollout result, the streamed build's
 * loads); the rest of the session then records on top of it and reads as a session written by the current
 * code alone would.
 */
import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { MemoryBucket, nodeSql } from '../../../scripts/lib/node-sqlite.ts'
import { BlobStore } from '../../../src/durable/session/blob-store.ts'
import { CompletionLog } from '../../../src/durable/session/completion-log.ts'
import { ensureSchema, SCHEMA_VERSION } from '../../../src/durable/session/schema.ts'
import { FIXTURE_RECORDED, fixtureInputs } from '../../fixtures/session-v3/session.ts'
import { CAPTURE_SESSION, servedOutputs } from '../../support/edge-capture.ts'

const FIXTURE = join(import.meta.dirname, '../../fixtures/session-v3')
const sha256 = (text: string) => createHash('sha256').update(text).digest('hex')

function openFixture() {
  const { sql, db } = nodeSql()
  db.exec(readFileSync(join(FIXTURE, 'session.sql'), 'utf8'))
  const bucket = new MemoryBucket()
  return { sql, log: () => new CompletionLog(sql, new BlobStore(bucket), CAPTURE_SESSION.session_id) }
}

describe('a session written by schema v3', () => {
  it('is the v3 code’s own: version 3, no v4 column', () => {
    const { sql } = openFixture()
    expect(sql.first<{ version: number }>('SELECT version FROM rg_schema')?.version).toBe(3)
    const columns = sql.all<{ name: string }>("SELECT name FROM pragma_table_info('rg_completions')").map((c) => c.name)
    expect(columns).not.toContain('request_edits')
  })

  it('migrates on open and serves what the v3 code served, byte for byte', async () => {
    const expected = JSON.parse(readFileSync(join(FIXTURE, 'expected.json'), 'utf8')) as { completions: number; outputs: string[] }
    const { sql, log } = openFixture()
    ensureSchema(sql)
    expect(sql.first<{ version: number }>('SELECT version FROM rg_schema')?.version).toBe(SCHEMA_VERSION)
    expect(expected.completions).toBe(FIXTURE_RECORDED)
    const outputs = await servedOutputs(
      log,
      Array.from({ length: FIXTURE_RECORDED }, (_, seq) => seq),
    )
    expect(outputs.map(sha256)).toEqual(expected.outputs)
  })

  it('records the rest of the session on top (new rows coded against the v3 rows) and reads as the current code alone would', async () => {
    const inputs = fixtureInputs()
    expect(inputs.length).toBeGreaterThan(FIXTURE_RECORDED + 3)
    const migrated = openFixture()
    ensureSchema(migrated.sql)
    const writer = migrated.log()
    for (const input of inputs.slice(FIXTURE_RECORDED)) expect((await writer.record(input)).duplicate).toBe(false)
    // The new rows are v4 rows: most store their engine body as copies of the harness body's new text.
    const coded = migrated.sql.first<{ n: number }>(
      'SELECT COUNT(*) AS n FROM rg_completions WHERE request_edits IS NOT NULL AND seq >= ?',
      FIXTURE_RECORDED,
    )
    expect(coded?.n).toBeGreaterThan(0)
    // A session of the same calls written by the current code from the start, in the v3 layout.
    const { sql } = nodeSql()
    ensureSchema(sql)
    const bucket = new MemoryBucket()
    const fresh = () => new CompletionLog(sql, new BlobStore(bucket), CAPTURE_SESSION.session_id, { requestEdits: false })
    const freshWriter = fresh()
    for (const input of inputs) await freshWriter.record(input)
    const seqs = inputs.map((_, seq) => seq)
    const actual = await servedOutputs(migrated.log, seqs)
    const wanted = await servedOutputs(fresh, seqs)
    expect(actual.length).toBe(wanted.length)
    for (const [i, output] of actual.entries()) expect(output, `reader output ${i}`).toBe(wanted[i])
    for (const [seq, input] of inputs.entries()) expect(await migrated.log().requestText(seq)).toBe(input.request_text)
  })
})
