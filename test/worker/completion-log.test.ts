import { env, evictDurableObject, runInDurableObject } from 'cloudflare:test'
import { describe, expect, it } from 'vitest'
import type { SessionRpc } from '../../src/durable/session/session-object.ts'
import type { SessionConfig } from '../../src/durable/session/record.ts'
import { completionInput, growingSession } from '../support/records.ts'

function sessionConfig(sessionId: string): SessionConfig {
  return {
    session_id: sessionId,
    task_id: 'task-1',
    created_at: new Date().toISOString(),
    upstream: { url: 'http://127.0.0.1:8000', kind: 'vllm', served_model: null },
    policy_version: 3,
    metadata: { group_id: 'g1' },
  }
}

function stubFor(name: string) {
  return env.SESSIONS.get(env.SESSIONS.idFromName(name)) as unknown as SessionRpc
}

describe('SessionObject capture', () => {
  it('stores a growing session delta-coded and reconstructs every prompt exactly', async () => {
    const stub = stubFor('delta-roundtrip')
    await stub.create(sessionConfig('delta-roundtrip'))
    const inputs = growingSession(12)
    for (const input of inputs) await stub.record(input)
    const records = await stub.completions(-1, 100)
    expect(records).toHaveLength(12)
    records.forEach((record, i) => {
      const input = inputs[i]!
      expect(record.seq).toBe(i)
      expect(record.prompt_token_ids).toEqual(Array.from(input.prompt_token_ids!))
      expect(record.response_token_ids).toEqual(Array.from(input.response_token_ids!))
      expect(record.response_logprobs).toEqual(Array.from(input.response_logprobs!))
      expect(record.original_request).toEqual(JSON.parse(input.original_text))
      expect(record.trainable).toBe(true)
    })
    // Turn k is delta-coded against turn k-1, sharing its whole prompt.
    expect(records[5]!.prompt_delta).toEqual({ parent_seq: 4, shared_prefix_len: inputs[4]!.prompt_token_ids!.length })

    const summary = await stub.summary()
    const unique = summary!.storage.unique_prompt_tokens
    const total = inputs.reduce((sum, input) => sum + input.prompt_token_ids!.length, 0)
    // Linear storage: unique prompt tokens = first prompt + the growth of each later turn.
    expect(unique).toBe(inputs.at(-1)!.prompt_token_ids!.length)
    expect(total).toBeGreaterThan(unique * 5)
  })

  it('survives eviction: rows are in SQLite, and new deltas work after a cold start', async () => {
    const stub = stubFor('cold-start')
    await stub.create(sessionConfig('cold-start'))
    const inputs = growingSession(6)
    for (const input of inputs.slice(0, 3)) await stub.record(input)
    await evictDurableObject(stub as unknown as DurableObjectStub)
    await runInDurableObject(stub as unknown as DurableObjectStub, async (_instance, state) => {
      const rows = state.storage.sql.exec('SELECT COUNT(*) AS n FROM rg_completions').one() as { n: number }
      expect(rows.n).toBe(3)
    })
    for (const input of inputs.slice(3)) await stub.record(input)
    // After the wake the new completions are still delta-coded against the reloaded ones.
    const summary = await stub.summary()
    expect(summary!.storage.unique_prompt_tokens).toBe(inputs[5]!.prompt_token_ids!.length)
    const records = await stub.completions()
    expect(records.map((r) => r.prompt_token_ids.length)).toEqual(inputs.map((i) => i.prompt_token_ids!.length))
    expect(records[5]!.prompt_token_ids).toEqual(Array.from(inputs[5]!.prompt_token_ids!))
  })

  it('reads prompt ids sent as the engine’s JSON text into the same records, across an eviction', async () => {
    const asIds = stubFor('ids-parsed')
    const asText = stubFor('ids-text')
    await asIds.create(sessionConfig('ids-parsed'))
    await asText.create(sessionConfig('ids-text'))
    const inputs = growingSession(8)
    for (const [turn, input] of inputs.entries()) {
      // After the wake the session has no engine text of the reloaded prompts: it writes them canonically.
      if (turn === 4) await evictDurableObject(asText as unknown as DurableObjectStub)
      const json = JSON.stringify(Array.from(input.prompt_token_ids!))
      await asIds.record(input)
      await asText.record({ ...input, prompt_token_ids: null, prompt_token_text: turn % 3 === 2 ? json.replaceAll(',', ', ') : json })
    }
    const served = (records: Awaited<ReturnType<SessionRpc['completions']>>) => records.map(({ session_id, ...rest }) => rest)
    expect(served(await asText.completions(-1, 100))).toEqual(served(await asIds.completions(-1, 100)))
    expect((await asText.summary())!.storage).toEqual((await asIds.summary())!.storage)
  })

  it('is idempotent per completion id', async () => {
    const stub = stubFor('idempotent')
    await stub.create(sessionConfig('idempotent'))
    const first = await stub.record(completionInput({ completion_id: 'cmpl_same' }))
    const second = await stub.record(completionInput({ completion_id: 'cmpl_same' }))
    expect(second).toMatchObject({ seq: first.seq, duplicate: true })
    expect(await stub.completions()).toHaveLength(1)
  })

  it('keeps float64 logprobs exactly when they are not float32 values', async () => {
    const stub = stubFor('f64')
    await stub.create(sessionConfig('f64'))
    const logprobs = Float64Array.from([-0.1, -0.2, -1 / 3])
    await stub.record(completionInput({ completion_id: 'cmpl_f64', response_logprobs: logprobs }))
    const [record] = await stub.completions()
    expect(record!.response_logprobs).toEqual([-0.1, -0.2, -1 / 3])
  })

  it('records failed and abandoned completions as not trainable', async () => {
    const stub = stubFor('failed')
    await stub.create(sessionConfig('failed'))
    await stub.record(
      completionInput({
        completion_id: 'cmpl_fail',
        status: 'failed',
        prompt_token_ids: null,
        response_token_ids: null,
        response_logprobs: null,
        error: 'upstream HTTP 503',
      }),
    )
    await stub.record(completionInput({ completion_id: 'cmpl_gone', status: 'abandoned' }))
    // An ok call with nothing sampled, or without prompt ids, has nothing to train on either.
    await stub.record(
      completionInput({ completion_id: 'cmpl_empty', response_token_ids: new Uint32Array(0), response_logprobs: new Float64Array(0) }),
    )
    await stub.record(completionInput({ completion_id: 'cmpl_noprompt', prompt_token_ids: null }))
    await stub.record(completionInput({ completion_id: 'cmpl_ok' }))
    const records = await stub.completions()
    expect(records.map((r) => [r.status, r.trainable])).toEqual([
      ['failed', false],
      ['abandoned', false],
      ['ok', false],
      ['ok', false],
      ['ok', true],
    ])
    expect(records[0]!.error).toBe('upstream HTTP 503')
  })

  it('answers sampled response messages of ok completions by id, past the 100-parameter statement limit', async () => {
    const stub = stubFor('response-messages')
    await stub.create(sessionConfig('response-messages'))
    const call = { id: 'c0', type: 'function' as const, function: { name: 'Edit', arguments: '{"file_path": "a"}' } }
    await stub.record(
      completionInput({ completion_id: 'cmpl_edit', response_message: { role: 'assistant', content: null, tool_calls: [call] } }),
    )
    await stub.record(completionInput({ completion_id: 'cmpl_gone', status: 'abandoned' }))
    await stub.record(completionInput({ completion_id: 'cmpl_text' }))
    const unknown = Array.from({ length: 150 }, (_, i) => `cmpl_missing_${i}`)
    const found = await stub.responseMessages([...unknown, 'cmpl_edit', 'cmpl_gone', 'cmpl_text', 'cmpl_edit'])
    expect(Object.keys(found).sort()).toEqual(['cmpl_edit', 'cmpl_text'])
    expect(found.cmpl_edit?.tool_calls).toEqual([call])
    expect(found.cmpl_text).toEqual({ role: 'assistant', content: 'hello' })
  })

  it('spills a >2 MB request to R2 and reads it back byte for byte', async () => {
    const stub = stubFor('spill')
    await stub.create(sessionConfig('spill'))
    const big = `${'x'.repeat(2_500_000)}ü🙂`
    const originalText = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: big }] })
    const prompt = Uint32Array.from({ length: 700_000 }, (_, i) => i % 150000)
    await stub.record(
      completionInput({ completion_id: 'cmpl_big', original_text: originalText, request_text: originalText, prompt_token_ids: prompt }),
    )
    const listed = await env.BLOBS.list({ prefix: 'sessions/spill/completions/0/' })
    // The upstream body equals the original here, so it is stored as an empty delta of it, not spilled.
    expect(listed.objects.map((o) => o.key).sort()).toEqual([
      'sessions/spill/completions/0/original_middle',
      'sessions/spill/completions/0/prompt_suffix',
    ])
    // Read back from R2, not from the object's in-memory cache: evict it first.
    await evictDurableObject(stub as unknown as DurableObjectStub)
    const [record] = await stub.completions()
    expect((record!.original_request as { messages: { content: string }[] }).messages[0]!.content).toBe(big)
    expect((record!.request as { messages: { content: string }[] }).messages[0]!.content).toBe(big)
    expect(record!.prompt_token_ids.length).toBe(700_000)
    expect(record!.prompt_token_ids[699_999]).toBe(699_999 % 150000)
    await runInDurableObject(stub as unknown as DurableObjectStub, async (_instance, state) => {
      const row = state.storage.sql.exec('SELECT LENGTH(original_middle) AS n, spilled FROM rg_completions').one()
      expect(row.n).toBeNull()
      expect(String(row.spilled)).toContain('original_middle')
    })
  })
})
