/**
 * The completion log after a wake (the Durable Object evicted, a new instance over the same SQLite; here a
 * new `CompletionLog` over the same node:sqlite database): what it stores must not depend on whether the
 * object was warm. The same sessions are recorded twice, once by one log (warm) and once with a new log
 * before every record (evicted between every two calls), and the stored rows must be equal byte for byte.
 * Also: the first record after a wake rebuilds one candidate (its base's chain, read once, delta columns
 * only), not every recent completion.
 */
import { describe, expect, it } from 'vitest'
import { MemoryBucket, nodeSql, nodeSqlExecutor } from '../../../scripts/lib/node-sqlite.ts'
import { BlobStore } from '../../../src/durable/session/blob-store.ts'
import { CompletionLog } from '../../../src/durable/session/completion-log.ts'
import type { CompletionInput } from '../../../src/durable/session/record.ts'
import { ensureSchema } from '../../../src/durable/session/schema.ts'
import { Sql } from '../../../src/durable/session/sql.ts'
import { growingSession, growingSessionInputs, strippedThinkingInputs } from '../../support/records.ts'

/** The engine's prompt ids arrive as its JSON text (what the edge sends for a long answer). */
function asText(input: CompletionInput): CompletionInput {
  return { ...input, prompt_token_ids: null, prompt_token_text: JSON.stringify(Array.from(input.prompt_token_ids ?? [])) }
}

/** Two conversations interleaved (a sub-agent's calls between the main agent's). */
function interleaved(turns: number): CompletionInput[] {
  const main = [...growingSessionInputs(turns, 300, 9)]
  const sub = [...growingSessionInputs(Math.ceil(turns / 3), 120, 7)].map((input, i) => ({
    ...input,
    completion_id: `sub_${i}`,
    agent: 'sub',
    prompt_token_ids: Uint32Array.from(Array.from(input.prompt_token_ids ?? []).map((id) => (id + 50_000) % 150_000)),
  }))
  const out: CompletionInput[] = []
  main.forEach((input, i) => {
    out.push(input)
    if (i % 3 === 1 && sub.length) out.push(sub.shift() as CompletionInput)
  })
  return [...out, ...sub]
}

/** Calls with a body of more than 512 Ki characters, an emoji's surrogate pair at character 512 Ki. */
function hugeBodies(turns: number): CompletionInput[] {
  const head = '{"model":"gpt-test","messages":[{"role":"user","content":"'
  const original = `${head}${'a'.repeat(512 * 1024 - head.length - 1)}\u{1F600}${'b'.repeat(1000)}"}]}`
  expect(original.charCodeAt(512 * 1024 - 1)).toBe(0xd83d)
  return [...growingSessionInputs(turns)].map((input) => ({ ...input, original_text: original, request_text: original }))
}

const SESSIONS: Record<string, () => CompletionInput[]> = {
  'a body of more than 512 Ki characters, a surrogate pair at 512 Ki': () => hugeBodies(70),
  'a growing conversation, ids as text': () => [...growingSessionInputs(150)].map(asText),
  'a growing conversation with large bodies': () => growingSession(70, 2000, 300, 200, 40),
  'a main agent and a sub-agent interleaved': () => interleaved(140),
  'every turn rewrites the end of the last (stripped thinking)': () => [...strippedThinkingInputs(90)].map(asText),
}

async function recordAll(inputs: CompletionInput[], wakeEvery: number | null): Promise<Sql> {
  const { sql } = nodeSql()
  ensureSchema(sql)
  const bucket = new MemoryBucket()
  const open = () => new CompletionLog(sql, new BlobStore(bucket), 'ses_wake')
  let log = open()
  for (const [i, input] of inputs.entries()) {
    if (wakeEvery !== null && i % wakeEvery === 0) log = open()
    await log.record(input)
  }
  return sql
}

function stored(sql: Sql): { rows: unknown[] } {
  const bytes = (row: Record<string, unknown>) =>
    Object.fromEntries(
      Object.entries(row).map(([key, value]) => [key, value instanceof ArrayBuffer ? Buffer.from(value).toString('hex') : value]),
    )
  return {
    rows: sql.all('SELECT * FROM rg_completions ORDER BY seq').map(bytes),
  }
}

describe('completion log after a wake', () => {
  for (const [name, session] of Object.entries(SESSIONS)) {
    it(`stores the same bytes warm and woken before every call: ${name}`, async () => {
      const inputs = session()
      const warm = stored(await recordAll(inputs, null))
      const woken = stored(await recordAll(inputs, 1))
      expect(warm.rows).toHaveLength(inputs.length)
      // Chains are delta-coded (not stored whole) in both.
      expect(warm.rows.filter((row) => (row as { prompt_parent: number | null }).prompt_parent !== null).length).toBeGreaterThan(
        inputs.length / 2,
      )
      expect(woken.rows).toEqual(warm.rows)
      // Woken every 7 calls too.
      expect(stored(await recordAll(inputs, 7))).toEqual(warm)
    })
  }

  it('the first record after a wake reads its base chain once (delta columns only), one candidate', async () => {
    const { db } = nodeSql()
    const executor = nodeSqlExecutor(db)
    const queries: string[] = []
    const rowsRead: number[] = []
    const inner = new Sql({
      exec(query, ...bindings) {
        const rows = [...executor.exec(query, ...bindings)]
        queries.push(query)
        rowsRead.push(rows.length)
        return rows
      },
    })
    ensureSchema(inner)
    const inputs = [...growingSessionInputs(300)]
    const bucket = new MemoryBucket()
    const writer = new CompletionLog(inner, new BlobStore(bucket), 'ses_wake')
    for (const input of inputs.slice(0, 299)) await writer.record(input)
    const woken = new CompletionLog(inner, new BlobStore(bucket), 'ses_wake')
    const before = queries.length
    await woken.record(inputs[299] as CompletionInput)
    const chainRows = queries
      .slice(before)
      .map((query, i) => (query.includes('WITH RECURSIVE') || query.includes('WHERE seq = ?') ? (rowsRead[before + i] as number) : 0))
      .reduce((sum, n) => sum + n, 0)
    // The newest (298) is read, then its 298 ancestors once each: no other candidate is rebuilt.
    expect(chainRows).toBe(299)
    expect(queries.slice(before).some((query) => /\br\.\*|SELECT \*/.test(query) && query.includes('WITH RECURSIVE'))).toBe(false)
    expect(woken.lastPromptComparisons).toBe(1)
  })
})
