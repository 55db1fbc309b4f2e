/**
 * The completion log's work-saving shortcuts, counted: SQLite statements run (a counting executor under
 * the log), chain walks stopping at an ancestor in memory, the next seq read once, paged reads that stop on
 * a short page, and how many recent prompts a record compares its prompt with (`lastPromptComparisons`);
 * also a body without a `messages` array (no message layout) recorded and read back.
 * The stored rows are the same without these shortcuts; only the work grows, so the work is what is pinned.
 */
import { describe, expect, it } from 'vitest'
import { MemoryBucket, nodeSql, nodeSqlExecutor } from '../../../scripts/lib/node-sqlite.ts'
import { BlobStore } from '../../../src/durable/session/blob-store.ts'
import { CompletionLog } from '../../../src/durable/session/completion-log.ts'
import type { CompletionInput } from '../../../src/durable/session/record.ts'
import { ensureSchema } from '../../../src/durable/session/schema.ts'
import { Sql } from '../../../src/durable/session/sql.ts'
import { completionInput } from '../../support/records.ts'

/** A log over node:sqlite whose statements are recorded (`queries`), so a test can count reads. */
function countingLog() {
  const { db } = nodeSql()
  const inner = nodeSqlExecutor(db)
  const queries: string[] = []
  const sql = new Sql({
    exec(query, ...bindings) {
      queries.push(query)
      return inner.exec(query, ...bindings)
    },
  })
  ensureSchema(sql)
  const bucket = new MemoryBucket()
  const log = () => new CompletionLog(sql, new BlobStore(bucket), 'ses_work')
  /** Statements run by `action` that contain `marker`. */
  const count = async (marker: string, action: () => unknown): Promise<number> => {
    const before = queries.length
    await action()
    return queries.slice(before).filter((query) => query.includes(marker)).length
  }
  return { log, count, bucket }
}

function range(from: number, to: number): number[] {
  return Array.from({ length: to - from }, (_, i) => from + i)
}

let ids = 0
function input(prompt: number[], overrides: Partial<CompletionInput> = {}): CompletionInput {
  return completionInput({ completion_id: `w${ids++}`, prompt_token_ids: Uint32Array.from(prompt), ...overrides })
}

/** A prompt given as the engine's text only (ids read from it against a recent prompt). */
function textInput(prompt: number[], overrides: Partial<CompletionInput> = {}): CompletionInput {
  return input(prompt, { prompt_token_ids: null, prompt_token_text: JSON.stringify(prompt), ...overrides })
}

const CHAIN = 'WITH RECURSIVE'
const ROW = 'FROM rg_completions WHERE seq = ?'
const PAGE = 'SELECT * FROM rg_completions WHERE seq > ?'

/** Records a conversation of `turns` turns, each prompt extending the last (a chain of deltas). */
async function conversation(writer: CompletionLog, turns: number): Promise<void> {
  for (let turn = 0; turn < turns; turn++) await writer.record(input(range(1, 21 + turn * 5)))
}

