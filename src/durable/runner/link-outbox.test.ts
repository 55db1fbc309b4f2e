/** LinkOutbox: per-runner order, one batch in flight per runner, runners independent, failures logged not thrown. */
import { describe, expect, it } from 'vitest'
import { type LinkDelivery, LinkOutbox } from './link-outbox.ts'

function deferred() {
  let resolve!: () => void
  const promise = new Promise<void>((r) => {
    resolve = r
  })
  return { promise, resolve }
}

describe('LinkOutbox', () => {
  it('delivers in order, batching what queued while a delivery was in flight', async () => {
    const batches: { runner: string; items: LinkDelivery[] }[] = []
    const gates: ReturnType<typeof deferred>[] = []
    const outbox = new LinkOutbox((runner) => ({
      deliver: async (items) => {
        batches.push({ runner, items })
        const gate = deferred()
        gates.push(gate)
        await gate.promise
        return true
      },
    }))
    outbox.post('a', { message: { type: 'drained' } })
    outbox.post('a', { message: { type: 'error', message: 'one' } })
    outbox.post('a', { close: { code: 4002, reason: 'bye' } })
    outbox.post('b', { message: { type: 'drained' } })
    expect(batches.map((b) => [b.runner, b.items.length])).toEqual([
      ['a', 1],
      ['b', 1],
    ])
    gates[0]?.resolve()
    await new Promise((resolve) => setTimeout(resolve, 0))
    expect(batches[2]).toEqual({
      runner: 'a',
      items: [{ message: { type: 'error', message: 'one' } }, { close: { code: 4002, reason: 'bye' } }],
    })
    for (const gate of gates) gate.resolve()
  })

  it('keeps going after a failed delivery', async () => {
    const seen: string[] = []
    let calls = 0
    const outbox = new LinkOutbox(() => ({
      deliver: async (items) => {
        calls++
        if (calls === 1) {
          await Promise.resolve()
          throw new Error('link unreachable')
        }
        for (const item of items) if ('message' in item) seen.push(item.message.type)
        return true
      },
    }))
    outbox.post('a', { message: { type: 'drained' } })
    outbox.post('a', { message: { type: 'error', message: 'x' } })
    await new Promise((resolve) => setTimeout(resolve, 0))
    expect(seen).toEqual(['error'])
  })
})
