/**
 * The completion log's plain class over node:sqlite: chains are never cut (storage linear at any length),
 * every completion reads back exactly from a cold object in any order, and sessions written before
 * schema v2 keep working after the migration.
 */
import { describe, expect, it } from 'vitest'
import { CompletionLog } from '../../../src/durable/session/completion-log.ts'
import { BlobStore } from '../../../src/durable/session/blob-store.ts'
import type { CompletionInput } from '../../../src/durable/session/record.ts'
import { ensureSchema, MIGRATIONS, SCHEMA_VERSION } from '../../../src/durable/session/schema.ts'
import { MemoryBucket, nodeSql, nodeSqlExecutor } from '../../../scripts/lib/node-sqlite.ts'
import { Sql, type SqlValue } from '../../../src/durable/session/sql.ts'
import { DatabaseSync } from 'node:sqlite'
import { completionInput, growingSession, growingSessionInputs } from '../../support/records.ts'
import { LogRecords } from '../../../src/durable/session/log-records.ts'
import { diffText } from '../../../src/durable/session/text-delta.ts'

function openLog(options: { requestEdits?: boolean } = {}) {
  const { sql, db } = nodeSql()
  ensureSchema(sql)
  const bucket = new MemoryBucket()
  return { sql, db, bucket, log: () => new CompletionLog(sql, new BlobStore(bucket), 'ses_test', options) }
}

/**
 * Where two id sequences first differ (-1: equal). Token arrays are compared in one loop, not with `toEqual`:
 * a matcher's generic deep equality costs more per element than the log's own reads (these tests compare
 * hundreds of thousands of ids), and the first difference is what a failure needs to show.
 */
function firstDifference(actual: ArrayLike<number>, expected: ArrayLike<number>): number {
  const length = Math.min(actual.length, expected.length)
  for (let i = 0; i < length; i++) if (actual[i] !== expected[i]) return i
  return actual.length === expected.length ? -1 : length
}

function expectSame(record: Awaited<ReturnType<CompletionLog['get']>>, input: CompletionInput) {
  expect(record).not.toBeNull()
  expect(record!.completion_id).toBe(input.completion_id)
  const ids = input.prompt_token_ids ?? []
  const at = firstDifference(record!.prompt_token_ids, ids)
  expect({ length: record!.prompt_token_ids.length, firstDifference: at, read: record!.prompt_token_ids.slice(at, at + 5) }).toEqual({
    length: ids.length,
    firstDifference: -1,
    read: [],
  })
  // The bodies as JSON text: the same value read back in the same key order (a string compare, then a diff on failure).
  expect(JSON.stringify(record!.original_request)).toBe(JSON.stringify(JSON.parse(input.original_text)))
  const request = JSON.parse(input.request_text) as Record<string, unknown>
  expect(JSON.stringify(record!.request.messages)).toBe(JSON.stringify(request.messages))
  expect(record!.request.model).toEqual(request.model)
}

/** Two agents interleaved, each with drift (the tail of the last turn rewritten) and its own dialect. */
function branchingSession(turns: number): CompletionInput[] {
  const out: CompletionInput[] = []
  const prompts: Record<string, number[]> = { main: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], sub: [1, 2, 3, 4, 5, 6, 7, 8, 50, 51] }
  const messages: Record<string, { role: string; content: string }[]> = {
    main: [{ role: 'user', content: 'main task' }],
    sub: [{ role: 'user', content: 'sub task ☃ 😀' }],
  }
  for (let turn = 0; turn < turns; turn++) {
    const agent = turn % 3 === 2 ? 'sub' : 'main'
    const prompt = prompts[agent] as number[]
    const history = messages[agent] as { role: string; content: string }[]
    out.push(
      completionInput({
        completion_id: `cmpl_${turn}`,
        agent,
        api: agent === 'sub' ? 'anthropic' : 'openai-chat',
        prompt_token_ids: Uint32Array.from(prompt),
        response_token_ids: Uint32Array.from([turn, turn + 1, 151645]),
        response_logprobs: Float64Array.from([-1, -2, -3]),
        request_text: JSON.stringify({ model: 'Qwen/Qwen3-8B', messages: history, tools: [{ n: agent }], return_token_ids: true }),
        original_text:
          agent === 'sub'
            ? JSON.stringify({
                system: 'x',
                messages: history.map((m) => ({ role: m.role, content: [{ type: 'text', text: m.content }] })),
              })
            : JSON.stringify({ model: 'gpt', messages: history }),
      }),
    )
    // Every 5th turn of an agent rewrites its last 3 tokens (a think block stripped) before growing.
    if (turn % 5 === 4) prompt.splice(prompt.length - 3, 3, 7, 7)
    for (let i = 0; i < 20; i++) prompt.push((turn * 31 + i) % 1000)
    if (turn % 7 === 6) history[history.length - 1] = { role: 'user', content: `edited ${turn}` }
    history.push({ role: 'assistant', content: `answer ${turn} é` }, { role: 'tool', content: `output ${turn} `.repeat(10) })
  }
  return out
}