describe('completion log: work saved', () => {
  it('reads the last seq once per log, not once per record', async () => {
    const { log, count } = countingLog()
    await conversation(log(), 2)
    const writer = log()
    expect(await count('MAX(seq)', () => conversation(writer, 3))).toBe(1)
    expect((await log().get(4))?.seq).toBe(4)
  })

  it('a chain is walked once: a cached record is not read again, and a walk stops at an ancestor in memory', async () => {
    const { log, count } = countingLog()
    await conversation(log(), 8)
    const reader = log()
    expect(await count(CHAIN, () => reader.get(5))).toBe(1)
    // Cached: no walk at all.
    expect(await count(CHAIN, () => reader.get(5))).toBe(0)
    // Its child's parent is in memory: no walk.
    expect(await count(CHAIN, () => reader.get(6))).toBe(0)
    expect((await reader.get(6))?.prompt_token_ids).toEqual(range(1, 51))
    // Its grandchild's walk stops at the first row whose parent is in memory (one query).
    expect(await count(CHAIN, () => reader.get(2))).toBe(1)
    expect(await count(CHAIN, () => reader.requestText(7))).toBe(0)
  })

  it('the warm-up after a wake rebuilds only the candidates a record compares, and none already in memory', async () => {
    const { log, count } = countingLog()
    await conversation(log(), 4)
    const woken = log()
    await woken.get(3)
    // The new prompt extends 3's (in memory): no candidate is read again.
    expect(await count(ROW, () => woken.record(input(range(1, 60))))).toBe(0)
    expect((await log().get(4))?.prompt_delta).toEqual({ parent_seq: 3, shared_prefix_len: 35 })
    // Woken again, a prompt extending 4's: only 4 is rebuilt (one row, then its chain), no older candidate.
    const cold = log()
    expect(await count(ROW, () => cold.record(input(range(1, 70))))).toBe(1)
    expect(cold.lastPromptComparisons).toBe(1)
  })

  it('a warm record runs one statement: the insert is its own duplicate check', async () => {
    const { log, count } = countingLog()
    const writer = log()
    await conversation(writer, 2)
    const next = input(range(1, 40))
    expect(await count('', () => writer.record(next))).toBe(1)
    // Sent again: found by that insert (the first stands), and its seq is given back.
    expect(await writer.record({ ...next })).toMatchObject({ seq: 2, duplicate: true, stored_bytes: 0 })
    const after = input(range(1, 45))
    expect((await writer.record(after)).seq).toBe(3)
    const stored = (await log().all()).map((record) => [record.seq, record.completion_id])
    expect(stored.slice(2)).toEqual([
      [2, next.completion_id],
      [3, after.completion_id],
    ])
    expect(stored).toHaveLength(4)
  })

  it('a record that spills to R2 looks for its duplicate first: a duplicate writes no blob', async () => {
    const { log, bucket } = countingLog()
    const writer = log()
    // 70,000 float64 logprobs (not float32 values): 560 KB, over the spill threshold whatever the base.
    const sampled = range(0, 70_000)
    const first = input(range(1, 20), {
      response_token_ids: Uint32Array.from(sampled),
      response_logprobs: Float64Array.from(sampled, (i) => -1 / (i + 3)),
    })
    await writer.record(first)
    const puts = bucket.puts
    expect(puts).toBeGreaterThan(0)
    expect(await writer.record({ ...first })).toMatchObject({ seq: 0, duplicate: true })
    expect(await log().record({ ...first })).toMatchObject({ seq: 0, duplicate: true })
    expect(bucket.puts).toBe(puts)
    expect((await writer.record(input(range(1, 25)))).seq).toBe(1)
  })

  it('paged reads stop on a short page (no query for an empty one)', async () => {
    const { log, count } = countingLog()
    await conversation(log(), 6)
    const reader = log()
    expect(await count(PAGE, () => reader.all())).toBe(1)
    const streamed: number[] = []
    expect(
      await count(PAGE, async () => {
        for await (const record of reader.stream({}, 4)) streamed.push(record.seq)
      }),
    ).toBe(2)
    expect(streamed).toEqual(range(0, 6))
    // A full last page needs one more (empty) page to know it was the last.
    const exact: number[] = []
    expect(
      await count(PAGE, async () => {
        for await (const record of reader.stream({}, 3)) exact.push(record.seq)
      }),
    ).toBe(3)
    expect(exact).toEqual(range(0, 6))
  })

  it('response messages: one statement per 100 ids, none for no ids', async () => {
    const { log, count } = countingLog()
    const writer = log()
    await conversation(writer, 2)
    const IN = 'completion_id IN'
    expect(await count(IN, () => writer.responseMessages([]))).toBe(0)
    const hundred = Array.from({ length: 100 }, (_, i) => `missing${i}`)
    expect(await count(IN, () => writer.responseMessages(hundred))).toBe(1)
    expect(await count(IN, () => writer.responseMessages([...hundred, 'one more']))).toBe(2)
  })
})

