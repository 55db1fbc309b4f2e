/**
 * The completion log's write side over node:sqlite: which recent completion each prompt is delta-coded
 * against (longest shared prefix, newest on a tie, a same-agent same-API fallback, a window of 16 recent
 * completions, warm bases after a wake), what is trainable, fields spilled to the bucket (token arrays
 * too) read back from a cold log, the page size estimate, and the 100-parameter bound of a statement.
 */
import { DatabaseSync } from 'node:sqlite'
import { describe, expect, it } from 'vitest'
import { MemoryBucket, nodeSql, nodeSqlExecutor } from '../../../scripts/lib/node-sqlite.ts'
import { BaseBudget } from '../../../src/durable/session/base-cache-budget.ts'
import { BlobStore, SPILL_THRESHOLD_BYTES } from '../../../src/durable/session/blob-store.ts'
import { CompletionLog } from '../../../src/durable/session/completion-log.ts'
import { LogRecords } from '../../../src/durable/session/log-records.ts'
import type { CompletionInput } from '../../../src/durable/session/record.ts'
import { ensureSchema } from '../../../src/durable/session/schema.ts'
import { Sql, type SqlValue } from '../../../src/durable/session/sql.ts'
import { completionInput } from '../../support/records.ts'

function openLog(budget?: BaseBudget) {
  const { sql } = nodeSql()
  ensureSchema(sql)
  const bucket = new MemoryBucket()
  return { sql, bucket, log: () => new CompletionLog(sql, new BlobStore(bucket), 'ses_bases', budget ? { budget } : {}) }
}

function range(from: number, to: number): number[] {
  return Array.from({ length: to - from }, (_, i) => from + i)
}

/** Where two arrays of numbers first differ (null when they hold the same values: `Object.is` each). */
function firstDifference(actual: ArrayLike<number> | null | undefined, expected: ArrayLike<number>): string | null {
  if (!actual) return `got ${actual}`
  if (actual.length !== expected.length) return `length ${actual.length}, expected ${expected.length}`
  for (let i = 0; i < expected.length; i++) {
    if (!Object.is(actual[i], expected[i])) return `[${i}] is ${actual[i]}, expected ${expected[i]}`
  }
  return null
}

let ids = 0
function input(prompt: number[], overrides: Partial<CompletionInput> = {}): CompletionInput {
  return completionInput({ completion_id: `c${ids++}`, prompt_token_ids: Uint32Array.from(prompt), ...overrides })
}

type Placement = {
  seq: number
  prompt_parent: number | null
  prompt_shared: number
  delta_depth: number
}

function placements(sql: Sql): Placement[] {
  return sql.all<Placement>('SELECT seq, prompt_parent, prompt_shared, delta_depth FROM rg_completions ORDER BY seq')
}