describe('CompletionLog storage', () => {
  it('stores a 160-turn chain linearly (no re-stored prompts) and reads any completion back from a cold log', async () => {
    const { log } = openLog()
    const inputs = growingSession(160, 200, 60, 20)
    const writer = log()
    for (const input of inputs) await writer.record(input)
    const stats = writer.stats()
    const last = inputs.at(-1) as CompletionInput
    // Every token stored once: the unique tokens are exactly the final prompt (no chain cuts).
    expect(stats.unique_prompt_tokens).toBe(last.prompt_token_ids!.length)
    expect(stats.text_bytes).toBeLessThanOrEqual(2 * (last.original_text.length + last.request_text.length))
    for (const seq of [159, 0, 150, 158, 1, 64, 65, 100]) {
      expectSame(await log().get(seq), inputs[seq] as CompletionInput)
    }
    const all = await log().all()
    for (const [i, record] of all.entries()) expectSame(record, inputs[i] as CompletionInput)
  })

  it('reads back branching, drifting, multi-dialect sessions exactly in any order', async () => {
    const { log } = openLog()
    const inputs = branchingSession(90)
    const writer = log()
    for (const input of inputs) await writer.record(input)
    const order = inputs.map((_, i) => (i * 37) % inputs.length)
    const reader = log()
    for (const seq of order) expectSame(await reader.get(seq), inputs[seq] as CompletionInput)
    const summary = writer.stats()
    expect(summary.completions).toBe(90)
  })

  it('migrates a v1 session: old rows (cut chains, no lengths) stay readable and new rows chain onto them', async () => {
    const { sql, bucket, log } = openLog()
    const inputs = growingSession(40)
    // The v3 layout (no coded middles), then the first 25 rows made to look like v1 rows: no body lengths.
    const writer = new CompletionLog(sql, new BlobStore(bucket), 'ses_test', { requestEdits: false })
    for (const input of inputs.slice(0, 25)) await writer.record(input)
    sql.run('UPDATE rg_completions SET request_length = NULL, original_length = NULL')
    const resumed = log()
    for (const input of inputs.slice(25)) await resumed.record(input)
    const reader = log()
    for (const seq of [39, 10, 24, 25, 0]) expectSame(await reader.get(seq), inputs[seq] as CompletionInput)
  })

  it('upgrades a v1 schema in place', async () => {
    const { sql } = nodeSql()
    sql.run('CREATE TABLE rg_schema (version INTEGER NOT NULL)')
    sql.run('INSERT INTO rg_schema (version) VALUES (1)')
    for (const statement of (MIGRATIONS[0] as string).split(';')) if (statement.trim()) sql.run(statement)
    ensureSchema(sql)
    expect(sql.first<{ version: number }>('SELECT version FROM rg_schema')?.version).toBe(SCHEMA_VERSION)
    const columns = sql.all<{ name: string }>("SELECT name FROM pragma_table_info('rg_completions')").map((c) => c.name)
    expect(columns).toContain('request_length')
  })

  it('records prompt ids sent as the engine’s JSON text exactly like ids sent parsed (branching, drifting, spaced)', async () => {
    const asIds = openLog()
    const asText = openLog()
    const inputs = branchingSession(60)
    const idsWriter = asIds.log()
    const textWriter = asText.log()
    for (const [turn, input] of inputs.entries()) {
      await idsWriter.record(input)
      const json = JSON.stringify(Array.from(input.prompt_token_ids ?? []))
      // The engine's formatting may change mid-session (a proxy, a restart with another JSON encoder).
      const text = turn % 9 < 4 ? json : json.replaceAll(',', ', ')
      await textWriter.record({ ...input, prompt_token_ids: null, prompt_token_text: text })
      if (turn > 2 && turn % 3 !== 2) expect(textWriter.lastPromptRead?.copied, `turn ${turn}`).toBeGreaterThan(0)
    }
    // What GET /completions serves is the same, record by record, from a cold log.
    expect(await asText.log().all()).toEqual(await asIds.log().all())
    const shape = 'SELECT seq, prompt_parent, prompt_shared, prompt_length, trainable FROM rg_completions ORDER BY seq'
    expect(asText.sql.all(shape)).toEqual(asIds.sql.all(shape))
  })

  it('records prompt ids text that is not JSON without ids, warned, never guessed', async () => {
    const { log } = openLog()
    const writer = log()
    await writer.record(completionInput({ completion_id: 'cmpl_0', prompt_token_ids: null, prompt_token_text: '[1,2,3,4,5,6,7,8,9,10]' }))
    await writer.record(
      completionInput({ completion_id: 'cmpl_1', prompt_token_ids: null, prompt_token_text: '[1,2,3,4,5,6,7,8,9,10,,11]' }),
    )
    const record = await log().get(1)
    expect(record?.prompt_token_ids).toEqual([])
    expect(record?.trainable).toBe(false)
    expect(record?.warnings.map((w) => w.code)).toContain('engine_prompt_ids_unreadable')
    expect((await log().get(0))?.prompt_token_ids).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
  })

  it('does the same work per call at turn 400 as at turn 10 (rows and bytes read, ids parsed)', async () => {
    const db = new DatabaseSync(':memory:')
    const executor = nodeSqlExecutor(db)
    const read = { rows: 0, bytes: 0 }
    const sql = new Sql({
      exec(query: string, ...bindings: SqlValue[]) {
        const rows = [...executor.exec(query, ...bindings)]
        for (const row of rows) {
          read.rows++
          for (const value of Object.values(row)) {
            read.bytes += value instanceof ArrayBuffer ? value.byteLength : typeof value === 'string' ? value.length : 8
          }
        }
        return rows
      },
    })
    ensureSchema(sql)
    const writer = new CompletionLog(sql, new BlobStore(new MemoryBucket()), 'ses_test')
    const perCall: { rows: number; bytes: number; parsedChars: number; copied: number; promptLength: number }[] = []
    for (const input of growingSessionInputs(400, 200, 40, 2)) {
      const ids = input.prompt_token_ids ?? new Uint32Array(0)
      read.rows = 0
      read.bytes = 0
      await writer.record({ ...input, prompt_token_ids: null, prompt_token_text: JSON.stringify(Array.from(ids)) })
      perCall.push({ ...read, ...(writer.lastPromptRead ?? { parsedChars: -1, copied: -1 }), promptLength: ids.length })
    }
    const early = perCall[10] as (typeof perCall)[number]
    for (const [turn, call] of perCall.entries()) {
      if (turn < 10) continue
      // The same few small rows read (the duplicate check), whatever the session's length.
      expect(call.rows, `turn ${turn}`).toBeLessThanOrEqual(early.rows)
      expect(call.bytes, `turn ${turn}`).toBeLessThanOrEqual(early.bytes)
      // Only the new ids are parsed; all earlier ones are copied from the last prompt.
      expect(call.copied, `turn ${turn}`).toBe((perCall[turn - 1] as (typeof perCall)[number]).promptLength)
      // (Token ids have at most 6 digits here: 7 characters each with the comma.)
      expect(call.parsedChars, `turn ${turn}`).toBeLessThanOrEqual(7 * (call.promptLength - call.copied) + 1)
    }
    expect((perCall.at(-1) as (typeof perCall)[number]).promptLength).toBeGreaterThan(15_000)
  })

  it('locates each body’s messages by scanning only the new ones, served bodies as the edge sends them too', async () => {
    for (const served of ['own', 'keys-appended', 'model-renamed'] as const) {
      const { log } = openLog()
      const writer = log()
      const scans: (string | null)[] = []
      for (const input of growingSessionInputs(60, 200, 40, 2)) {
        const original = input.original_text
        const body =
          served === 'own'
            ? { request_text: original }
            : served === 'keys-appended'
              ? { request_text: '', request_delta: diffText(original, `${original.slice(0, -1)},"logprobs":true}`) }
              : { request_text: original.replace('"gpt-test"', '"Qwen/Qwen3-8B"') }
        await writer.record({ ...input, ...body })
        scans.push(writer.lastMessagesScan)
      }
      expect(scans[0], served).toBe('whole')
      expect(new Set(scans.slice(1)), served).toEqual(new Set(['new']))
      // And the index it stored serves the build (every later body from its parent's messages and the new ones).
      const source = new LogRecords(writer)
      for (const record of await source.open()) {
        await source.load(record)
        expect(record.request.messages).toEqual((await writer.get(record.seq))?.request.messages)
        source.reduce(record)
      }
      expect(source.indexedLoads, served).toBe(59)
    }
  })

  it('compares a new prompt with at most two recent prompts when every turn rewrites the end of the last (stripped thinking)', async () => {
    for (const asText of [false, true]) {
      const { log } = openLog()
      const writer = log()
      let prompt = Array.from({ length: 50 }, (_, i) => i + 1)
      let last: number[] = []
      const comparisons: number[] = []
      for (let turn = 0; turn < 40; turn++) {
        const ids = Uint32Array.from(prompt)
        await writer.record(
          completionInput({
            completion_id: `c${turn}`,
            prompt_token_ids: asText ? null : ids,
            ...(asText ? { prompt_token_text: JSON.stringify(Array.from(ids)) } : {}),
          }),
        )
        comparisons.push(writer.lastPromptComparisons)
        last = prompt
        // The next prompt drops the last 3 tokens (the turn's thinking) and adds the turn and its tool result.
        prompt = [...prompt.slice(0, -3), 1000 + turn, 2000 + turn, 3000 + turn, 4000 + turn, 5000 + turn]
      }
      // Two comparisons per pass (text, then ids) once the 16 recent prompts fill up: the last one and the one
      // before it (longer than what the last shares); the older ones are shorter, so they cannot share more.
      expect(Math.max(...comparisons.slice(20)), `as text: ${asText}`).toBeLessThanOrEqual(asText ? 4 : 2)
      expect((await log().get(39))?.prompt_token_ids).toEqual(last)
    }
  })
})