describe('completion log: prompt comparisons per record', () => {
  for (const asText of [false, true]) {
    const make = asText ? textInput : input
    // Text prompts are compared twice per candidate (text, then ids); id prompts once.
    const per = asText ? 2 : 1

    it(`the next turn of a conversation costs one comparison${asText ? ' per reading (text)' : ''}`, async () => {
      const { log } = countingLog()
      const writer = log()
      await writer.record(make(range(1, 21)))
      expect(writer.lastPromptComparisons).toBe(0)
      await writer.record(make(range(1, 31)))
      expect(writer.lastPromptComparisons).toBe(per)
    })

    it(`stops at a recent prompt the new one extends entirely (${asText ? 'text' : 'ids'})`, async () => {
      const { log } = countingLog()
      const writer = log()
      await writer.record(make(range(500, 540), { agent: 'other' })) // 0: long, unrelated
      await writer.record(make(range(1, 21))) // 1
      await writer.record(make(range(1, 31))) // 2: extends 1 entirely: 0 is not compared
      expect(writer.lastPromptComparisons).toBe(per)
      // Shares 10 of the 30 ids of 2: not the whole of it, so the older, longer prompts are compared too.
      await writer.record(make([...range(1, 11), ...range(800, 820)])) // 3
      expect(writer.lastPromptComparisons).toBe(3 * per)
    })

    it(`a base of exactly 8 shared ids, extended entirely, ends the search (${asText ? 'text' : 'ids'})`, async () => {
      const { log } = countingLog()
      const writer = log()
      await writer.record(make(range(500, 540), { agent: 'other' })) // 0
      await writer.record(make(range(1, 9))) // 1: 8 ids
      await writer.record(make(range(1, 30))) // 2: extends 1 entirely
      expect(writer.lastPromptComparisons).toBe(per)
      expect((await log().get(2))?.prompt_delta).toEqual({ parent_seq: 1, shared_prefix_len: 8 })
    })

    it(`a recent prompt no longer than the best shared prefix is not compared (${asText ? 'text' : 'ids'})`, async () => {
      const { log } = countingLog()
      const writer = log()
      await writer.record(make(range(1, 11))) // 0: 10 ids
      await writer.record(make([...range(1, 11), ...range(100, 110)])) // 1: extends 0
      // Shares 10 with 1 (not all of it); 0 is only 10 long: it cannot share more, so it is skipped.
      await writer.record(make([...range(1, 11), ...range(200, 210)])) // 2
      expect(writer.lastPromptComparisons).toBe(per)
      expect((await log().get(2))?.prompt_delta).toEqual({ parent_seq: 1, shared_prefix_len: 10 })
    })
  }
})

describe('completion log: a body without a messages array', () => {
  it('is recorded and read back (no message layout), also against a base read from storage', async () => {
    const { log } = countingLog()
    const body = (prompt: string) => JSON.stringify({ model: 'Qwen/Qwen3-8B', prompt })
    const legacy = (turn: number, overrides: Partial<CompletionInput> = {}) =>
      input(range(1, 21 + turn * 5), { request_text: body(`turn ${turn}`), original_text: body(`turn ${turn}`), ...overrides })
    const writer = log()
    await writer.record(legacy(0))
    expect(writer.lastMessagesScan).toBeNull()
    await writer.record(legacy(1))
    expect(writer.lastMessagesScan).toBeNull()
    // After a wake: the base comes from storage, its layout is looked for (none) the first time it is needed.
    const woken = log()
    await woken.record(legacy(2))
    expect(woken.lastMessagesScan).toBeNull()
    await woken.record(legacy(3))
    const cold = log()
    for (const seq of [0, 1, 2, 3]) expect(await cold.requestText(seq)).toBe(body(`turn ${seq}`))
    expect((await cold.get(3))?.prompt_delta).toEqual({ parent_seq: 2, shared_prefix_len: 30 })
  })
})