describe('completion log: delta bases', () => {
  it('longest shared prefix, newest on a tie; a same-agent same-API fallback below 8 shared tokens; depth counts the chain', async () => {
    const { sql, log } = openLog()
    const writer = log()
    const a = range(1, 21)
    await writer.record(input(a)) // 0
    await writer.record(input([...a, ...range(21, 31)])) // 1: extends 0
    await writer.record(input([...a, ...range(21, 41)])) // 2: extends 1
    await writer.record(input([...a.slice(0, 10), ...range(500, 520)])) // 3: 10 shared with 0, 1 and 2
    await writer.record(input(range(900, 930))) // 4: nothing shared: the newest main/openai-chat one
    await writer.record(input(range(700, 730), { agent: 'sub', api: 'anthropic' })) // 5: no fallback of its kind
    await writer.record(input([...a.slice(0, 5), ...range(800, 830)], { api: 'anthropic' })) // 6: 5 shared; no main/anthropic one
    expect(placements(sql)).toEqual([
      { seq: 0, prompt_parent: null, prompt_shared: 0, delta_depth: 0 },
      { seq: 1, prompt_parent: 0, prompt_shared: 20, delta_depth: 1 },
      { seq: 2, prompt_parent: 1, prompt_shared: 30, delta_depth: 2 },
      { seq: 3, prompt_parent: 2, prompt_shared: 10, delta_depth: 3 },
      { seq: 4, prompt_parent: 3, prompt_shared: 0, delta_depth: 4 },
      { seq: 5, prompt_parent: null, prompt_shared: 0, delta_depth: 0 },
      { seq: 6, prompt_parent: null, prompt_shared: 0, delta_depth: 0 },
    ])
    const cold = log()
    // Stored against a base it shares nothing with: no prompt_delta to report.
    expect((await cold.get(4))?.prompt_delta).toBeNull()
    expect((await cold.get(3))?.prompt_delta).toEqual({ parent_seq: 2, shared_prefix_len: 10 })
    expect((await cold.get(4))?.prompt_token_ids).toEqual(range(900, 930))
    expect((await cold.get(6))?.prompt_token_ids).toEqual([...a.slice(0, 5), ...range(800, 830)])
  })

  it('only the 16 most recent completions are candidate bases', async () => {
    for (const between of [15, 16]) {
      const { sql, log } = openLog()
      const writer = log()
      const a = range(1, 21)
      await writer.record(input(a))
      for (let i = 0; i < between; i++) await writer.record(input(range(1000 + i * 100, 1030 + i * 100), { agent: 'other' }))
      await writer.record(input([...a, 42]))
      expect(placements(sql).at(-1)?.prompt_parent, `${between} between`).toBe(between === 15 ? 0 : null)
    }
  })

  it('bases are held in memory up to the budget: an evicted one is rebuilt when compared (the choice depends on storage only)', async () => {
    const budget = new BaseBudget(24 * 1024 * 1024)
    const { sql, log } = openLog(budget)
    const writer = log()
    // Two 14 MiB prompts (4 bytes an id): the second evicts the first.
    const n = 3_500_000
    const a = new Uint32Array(n).map((_, i) => i)
    const b = new Uint32Array(n).map((_, i) => n + i)
    await writer.record(input([], { prompt_token_ids: a }))
    await writer.record(input([], { prompt_token_ids: b, agent: 'other' }))
    expect(writer.cachedBytes).toBeLessThan(24 * 1024 * 1024)
    await writer.record(input(range(0, 20)))
    expect(budget.evictions).toBeGreaterThan(0)
    expect(placements(sql).map((row) => row.prompt_parent)).toEqual([null, null, 0])
    // Small prompts stay: the same third prompt after two small ones is coded against the first.
    const small = openLog()
    const smallWriter = small.log()
    await smallWriter.record(input(range(0, 30)))
    await smallWriter.record(input(range(1000, 1030), { agent: 'other' }))
    await smallWriter.record(input(range(0, 20)))
    expect(placements(small.sql).map((row) => row.prompt_parent)).toEqual([null, null, 0])
  })

  it('after a wake the most recent completions are bases again, newest preferred', async () => {
    const { sql, log } = openLog()
    const before = log()
    const a = range(1, 21)
    await before.record(input(a))
    await before.record(input([...a.slice(0, 10), ...range(300, 320)]))
    const woken = log()
    await woken.record(input([...a.slice(0, 10), ...range(600, 620)]))
    await woken.record(input([...a, 77]))
    expect(placements(sql).slice(2)).toEqual([
      { seq: 2, prompt_parent: 1, prompt_shared: 10, delta_depth: 2 },
      { seq: 3, prompt_parent: 0, prompt_shared: 20, delta_depth: 1 },
    ])
    for (const seq of [0, 1, 2, 3]) expect((await log().get(seq))?.prompt_token_ids).toHaveLength(seq === 3 ? 21 : seq === 0 ? 20 : 30)
  })
})

