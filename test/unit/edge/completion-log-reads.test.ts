/**
 * The completion log's read side over node:sqlite: every field of a record as stored, paging (`list` by
 * count and by size, `all`, `stream`), headers, the served request (capture keys and streaming removed) and the sent body,
 * lookups by id and seq, the response messages the edge restores, duplicates and storage figures.
 */
import { describe, expect, it } from 'vitest'
import { MemoryBucket, nodeSql } from '../../../scripts/lib/node-sqlite.ts'
import { BlobStore, SPILL_THRESHOLD_BYTES } from '../../../src/durable/session/blob-store.ts'
import { CompletionLog } from '../../../src/durable/session/completion-log.ts'
import { ensureSchema } from '../../../src/durable/session/schema.ts'
import { completionInput } from '../../support/records.ts'

function openLog() {
  const { sql } = nodeSql()
  ensureSchema(sql)
  const bucket = new MemoryBucket()
  return { sql, bucket, log: () => new CompletionLog(sql, new BlobStore(bucket), 'ses_reads') }
}

/** Turn `n` of one growing conversation (each prompt extends the previous prompt and answer). */
function turn(n: number, overrides: Parameters<typeof completionInput>[0] extends infer T ? Partial<T> : never = {}) {
  const prompt: number[] = []
  for (let k = 0; k <= n; k++) prompt.push(...Array.from({ length: 12 }, (_, i) => 100 + k * 20 + i))
  return completionInput({
    completion_id: `cmpl_${n}`,
    prompt_token_ids: Uint32Array.from(prompt),
    response_token_ids: Uint32Array.from([500 + n, 501 + n, 151645]),
    response_message: { role: 'assistant', content: `answer ${n}` },
    ...overrides,
  })
}

