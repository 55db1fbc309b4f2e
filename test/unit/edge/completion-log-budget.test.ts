/**
 * The completion logs of an isolate share one memory budget for their delta bases (`base-cache-budget.ts`),
 * over node:sqlite: the bases all logs hold stay within it (also the bytes added when a base's message
 * layout or prompt text is first worked out); a session whose main agent and sub-agent take turns, with
 * large bodies and other sessions busy on the same budget, never walks a chain back to rebuild an agent's
 * newest base; and what is stored does not depend on the budget (a base is chosen from storage only).
 */
import { describe, expect, it } from 'vitest'
import { chatBody } from '../../../bench/lib/chat-bodies.ts'
import { MemoryBucket, nodeSql, nodeSqlExecutor } from '../../../scripts/lib/node-sqlite.ts'
import { BASE_BUDGET_BYTES, BASE_REST_BYTES, BaseBudget, isolateBudget } from '../../../src/durable/session/base-cache-budget.ts'
import { BlobStore } from '../../../src/durable/session/blob-store.ts'
import { CompletionLog } from '../../../src/durable/session/completion-log.ts'
import type { CompletionInput } from '../../../src/durable/session/record.ts'
import { ensureSchema } from '../../../src/durable/session/schema.ts'
import { Sql } from '../../../src/durable/session/sql.ts'
import { completionInput } from '../../support/records.ts'

/**
 * One agent's conversation with large bodies: a `head`-character first message, then each turn adds an
 * answer and a tool output of ~`growth` characters, and its prompt ids grow alike (ids `offset` + i).
 */
function* agentTurns(
  agent: string,
  turns: number,
  head: number,
  growth: number,
  offset: number,
  asText = false,
): Generator<CompletionInput> {
  const messages: { role: string; content: string }[] = [
    { role: 'system', content: `You are ${agent}. ${'x'.repeat(head)}` },
    { role: 'user', content: `Task for ${agent}.` },
  ]
  const prompt: number[] = Array.from({ length: Math.ceil(head / 4) }, (_, i) => offset + (i % 40_000))
  for (let turn = 0; turn < turns; turn++) {
    const ids = Uint32Array.from(prompt)
    yield completionInput({
      completion_id: `${agent}_${offset}_${turn}`,
      agent,
      prompt_token_ids: asText ? null : ids,
      ...(asText ? { prompt_token_text: JSON.stringify(Array.from(ids)) } : {}),
      request_text: JSON.stringify({ model: 'Qwen/Qwen3-8B', messages }),
      original_text: JSON.stringify({ model: 'gpt-test', messages }),
    })
    messages.push({ role: 'assistant', content: `${agent} turn ${turn}` }, { role: 'tool', content: `${turn} `.repeat(growth / 2) })
    for (let i = 0; i < growth / 4; i++) prompt.push(offset + ((turn * 131 + i) % 40_000))
  }
}

/** A main agent's and a sub-agent's turns, taking turns (main, sub, main, sub, …). */
function interleaved(turns: number, head: number, growth: number, asText = false): CompletionInput[] {
  const main = [...agentTurns('main', turns, head, growth, 1000, asText)]
  const sub = [...agentTurns('sub', turns, head, growth, 60_000, asText)]
  return main.flatMap((input, i) => [input, sub[i] as CompletionInput])
}

/** A log over its own node:sqlite database whose chain reads are counted. */
let logIds = 0

/** Each counted log is a session of its own (caches are named by session: `BaseCache.key`). */
function countedLog(options: { budget?: BaseBudget; requestEdits?: boolean } = {}) {
  const sessionId = `ses_budget_${logIds++}`
  const { db } = nodeSql()
  const inner = nodeSqlExecutor(db)
  let chainReads = 0
  const sql = new Sql({
    exec(query, ...bindings) {
      // A chain walk: a batch of ancestors, or one row rebuilt by seq.
      if (query.includes('WITH RECURSIVE') || query.includes('FROM rg_completions WHERE seq = ?')) chainReads++
      return inner.exec(query, ...bindings)
    },
  })
  ensureSchema(sql)
  const bucket = new MemoryBucket()
  const open = () => new CompletionLog(sql, new BlobStore(bucket), sessionId, options)
  return { sql, open, chainReads: () => chainReads }
}