describe('completion log: what is recorded', () => {
  it('trainable only when ok with prompt ids and sampled tokens', async () => {
    const { log } = openLog()
    const writer = log()
    await writer.record(input(range(1, 10)))
    await writer.record(input(range(1, 10), { response_token_ids: new Uint32Array(0), response_logprobs: new Float64Array(0) }))
    await writer.record(input(range(1, 10), { prompt_token_ids: null }))
    await writer.record(input(range(1, 10), { status: 'failed' }))
    await writer.record(input(range(1, 10), { response_token_ids: null, response_logprobs: null, response_message: null }))
    const cold = log()
    const records = await cold.all()
    expect(records.map((record) => record.trainable)).toEqual([true, false, false, false, false])
    expect(records.map((record) => record.stream)).toEqual([false, false, false, false, false])
    expect(cold.headers().map((header) => header.trainable)).toEqual([true, false, false, false, false])
    expect(records[4]).toMatchObject({ response_token_ids: [], response_logprobs: null, response_message: null })
  })

  it('prompt ids text that is not JSON: the warning says what happened', async () => {
    const { log } = openLog()
    await log().record(input([], { prompt_token_ids: null, prompt_token_text: '[1,,2]' }))
    expect((await log().get(0))?.warnings).toEqual([
      { code: 'engine_prompt_ids_unreadable', message: 'the engine sent prompt_token_ids that are not JSON; recorded without them' },
    ])
  })

  it('stored_bytes counts at least the token arrays it stored', async () => {
    const { log } = openLog()
    const result = await log().record(input(range(1, 1001), { response_token_ids: Uint32Array.from(range(1, 501)) }))
    expect(result.stored_bytes).toBeGreaterThanOrEqual(1000 * 4 + 500 * 4)
  })

  it('a field spills when it is over the threshold, not at it', async () => {
    const { bucket, log } = openLog()
    const body = (length: number) => {
      const empty = JSON.stringify({ model: 'gpt-test', messages: [{ role: 'user', content: '' }] })
      return JSON.stringify({ model: 'gpt-test', messages: [{ role: 'user', content: 'x'.repeat(length - empty.length) }] })
    }
    const writer = log()
    await writer.record(input(range(1, 10), { original_text: body(SPILL_THRESHOLD_BYTES) }))
    expect(bucket.objects.size).toBe(0)
    await writer.record(input(range(100, 110), { agent: 'other', original_text: body(SPILL_THRESHOLD_BYTES + 1) }))
    expect(bucket.objects.size).toBe(1)
    expect((await log().get(1))?.original_request).toEqual(JSON.parse(body(SPILL_THRESHOLD_BYTES + 1)))
  })

  it('token arrays over the spill threshold go to the bucket and read back exactly (also as a pre-v2 row)', async () => {
    const { sql, bucket, log } = openLog()
    const n = SPILL_THRESHOLD_BYTES / 4 + 1
    const prompt = range(0, n)
    const response = Uint32Array.from(range(5, n + 5))
    const logprobs = Float64Array.from(response, (_, i) => -i / n)
    const writer = log()
    await writer.record(input(prompt, { response_token_ids: response, response_logprobs: logprobs }))
    await writer.record(input([...prompt, ...range(0, n)]))
    expect([...bucket.objects.keys()].map((key) => key.split('/').at(-1)).sort()).toEqual([
      'logprobs',
      'prompt_suffix',
      'prompt_suffix',
      'response_tokens',
    ])
    const check = async () => {
      const first = await log().get(0)
      // 131k values each: compared in a loop (`toEqual` walked them at a few µs each, most of this test's time).
      expect(firstDifference(first?.prompt_token_ids, prompt)).toBeNull()
      expect(firstDifference(first?.response_token_ids, response)).toBeNull()
      expect(firstDifference(first?.response_logprobs, logprobs)).toBeNull()
      expect((await log().get(1))?.prompt_token_ids).toHaveLength(2 * n)
    }
    await check()
    sql.run('UPDATE rg_completions SET request_length = NULL, original_length = NULL')
    await check()
  })

  it('a body coded against its own original (same dialect) reads back exactly, also as a pre-v2 row', async () => {
    const { sql, log } = openLog()
    const writer = log()
    const messages: { role: string; content: string }[] = [{ role: 'user', content: 'task' }]
    const inputs: CompletionInput[] = []
    for (let turn = 0; turn < 4; turn++) {
      const body = { model: 'gpt-test', messages, tools: [{ name: 'bash' }] }
      inputs.push(
        input(range(1, 20 + turn * 10), {
          original_text: JSON.stringify(body),
          // Only the head differs from the original; each turn adds far more than that.
          request_text: JSON.stringify({ return_token_ids: true, ...body, model: 'Qwen/Qwen3-8B' }),
        }),
      )
      await writer.record(inputs.at(-1) as CompletionInput)
      messages.push({ role: 'assistant', content: `answer ${turn}` }, { role: 'tool', content: `output ${turn} `.repeat(30) })
    }
    const bases = sql.all<{ request_base: number }>('SELECT request_base FROM rg_completions ORDER BY seq')
    expect(bases.map((row) => row.request_base)).toEqual([1, 1, 1, 1])
    for (const legacy of [false, true]) {
      if (legacy) sql.run('UPDATE rg_completions SET request_length = NULL, original_length = NULL')
      for (const seq of [3, 1, 2, 0]) {
        const cold = log()
        const record = await cold.get(seq)
        const sent = JSON.parse((inputs[seq] as CompletionInput).request_text)
        expect(record?.request).toEqual({ ...sent, return_token_ids: undefined })
        expect(JSON.parse(await cold.requestText(seq))).toEqual(sent)
        expect(record?.original_request).toEqual(JSON.parse((inputs[seq] as CompletionInput).original_text))
      }
    }
  })
})