describe('completion log reads', () => {
  it('a record reads back with every field as recorded', async () => {
    const { log } = openLog()
    const request = {
      model: 'Qwen/Qwen3-8B',
      messages: [{ role: 'user', content: 'hi' }],
      stream: true,
      stream_options: { include_usage: true },
      return_token_ids: true,
      logprobs: true,
      top_logprobs: 0,
      temperature: 0.5,
    }
    const input = turn(0, {
      stream: true,
      status: 'failed',
      stop_reason: 151645,
      finish_reason: 'length',
      error: 'engine said no',
      warnings: [{ code: 'w', message: 'a warning' }],
      request_text: JSON.stringify(request),
      metadata: { k: 'v' },
    })
    const result = await log().record(input)
    expect(result).toMatchObject({ seq: 0, completion_id: 'cmpl_0', duplicate: false })
    expect(result.stored_bytes).toBeGreaterThan(0)
    expect(result.session_bytes).toBe(result.stored_bytes)
    const cold = log()
    const record = await cold.get(0)
    expect(record).toEqual({
      completion_id: 'cmpl_0',
      session_id: 'ses_reads',
      seq: 0,
      timestamp: input.timestamp,
      api: 'openai-chat',
      agent: 'main',
      model_requested: 'gpt-test',
      model_used: 'Qwen/Qwen3-8B',
      stream: true,
      status: 'failed',
      trainable: false,
      prompt_token_ids: Array.from(input.prompt_token_ids!),
      prompt_delta: null,
      response_token_ids: [500, 501, 151645],
      response_logprobs: [-0.5, -0.25, -0.125],
      finish_reason: 'length',
      stop_reason: 151645,
      // Served as the harness asked: no capture keys, no streaming keys.
      request: { model: 'Qwen/Qwen3-8B', messages: [{ role: 'user', content: 'hi' }], temperature: 0.5 },
      response_message: { role: 'assistant', content: 'answer 0' },
      original_request: JSON.parse(input.original_text),
      usage: input.usage,
      warnings: [{ code: 'w', message: 'a warning' }],
      error: 'engine said no',
      timing: input.timing,
      provenance: input.provenance,
      metadata: { k: 'v' },
    })
    // The body as sent upstream (capture keys included), for a streamed build.
    expect(JSON.parse(await cold.requestText(0))).toEqual(request)
    await expect(cold.requestText(5)).rejects.toThrow('completion 5 missing')
    expect(await cold.getById('cmpl_0')).toEqual(record)
    expect(await cold.getById('nope')).toBeNull()
    expect(await cold.get(1)).toBeNull()
    expect((await cold.list(-1, 10, Number.POSITIVE_INFINITY, { withoutOriginal: true }))[0]!.original_request).toBeNull()
  })

  it('the same completion id twice is a duplicate: stored once', async () => {
    const { log } = openLog()
    const first = await log().record(turn(0))
    const again = await log().record(turn(0))
    expect(again).toMatchObject({ seq: first.seq, completion_id: 'cmpl_0', duplicate: true, stored_bytes: 0 })
    expect(log().count()).toBe(1)
  })

  it('pages by count and by size, in order; all and stream read everything', async () => {
    const { log } = openLog()
    const writer = log()
    for (let n = 0; n < 9; n++) await writer.record(turn(n))
    const reader = log()
    expect(reader.count()).toBe(9)
    expect((await reader.list()).map((r) => r.seq)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8])
    expect((await reader.list(2, 3)).map((r) => r.seq)).toEqual([3, 4, 5])
    expect((await reader.list(8)).map((r) => r.seq)).toEqual([])
    // By size: stops after the record that reaches the budget (never returns nothing while records remain).
    expect((await reader.list(-1, 100, 1)).map((r) => r.seq)).toEqual([0])
    const one = (await reader.list(-1, 1))[0]!
    const size = JSON.stringify(one).length
    expect((await reader.list(-1, 100, 4096 + size * 3)).length).toBeGreaterThanOrEqual(1)
    expect((await reader.list(-1, 100, 4096 + size * 3)).length).toBeLessThan(9)
    expect((await reader.all()).map((r) => r.seq)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8])
    const streamed: number[] = []
    for await (const record of reader.stream({}, 4)) streamed.push(record.seq)
    expect(streamed).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8])
    const exact: number[] = []
    for await (const record of reader.stream({}, 3)) exact.push(record.seq)
    expect(exact).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8])
    // Later turns name the turn they extend.
    expect((await reader.get(3))!.prompt_delta).toEqual({ parent_seq: 2, shared_prefix_len: 3 * 12 + 0 })
  })

  it('all() pages past 200 records', async () => {
    const { log } = openLog()
    const writer = log()
    for (let n = 0; n < 205; n++) await writer.record(completionInput({ completion_id: `c${n}` }))
    expect((await log().all()).map((r) => r.seq)).toEqual(Array.from({ length: 205 }, (_, n) => n))
  })

  it('headers carry the small fields of every record', async () => {
    const { log } = openLog()
    const writer = log()
    await writer.record(turn(0))
    await writer.record(turn(1, { status: 'abandoned', agent: 'sub', api: 'anthropic' }))
    const [first, second] = log().headers()
    expect(first).toEqual({
      seq: 0,
      completion_id: 'cmpl_0',
      timestamp: expect.any(String),
      api: 'openai-chat',
      agent: 'main',
      model_requested: 'gpt-test',
      model_used: 'Qwen/Qwen3-8B',
      status: 'ok',
      trainable: true,
      timing: expect.objectContaining({ upstream_ms: 1, total_ms: 2 }),
    })
    expect(second).toMatchObject({ seq: 1, agent: 'sub', api: 'anthropic', status: 'abandoned', trainable: false })
  })

  it('response messages of ok completions by id (others absent), in batches past 100 ids', async () => {
    const { log } = openLog()
    const writer = log()
    for (let n = 0; n < 130; n++) {
      await writer.record(
        completionInput({
          completion_id: `c${n}`,
          status: n === 5 ? 'failed' : 'ok',
          response_message: n === 6 ? null : { role: 'assistant', content: `m${n}` },
        }),
      )
    }
    const ids = Array.from({ length: 130 }, (_, n) => `c${n}`)
    const messages = log().responseMessages([...ids, 'c1', 'unknown'])
    expect(Object.keys(messages)).toHaveLength(128)
    expect(messages.c0).toEqual({ role: 'assistant', content: 'm0' })
    expect(messages.c129).toEqual({ role: 'assistant', content: 'm129' })
    expect(messages.c5).toBeUndefined()
    expect(messages.c6).toBeUndefined()
    expect(log().responseMessages([])).toEqual({})
  })

  it('storage figures add up what the session holds', async () => {
    const { log } = openLog()
    expect(log().stats()).toEqual({
      completions: 0,
      prompt_tokens_total: 0,
      unique_prompt_tokens: 0,
      output_tokens: 0,
      token_bytes: 0,
      text_bytes: 0,
      metadata_bytes: 0,
      spilled_objects: 0,
    })
    expect(log().sessionBytes()).toBe(0)
    const writer = log()
    // The writer's running figure grows by what each record stored.
    let running = 0
    for (let n = 0; n < 3; n++) {
      const result = await writer.record(turn(n))
      running += result.stored_bytes
      expect(result.session_bytes).toBe(running)
    }
    const stats = log().stats()
    expect(stats).toMatchObject({ completions: 3, prompt_tokens_total: 12 + 24 + 36, unique_prompt_tokens: 36, output_tokens: 9 })
    expect(stats.token_bytes).toBeGreaterThan(0)
    expect(stats.metadata_bytes).toBeGreaterThan(0)
    expect(log().sessionBytes()).toBe(stats.token_bytes + stats.text_bytes + stats.metadata_bytes)
    // A cold log counts from SQLite (it also counts ids and timestamps, which the running figure leaves out).
    expect(log().sessionBytes()).toBeGreaterThanOrEqual(running)
  })

  it('a field over the spill threshold goes to the bucket and reads back from a cold log', async () => {
    const { log, bucket } = openLog()
    const big = 'x'.repeat(SPILL_THRESHOLD_BYTES + 10)
    const small = turn(0)
    const input = turn(1, { original_text: JSON.stringify({ model: 'gpt-test', messages: [{ role: 'user', content: big }] }) })
    const writer = log()
    await writer.record(small)
    await writer.record(input)
    expect(bucket.objects.size).toBe(1)
    expect(log().stats().spilled_objects).toBe(1)
    const record = await log().get(1)
    expect(record!.original_request).toEqual(JSON.parse(input.original_text))
    expect((await log().get(0))!.original_request).toEqual(JSON.parse(small.original_text))
  })
})