function storedRows(sql: Sql): unknown[] {
  return sql
    .all('SELECT * FROM rg_completions ORDER BY seq')
    .map((row) =>
      Object.fromEntries(
        Object.entries(row).map(([key, value]) => [key, value instanceof ArrayBuffer ? Buffer.from(value).toString('hex') : value]),
      ),
    )
}

describe('completion logs share one budget for their delta bases', () => {
  it('the bases of many logs stay within it, the lazily added bytes (layouts, prompt texts) charged too', async () => {
    // ~1 MB a base at the end (two ~200 KB bodies at 2 bytes a character, ~50k prompt ids).
    const limit = 6 * 1024 * 1024
    const budget = new BaseBudget(limit)
    const sessions = Array.from({ length: 10 }, (_, i) => ({
      log: countedLog({ budget }),
      inputs: [...agentTurns('main', 4, 150_000, 20_000, 1000 + i, i % 2 === 1)],
    }))
    const logs = sessions.map((session) => session.log.open())
    let peak = 0
    for (let turn = 0; turn < 4; turn++) {
      for (const [i, session] of sessions.entries()) {
        // Every other log is woken before this turn: its base is rebuilt from storage and its layout
        // (and, for prompts sent as text, its prompt text) is added once the record asks for it.
        if (turn === 2 && i % 2 === 0) logs[i] = session.log.open()
        await (logs[i] as CompletionLog).record(session.inputs[turn] as CompletionInput)
        const held = logs.reduce((sum, log) => sum + log.cachedBytes, 0)
        peak = Math.max(peak, held)
        expect(held, `turn ${turn}, log ${i}`).toBeLessThanOrEqual(limit)
      }
    }
    // The budget was the bound (not a smaller per-log one), and the accounting agrees with the logs'
    // (the replaced logs' caches hold their last entries until evicted: count them through the budget).
    expect(peak).toBeGreaterThan(limit * 0.8)
    expect(budget.bytes).toBeLessThanOrEqual(limit)
    expect(budget.evictions).toBeGreaterThan(0)
    // Reading records back (bases rebuilt from storage) keeps to it as well.
    for (const session of sessions.slice(0, 4)) await session.log.open().get(1)
    expect(budget.bytes).toBeLessThanOrEqual(limit)
  })

  it('logs opened without a budget share the isolate’s', async () => {
    const before = isolateBudget.bytes
    const logs = Array.from({ length: 3 }, () => countedLog().open())
    for (const [i, log] of logs.entries()) for (const input of agentTurns('main', 2, 20_000, 2000, 1000 + i)) await log.record(input)
    const held = logs.reduce((sum, log) => sum + log.cachedBytes, 0)
    expect(held).toBeGreaterThan(0)
    expect(isolateBudget.bytes - before).toBe(held)
    expect(isolateBudget.limit).toBe(BASE_BUDGET_BYTES)
  })

  for (const asText of [false, true]) {
    it(`a main agent and a sub-agent taking turns, other sessions busy: no chain walk for an agent’s newest base (${asText ? 'ids as text' : 'ids'})`, async () => {
      // Room for about four of the session's bases: its two protected ones, the two being recorded, little else.
      const budget = new BaseBudget(4 * 1024 * 1024)
      const session = countedLog({ budget })
      const others = Array.from({ length: 3 }, (_, i) => ({
        log: countedLog({ budget }),
        turns: agentTurns('main', 24, 100_000, 10_000, 7 + i),
      }))
      const otherLogs = others.map((other) => other.log.open())
      const log = session.open()
      const inputs = interleaved(12, 100_000, 10_000, asText)
      for (const [i, input] of inputs.entries()) {
        await log.record(input)
        // Another session's turn between every two of this one's: its new bases push on the same budget.
        const other = i % others.length
        await (otherLogs[other] as CompletionLog).record(others[other]?.turns.next().value as CompletionInput)
      }
      expect(budget.evictions, 'the budget was under pressure').toBeGreaterThan(20)
      expect(session.chainReads()).toBe(0)
      // Every turn past each agent's first was delta-coded against that agent's previous turn.
      const placements = session.sql.all<{ seq: number; prompt_parent: number | null }>(
        'SELECT seq, prompt_parent FROM rg_completions ORDER BY seq',
      )
      expect(placements.slice(2).every((row) => row.prompt_parent === row.seq - 2)).toBe(true)
    })
  }

  it('sixteen busy 524 KB sessions (the bench stub’s 262k prompt ids as text, the edge’s upstream edit) keep their newest bases within the isolate budget', async () => {
    // `bench:gateway-ab --sizes 524KB --concurrency 16`: each session sends the same body and gets the same
    // ids every call. Bases charged 5.6 MiB did not fit 16 to 64 MiB, and every call walked its chain back.
    const budget = new BaseBudget(BASE_BUDGET_BYTES, { restLimit: BASE_REST_BYTES })
    const body = JSON.stringify(chatBody(524 * 1024))
    const end = body.lastIndexOf('}')
    const promptText = JSON.stringify(Array.from({ length: 262_144 }, (_, i) => (i * 7919) % 151_000))
    const sessions = Array.from({ length: 16 }, () => countedLog({ budget }))
    const logs = sessions.map((session) => session.open())
    let call = 0
    const record = async (log: CompletionLog) =>
      log.record(
        completionInput({
          completion_id: `bench_${call++}`,
          prompt_token_ids: null,
          prompt_token_text: promptText,
          original_text: body,
          request_text: '',
          request_delta: { prefix: end, suffix: 0, middle: ',"stream":false,"logprobs":1,"model":"Qwen/Qwen3-8B"}' },
        }),
      )
    for (let round = 0; round < 3; round++) for (const log of logs) await record(log)
    expect(sessions.map((session) => session.chainReads())).toEqual(sessions.map(() => 0))
    // workerd drops idle objects and makes new ones in the same isolate (the benchmark's variants take turns):
    // each new object walks its chain back once, and its base is not evicted for the old objects' any more.
    for (let round = 0; round < 3; round++) {
      for (const [i, session] of sessions.entries()) logs[i] = session.open()
      for (const log of logs) await record(log)
      for (const log of logs) await record(log)
    }
    // One walk per new object: its row, then one batch of its ancestors.
    expect(sessions.map((session) => session.chainReads())).toEqual(sessions.map(() => 3 * 2))
    // What a base is charged now (the budget holds 16 newest bases and a few older ones).
    const perBase = logs[0]?.cachedBytes ?? 0
    expect(perBase / 2 ** 20).toBeLessThan(BASE_BUDGET_BYTES / 16 / 2 ** 20)
    expect(budget.bytes).toBeLessThanOrEqual(BASE_BUDGET_BYTES)
  })

  it('stores the same bytes whatever the budget (a base is chosen from storage, never from memory)', async () => {
    const inputs = interleaved(10, 40_000, 4000, true)
    const record = async (budget: BaseBudget) => {
      const { sql, open } = countedLog({ budget })
      const log = open()
      for (const input of inputs) await log.record(input)
      return storedRows(sql)
    }
    const ample = await record(new BaseBudget(Number.POSITIVE_INFINITY))
    // A budget of one byte: only the entry just added stays, every other base is rebuilt from storage.
    const starved = new BaseBudget(1)
    expect(await record(starved)).toEqual(ample)
    expect(starved.evictions).toBeGreaterThan(inputs.length)
    expect(ample.filter((row) => (row as { prompt_parent: number | null }).prompt_parent !== null)).toHaveLength(inputs.length - 2)
  })
})
