/**
 * The streamed prefix_merging build (records read lazily from the log, traces written in slices) against
 * the in-memory builder on the same records: byte-identical text on random sessions with drift, branches,
 * retries, sub-agents and excluded records, under several configs; and, in a child process under a
 * Durable Object's 128 MB heap, a 150k-token-context session finalizes with bounded heap growth to the
 * same bytes the in-memory builder gives.
 */
import { spawnSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { MemoryBucket, nodeSql, nodeSqlExecutor } from '../../../scripts/lib/node-sqlite.ts'
import type { CompletionRecord } from '../../../src/contract/completion-record.ts'
import { BlobStore } from '../../../src/durable/session/blob-store.ts'
import { CompletionLog } from '../../../src/durable/session/completion-log.ts'
import { PAGE_ROWS } from '../../../src/durable/session/forward-rows.ts'
import { LogRecords } from '../../../src/durable/session/log-records.ts'
import type { CompletionInput } from '../../../src/durable/session/record.ts'
import { ensureSchema, SCHEMA_VERSION } from '../../../src/durable/session/schema.ts'
import { SliceMemo } from '../../../src/durable/session/slice-memo.ts'
import { Sql } from '../../../src/durable/session/sql.ts'
import { JSON_ARRAY_SLICE, JSON_OBJECT_SLICE, jsonChunks, trajectoryChunks } from '../../../src/durable/session/trajectory-stream.ts'
import { applyMergePreset, prefixMergingConfigSchema, reconstructTrajectory } from '../../../src/reconstruct/index.ts'
import { startPrefixMerging } from '../../../src/reconstruct/prefix-merging.ts'
import { completionInput, growingSession, growingSessionInputs } from '../../support/records.ts'
import { type SimOptions, simulateSession } from '../reconstruct-support/simulate-tokens.ts'

const SESSION = { session_id: 'ses_stream', task_id: 'task-stream', metadata: { group_id: 'g1' } }

/** `served`: the body sent upstream differs from the harness's (served model name, capture keys), as through the edge. */
function inputOf(record: CompletionRecord, served = false): CompletionInput {
  const upstream = served
    ? { ...record.request, model: 'Qwen/Qwen3-8B-served', logprobs: true, return_tokens_as_token_ids: true }
    : record.request
  return completionInput({
    completion_id: record.completion_id,
    timestamp: record.timestamp,
    agent: record.agent,
    status: record.status,
    prompt_token_ids: record.status === 'ok' || record.prompt_token_ids.length ? Uint32Array.from(record.prompt_token_ids) : null,
    response_token_ids: Uint32Array.from(record.response_token_ids),
    response_logprobs: record.response_logprobs === null ? null : Float64Array.from(record.response_logprobs),
    finish_reason: record.finish_reason,
    stop_reason: record.stop_reason,
    request_text: JSON.stringify(upstream),
    original_text: JSON.stringify(record.original_request ?? record.request),
    response_message: record.response_message,
    metadata: record.metadata,
  })
}

async function logOf(inputs: Iterable<CompletionInput>, path = ':memory:', options: { requestEdits?: boolean } = {}) {
  const { sql, db } = nodeSql(path)
  // A file is only handed to a child process once closed: no fsync per commit (1,000 records waited ~8 s on the
  // disk for 1.4 s of CPU, and far longer while other processes wrote).
  if (path !== ':memory:') db.exec('PRAGMA synchronous = OFF')
  ensureSchema(sql)
  const log = new CompletionLog(sql, new BlobStore(new MemoryBucket()), SESSION.session_id, options)
  for (const input of inputs) await log.record(input)
  return { log, db }
}

async function streamed(log: CompletionLog, config: Record<string, unknown>): Promise<string> {
  let text = ''
  for await (const chunk of trajectoryChunks(log, { builder: 'prefix_merging', config }, SESSION)) text += chunk
  return text.trim()
}

async function inMemory(log: CompletionLog, config: Record<string, unknown>): Promise<string> {
  return JSON.stringify(
    reconstructTrajectory(await log.all({ withoutOriginal: true }), { builder: 'prefix_merging', config, session: SESSION }),
  )
}

const simOptions: fc.Arbitrary<SimOptions> = fc.record({
  seed: fc.integer({ min: 1, max: 2 ** 31 - 1 }),
  mainTurns: fc.integer({ min: 1, max: 9 }),
  thinking: fc.constantFrom('off', 'on-replay', 'on-strip'),
  retokenizeRate: fc.constantFrom(0, 0.3, 1),
  nonce: fc.boolean(),
  subAgents: fc.integer({ min: 0, max: 2 }),
  labelSubAgents: fc.boolean(),
  sideCalls: fc.integer({ min: 0, max: 2 }),
  retryRate: fc.constantFrom(0, 0.2),
  abandonRate: fc.constantFrom(0, 0.2),
  truncateRate: fc.constantFrom(0, 0.2),
  compactAt: fc.option(fc.integer({ min: 1, max: 6 }), { nil: null }),
  noLogprobRate: fc.constantFrom(0, 0.1),
  deltaMode: fc.constantFrom('true', 'best', 'previous', 'none'),
})

const mergeConfig = fc.oneof(
  fc.record({ preset: fc.constantFrom('exact', 'tolerant', 'strict') }),
  fc.record({
    max_context_drift_tokens: fc.constantFrom(0, 16, 1_000_000),
    retry_policy: fc.constantFrom('keep_last', 'keep_first'),
    boundary_window_tokens: fc.constantFrom(4, 32),
  }),
)

describe('streamed prefix_merging', () => {
  it('equals the in-memory builder byte for byte on random sessions and configs', async () => {
    await fc.assert(
      fc.asyncProperty(simOptions, mergeConfig, fc.boolean(), async (options, config, served) => {
        const { records } = simulateSession(options)
        const { log } = await logOf(records.map((record) => inputOf(record, served)))
        expect(await streamed(log, config)).toBe(await inMemory(log, config))
      }),
      { numRuns: 60 },
    )
  }, 120_000)

  it('loads every request with the messages the log serves (appends, same-length history edits, served bodies)', async () => {
    // Bodies as the edge sends them: the harness's own, with only the model renamed, or with capture keys too.
    for (const served of ['own', 'model', 'keys'] as const) {
      const messages: { role: string; content: string }[] = [
        { role: 'system', content: 'sys' },
        { role: 'user', content: 'aaaa' },
      ]
      const inputs: CompletionInput[] = []
      for (let turn = 0; turn < 12; turn++) {
        // Turn 6 rewrites history in place (same length): the old array end still falls on a comma.
        if (turn === 6) messages[1] = { role: 'user', content: 'bbbb' }
        messages.push({ role: 'assistant', content: `a${turn}` }, { role: 'tool', content: `out ${turn}` })
        const original = JSON.stringify({ model: 'gpt-test', messages })
        inputs.push(
          completionInput({
            completion_id: `c${turn}`,
            prompt_token_ids: Uint32Array.from({ length: 20 + turn * 4 }, (_, i) => (turn >= 6 && i === 12 ? 999 : i)),
            original_text: original,
            request_text:
              served === 'own'
                ? original
                : JSON.stringify({ model: 'Qwen/Qwen3-8B', messages, ...(served === 'keys' ? { logprobs: true } : {}) }),
          }),
        )
      }
      const { log } = await logOf(inputs)
      const source = new LogRecords(log)
      for (const record of await source.open()) {
        await source.load(record)
        expect(record.request.messages).toEqual((await log.get(record.seq))?.request.messages)
        source.reduce(record)
      }
      // The first body is read whole; the others from their parent's messages and the new ones (the history
      // edit too: its new text is the edited message and those after it).
      expect(source.wholeRequestParses).toBe(1)
      expect(source.indexedLoads).toBe(inputs.length - 1)
    }
  })

  it('loads bodies of any shape from the message index: appends, rewrites, dropped turns, changed keys, spaces', async () => {
    type Op = 'append' | 'edit' | 'drop' | 'tools' | 'spaced' | 'same'
    const ops = fc.array(fc.constantFrom<Op>('append', 'append', 'append', 'edit', 'drop', 'tools', 'spaced', 'same'), {
      minLength: 2,
      maxLength: 14,
    })
    await fc.assert(
      fc.asyncProperty(ops, fc.constantFrom('own', 'model', 'keys'), async (steps, served) => {
        const messages: Record<string, unknown>[] = [
          { role: 'system', content: 'sys' },
          { role: 'user', content: 'go' },
        ]
        let tools: unknown[] = [{ type: 'function', function: { name: 'bash' } }]
        let space: string | undefined
        const prompt: number[] = Array.from({ length: 12 }, (_, i) => i + 1)
        const inputs: CompletionInput[] = []
        for (const [turn, op] of steps.entries()) {
          if (op === 'append') messages.push({ role: 'assistant', content: `a${turn} "x"}` }, { role: 'tool', content: `out ${turn} ☃` })
          if (op === 'edit' && messages.length > 2) messages[messages.length - 2] = { role: 'assistant', content: `edited ${turn}` }
          if (op === 'drop' && messages.length > 3) messages.splice(-2, 2)
          if (op === 'tools') tools = [...tools, { type: 'function', function: { name: `t${turn}` } }]
          if (op === 'spaced') space = space ? undefined : ' '
          const body = (model: string, keys: boolean) =>
            JSON.stringify({ model, messages, tools, ...(keys ? { logprobs: true } : {}) }, null, space)
          const original = body('gpt-test', false)
          prompt.push(100 + turn, 200 + turn)
          inputs.push(
            completionInput({
              completion_id: `c${turn}`,
              prompt_token_ids: Uint32Array.from(prompt),
              original_text: original,
              request_text: served === 'own' ? original : body('Qwen/Qwen3-8B', served === 'keys'),
            }),
          )
        }
        const { log } = await logOf(inputs)
        const source = new LogRecords(log)
        for (const record of await source.open()) {
          await source.load(record)
          const expected = (await log.get(record.seq))?.request
          expect(record.request.messages).toEqual(expected?.messages)
          expect(record.request.tools).toEqual(expected?.tools)
          source.reduce(record)
        }
        // Appends onto an unchanged body are read from the index, never whole.
        if (steps.every((op) => op === 'append')) expect(source.wholeRequestParses).toBe(1)
      }),
      { numRuns: 80 },
    )
  })

  it('finalizes a session written before schema v3 (no message index) after the migration, and indexes new turns', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'rollgate-v2-'))
    try {
      const path = join(dir, 'session.sqlite')
      const inputs = growingSession(30, 400, 60, 20)
      // A v2 session: written in the v3 layout, then the v3 and v4 columns dropped and the version set back.
      const { db } = await logOf(inputs.slice(0, 20), path, { requestEdits: false })
      db.exec('ALTER TABLE rg_completions DROP COLUMN request_messages')
      db.exec('ALTER TABLE rg_completions DROP COLUMN request_edits')
      db.exec('UPDATE rg_schema SET version = 2')
      db.close()
      const { sql } = nodeSql(path)
      ensureSchema(sql)
      expect(sql.first<{ version: number }>('SELECT version FROM rg_schema')?.version).toBe(SCHEMA_VERSION)
      const log = new CompletionLog(sql, new BlobStore(new MemoryBucket()), SESSION.session_id)
      for (const input of inputs.slice(20)) await log.record(input)
      const indexed = sql.all<{ seq: number }>('SELECT seq FROM rg_completions WHERE request_messages IS NOT NULL')
      expect(indexed.map((row) => row.seq)).toEqual(Array.from({ length: 10 }, (_, i) => 20 + i))
      for (const config of [{ preset: 'tolerant' }, { preset: 'exact' }]) {
        expect(await streamed(log, config)).toBe(await inMemory(log, config))
      }
      const source = new LogRecords(log)
      for (const record of await source.open()) {
        await source.load(record)
        source.reduce(record)
      }
      // Old rows are read whole (incrementally against the previous body); new rows from the index.
      expect(source.indexedLoads).toBe(10)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it('reads spilled token fields (a prompt suffix over 512 KiB lives in R2) to the in-memory builder bytes', async () => {
    // 140k new prompt tokens (560 KiB packed) in the first turn, then a normal turn on top of it.
    const inputs = [...growingSessionInputs(3, 140_000, 50, 10)]
    const { log } = await logOf(inputs)
    expect(log.stats().spilled_objects).toBeGreaterThan(0)
    for (const config of [{ preset: 'tolerant' }, { preset: 'exact' }])
      expect(await streamed(log, config)).toBe(await inMemory(log, config))
  })

  it('writes long arrays in slices, with exactly JSON.stringify text', () => {
    const trace = { prompt_ids: Array.from({ length: 2 * JSON_ARRAY_SLICE + 7 }, (_, i) => i), skipped: undefined, mask: [1, 0], name: 'x' }
    const chunks = [...jsonChunks(trace)]
    expect(chunks.join('')).toBe(JSON.stringify(trace))
    expect(Math.max(...chunks.map((chunk) => chunk.length))).toBeLessThan(JSON_ARRAY_SLICE * 8)
  })

  it('reuses the JSON of slices the previous trace wrote, only where every element is the same', () => {
    const message = (i: number) => ({ role: 'tool', content: `out ${i}` })
    const messages = Array.from({ length: 3 * JSON_OBJECT_SLICE + 5 }, (_, i) => message(i))
    const ids = Array.from({ length: 2 * JSON_ARRAY_SLICE + 3 }, (_, i) => i % 1000)
    const first = { prompt_ids: ids, prompt_messages: messages }
    // The next trace: the same prefix, one token and one message changed (an equal copy is not the same object).
    const ids2 = [...ids, 7, 8]
    ids2[JSON_ARRAY_SLICE + 5] = -0.5
    const messages2 = [...messages, message(999)]
    messages2[JSON_OBJECT_SLICE + 1] = { role: 'tool', content: 'changed' }
    const memo = new SliceMemo()
    expect([...jsonChunks(first, memo)].join('')).toBe(JSON.stringify(first))
    expect(memo.hits).toBe(0)
    const second = { prompt_ids: ids2, prompt_messages: messages2 }
    expect([...jsonChunks(second, memo)].join('')).toBe(JSON.stringify(second))
    // Slice 0 of the ids and slices 0 and 2 of the messages are reused; the changed and the longer ones are not.
    expect(memo.hits).toBe(3)
  })

  it('reads each prompt from the log once on a growing session (the cache follows the delta chain)', async () => {
    const { log } = await logOf(growingSessionInputs(300, 400, 60, 20))
    const source = new LogRecords(log)
    const records = await source.open()
    let tokens = 0
    for (const record of records) tokens += record.prompt_token_ids.length
    expect(source.promptLoads).toBe(records.length)
    for (const record of records.slice(-5))
      expect(Array.from(record.prompt_token_ids)).toEqual((await log.get(record.seq))?.prompt_token_ids)
    expect(tokens).toBeGreaterThan(0)
  })

  it('reads prompts and message middles a page of rows per statement, not one statement per record', async () => {
    // Short middles (a 400-character tool result a turn) come with the small fields; long ones (6 KB) are read in
    // pages. The upstream bodies here differ from the harness's in their model and tools only, so their new
    // messages are stored as copies of the original's (`request_edits`): those rows read the original's middle, in pages.
    const TURNS = 100
    for (const [toolRepeat, requestEdits] of [
      [40, false],
      [600, false],
      [40, true],
      [600, true],
    ] as const) {
      const { db } = nodeSql()
      const executor = nodeSqlExecutor(db)
      let selects = 0
      const sql = new Sql({
        exec(query, ...bindings) {
          if (/^\s*SELECT/i.test(query)) selects++
          return executor.exec(query, ...bindings)
        },
      })
      ensureSchema(sql)
      const log = new CompletionLog(sql, new BlobStore(new MemoryBucket()), SESSION.session_id, { requestEdits })
      for (const input of growingSession(TURNS, 400, 60, 20, toolRepeat)) await log.record(input)
      const expected = await inMemory(log, { preset: 'tolerant' })
      selects = 0
      expect(await streamed(log, { preset: 'tolerant' })).toBe(expected)
      // One read of the small fields, the first body (read whole), pages of prompt rows, pages of middles
      // (long ones only): 100 records were 200 statements, one row at a time.
      expect(PAGE_ROWS).toBeGreaterThanOrEqual(32)
      const pages = Math.ceil(TURNS / PAGE_ROWS)
      const middlePages = toolRepeat > 40 || requestEdits ? 2 * pages : 0
      expect(selects, `tool result ×${toolRepeat}, coded ${requestEdits}`).toBeLessThanOrEqual(2 + pages + middlePages)
    }
  })

  it('a background build (finalize) gives the event loop a turn every 256 records, a read one every 8; same text', async () => {
    const { log } = await logOf(growingSessionInputs(300))
    for (const config of [{ preset: 'tolerant' }, { strict: true }]) {
      const turns: Record<string, number> = {}
      const texts: Record<string, string> = {}
      for (const pace of ['reader', 'background'] as const) {
        const real = globalThis.setTimeout
        let timers = 0
        globalThis.setTimeout = ((handler: () => void, ms?: number) => {
          timers++
          return real(handler, ms)
        }) as typeof setTimeout
        let text = ''
        try {
          for await (const chunk of trajectoryChunks(log, { builder: 'prefix_merging', config }, SESSION, undefined, pace)) text += chunk
        } finally {
          globalThis.setTimeout = real
        }
        turns[pace] = timers
        texts[pace] = text
      }
      // 300 records: the first byte's turn and one per 8 routed; one per 256.
      expect(turns, JSON.stringify(config)).toEqual({ reader: 1 + Math.floor(300 / 8), background: 1 })
      expect(texts.background).toBe(texts.reader)
    }
  })

  it('appends a prompt to its parent in place only when nothing was appended there yet (two children of one prompt)', async () => {
    const base = Array.from({ length: 20 }, (_, i) => i + 1)
    const first = [...base, 100, 101]
    const prompts = [base, first, [...first, 5, 6, 7], [...first, 8, 9]]
    const { log, db } = await logOf(
      prompts.map((prompt, i) => completionInput({ completion_id: `c${i}`, prompt_token_ids: Uint32Array.from(prompt) })),
    )
    // Both c2 and c3 extend all of c1 (the log chose c2 as c3's base: same shared prefix, same suffix); c2 is
    // appended in place to c1's buffer (grown when c1 was appended to c0), so c3 must not be.
    db.exec('UPDATE rg_completions SET prompt_parent = 1 WHERE seq = 3')
    const source = new LogRecords(log)
    const records = await source.open()
    const read = records.map((record) => Array.from(record.prompt_token_ids))
    expect(read).toEqual(prompts)
    // The views handed out earlier still read their own tokens.
    expect(Array.from((records[2] as CompletionRecord).prompt_token_ids)).toEqual(prompts[2])
    expect(source.promptLoads).toBe(4)
  })

  it('keeps the request of a record that opens a trace for its build: no body is read twice', async () => {
    const main = growingSession(6, 400, 60, 20)
    const sub = growingSession(6, 300, 40, 10).map((input) => ({
      ...input,
      completion_id: `sub_${input.completion_id}`,
      agent: 'sub',
      prompt_token_ids: Uint32Array.from(input.prompt_token_ids ?? [], (id) => id + 7),
    }))
    const { log } = await logOf(main.flatMap((input, i) => [input, sub[i] as CompletionInput]))
    const source = new LogRecords(log)
    const run = startPrefixMerging(await source.open(), {
      config: prefixMergingConfigSchema.parse(applyMergePreset({ preset: 'tolerant' })),
    })
    for (const record of run.trainable) {
      await source.load(record)
      source.reduce(record, run.route(record))
    }
    const plan = run.finish()
    expect(plan.entries.length).toBeGreaterThanOrEqual(2)
    const reads = source.wholeRequestParses + source.indexedLoads
    const built = []
    for (const entry of plan.entries) {
      await source.load(entry.first)
      built.push(entry.build())
      source.reduce(entry.first)
    }
    expect(source.wholeRequestParses + source.indexedLoads).toBe(reads)
    expect(JSON.stringify(built)).toBe(JSON.stringify(JSON.parse(await inMemory(log, { preset: 'tolerant' })).traces))
  })

  it('finalizes a 150k-token-context session under a 128 MB heap to the in-memory builder bytes', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'rollgate-stream-'))
    try {
      const path = join(dir, 'session.sqlite')
      // 300 turns × 500 new tokens: a 153k-token final prompt; every prompt stored once would be 23 M tokens.
      const { log, db } = await logOf(growingSessionInputs(300, 3000, 500, 34), path)
      db.prepare("INSERT INTO rg_meta (key, value) VALUES ('session', ?)").run(JSON.stringify({ ...SESSION, created_at: '' }))
      const config = { preset: 'tolerant' }
      const expected = createHash('sha256')
        .update(` ${await inMemory(log, config)}`)
        .digest('hex')
      db.close()
      const run = spawnSync(
        process.execPath,
        ['--max-old-space-size=128', 'bench/lib/finalize-in-node.ts', path, 'prefix_merging', JSON.stringify(config)],
        { encoding: 'utf8', timeout: 120_000 },
      )
      expect(run.status, run.stderr.slice(-800)).toBe(0)
      const result = JSON.parse(run.stdout.trim().split('\n').at(-1) ?? '{}') as { sha256: string; heap_growth_mb: number }
      expect(result.sha256).toBe(expected)
      expect(result.heap_growth_mb).toBeLessThanOrEqual(64)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  }, 180_000)
})