describe('completion log: reads', () => {
  it('message index: a streamed build reads each request from its parent’s messages and the new ones, whatever the coding', async () => {
    // `own`: the body sent is the harness's with the model renamed (coded against its original, the same edit
    // each turn); `edit`: that, but turn 4 renames the model differently; `translated`: another dialect
    // (coded against the parent's body).
    for (const served of ['own', 'edit', 'translated'] as const) {
      const { log } = openLog()
      const writer = log()
      const messages: { role: string; content: string }[] = [
        { role: 'system', content: 'sys' },
        { role: 'user', content: 'task' },
      ]
      const sent: unknown[] = []
      for (let turn = 0; turn < 8; turn++) {
        messages.push({ role: 'assistant', content: `a${turn}` }, { role: 'tool', content: `out ${turn} `.repeat(4) })
        const model = served === 'edit' && turn === 4 ? 'Qwen/Qwen3-8B-other' : 'Qwen/Qwen3-8B'
        const body = { model, messages }
        const original =
          served === 'translated'
            ? JSON.stringify({
                system: 'sys',
                messages: messages.slice(1).map((m) => ({ role: m.role, content: [{ type: 'text', text: m.content }] })),
              })
            : JSON.stringify({ model: 'gpt-test', messages })
        sent.push(body.messages.map((m) => ({ ...m })))
        await writer.record(input(range(1, 20 + turn * 6), { original_text: original, request_text: JSON.stringify(body) }))
      }
      const source = new LogRecords(log())
      for (const record of await source.open()) {
        await source.load(record)
        expect(record.request.messages, `${served} ${record.seq}`).toEqual(sent[record.seq])
        source.reduce(record)
      }
      // The renamed model (another key than messages) makes turns 4 and 5 read whole.
      expect(source.wholeRequestParses, served).toBe(served === 'edit' ? 3 : 1)
      expect(source.indexedLoads, served).toBe(served === 'edit' ? 5 : 7)
    }
  })

  it('a record whose delta base is gone from storage fails naming the missing completion (v2 and pre-v2 rows)', async () => {
    const { sql, log } = openLog()
    const writer = log()
    for (let turn = 0; turn < 3; turn++) await writer.record(input(range(1, 20 + turn * 10), { prompt_token_text: null }))
    expect((await log().get(2))?.prompt_token_ids).toEqual(range(1, 40))
    sql.run('DELETE FROM rg_completions WHERE seq = 1')
    await expect(log().get(2)).rejects.toThrow('completion 1 missing')
    sql.run('UPDATE rg_completions SET request_length = NULL, original_length = NULL')
    await expect(log().get(2)).rejects.toThrow('completion 1 missing')
  })

  it('pages by an estimate of each record’s size (2 bytes a character, 5 an id, 9 a logprob, 4 KiB overhead)', async () => {
    const { log } = openLog()
    const writer = log()
    const first = input(range(1, 101), { response_message: { role: 'assistant', content: 'hello there' } })
    await writer.record(first)
    await writer.record(input(range(1, 121)))
    const estimate =
      (first.request_text.length + first.original_text.length) * 2 +
      (100 + 3) * 5 +
      3 * 9 +
      JSON.stringify(first.response_message).length * 2 +
      4096
    const reader = log()
    expect((await reader.list(-1, 10, estimate)).map((record) => record.seq)).toEqual([0])
    expect((await reader.list(-1, 10, estimate + 1)).map((record) => record.seq)).toEqual([0, 1])
  })

  it('response messages: at most 100 ids bound per statement (the Durable Object SQLite limit)', async () => {
    const db = new DatabaseSync(':memory:')
    const executor = nodeSqlExecutor(db)
    let most = 0
    const sql = new Sql({
      exec(query: string, ...bindings: SqlValue[]) {
        most = Math.max(most, bindings.length)
        return executor.exec(query, ...bindings)
      },
    })
    ensureSchema(sql)
    const log = new CompletionLog(sql, new BlobStore(new MemoryBucket()), 'ses_bases')
    for (let n = 0; n < 250; n++)
      await log.record(completionInput({ completion_id: `m${n}`, response_message: { role: 'assistant', content: `${n}` } }))
    most = 0
    const found = log.responseMessages(Array.from({ length: 250 }, (_, n) => `m${n}`))
    expect(Object.keys(found)).toHaveLength(250)
    expect(most).toBe(100)
  })
})
