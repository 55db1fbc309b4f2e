/**
 * A session object evicted between calls (workerd drops the instance; the next call builds a new one over
 * the same SQLite) stores what a warm one stores, byte for byte: the same calls recorded into two objects,
 * one evicted before every fifth call, leave equal rows (each woken record rebuilds its base from storage).
 */
import { env, evictDurableObject, runInDurableObject } from 'cloudflare:test'
import { describe, expect, it } from 'vitest'
import type { CompletionInput, SessionConfig } from '../../src/durable/session/record.ts'
import type { SessionRpc } from '../../src/durable/session/session-object.ts'
import { growingSessionInputs } from '../support/records.ts'

function config(sessionId: string): SessionConfig {
  return {
    session_id: sessionId,
    task_id: null,
    created_at: '2026-01-01T00:00:00.000Z',
    upstream: { url: 'http://127.0.0.1:8000', kind: 'vllm', served_model: null },
    policy_version: null,
    metadata: {},
  }
}

const hex = (buffer: ArrayBuffer) => Array.from(new Uint8Array(buffer), (byte) => byte.toString(16).padStart(2, '0')).join('')

/** Every stored row, blobs as hex. */
async function stored(stub: DurableObjectStub): Promise<{ rows: unknown[] }> {
  return runInDurableObject(stub, async (_instance, state) => {
    const read = (query: string) =>
      state.storage.sql
        .exec(query)
        .toArray()
        .map((row) =>
          Object.fromEntries(Object.entries(row).map(([key, value]) => [key, value instanceof ArrayBuffer ? hex(value) : value])),
        )
    return {
      rows: read('SELECT * FROM rg_completions ORDER BY seq'),
    }
  })
}

describe('session object after an eviction', () => {
  it('stores the same bytes as a warm one (evicted before every fifth call, 140 calls, ids as the engine text)', async () => {
    const inputs: CompletionInput[] = [...growingSessionInputs(140)].map((input) => ({
      ...input,
      prompt_token_ids: null,
      prompt_token_text: JSON.stringify(Array.from(input.prompt_token_ids ?? [])),
    }))
    const warmStub = env.SESSIONS.get(env.SESSIONS.idFromName('wake-warm'))
    const coldStub = env.SESSIONS.get(env.SESSIONS.idFromName('wake-cold'))
    const warm = warmStub as unknown as SessionRpc
    const cold = coldStub as unknown as SessionRpc
    await warm.create(config('wake-same'))
    await cold.create(config('wake-same'))
    for (const [i, input] of inputs.entries()) {
      await warm.record(input)
      if (i % 5 === 0) await evictDurableObject(coldStub)
      await cold.record(input)
    }
    const a = await stored(warmStub)
    const b = await stored(coldStub)
    expect(a.rows).toHaveLength(140)
    // Delta-coded chains in both (not stored whole after a wake).
    expect(a.rows.filter((row) => (row as { prompt_parent: number | null }).prompt_parent !== null).length).toBeGreaterThan(130)
    expect(b.rows).toEqual(a.rows)
  })
})
