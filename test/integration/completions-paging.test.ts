/**
 * `GET /v1/sessions/:id/completions` on a session whose records do not fit in one Durable Object RPC answer
 * (workerd caps those at 32 MiB): a long agent rollout (or a harness stuck retrying) stores far more than
 * that, and the listing used to fail with a 500. Pages are now bounded by size as well as by count.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ADMIN_TOKEN, type CompletionRecordJson, type Stack, startStack } from '../support/stack.ts'

let stack: Stack

beforeAll(async () => {
  stack = await startStack()
})
afterAll(async () => {
  await stack?.stop()
})

describe('completions listing', () => {
  it('pages a session of ≈48 MiB of records by size and loses none', async () => {
    const session = await stack.createSession({ task_id: 'paging' })
    // 12 calls, each with 2 MiB the engine ignores but the record keeps twice (original and normalized request).
    const padding = 'x'.repeat(2 * 1024 * 1024)
    for (let i = 0; i < 12; i++) {
      const response = await fetch(`${stack.edge.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${session.token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: `say ${i}` }], max_tokens: 16, padding }),
      })
      expect(response.status).toBe(200)
      await response.text()
    }
    const seen: CompletionRecordJson[] = []
    let pages = 0
    for (let after: number | null = -1; after !== null; pages++) {
      const response = await fetch(`${stack.edge.url}/v1/sessions/${session.session_id}/completions?after_seq=${after}`, {
        headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
      })
      expect(
        response.status,
        await response
          .clone()
          .text()
          .then((text) => text.slice(0, 300)),
      ).toBe(200)
      const page = (await response.json()) as { completions: CompletionRecordJson[]; next_after_seq: number | null }
      seen.push(...page.completions)
      after = page.next_after_seq
    }
    expect(seen.map((record) => record.seq)).toEqual(Array.from({ length: 12 }, (_, i) => i))
    expect(pages).toBeGreaterThan(1)
    expect((seen[11]!.original_request as { padding: string }).padding).toHaveLength(padding.length)
  })
})
