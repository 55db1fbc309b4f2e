/**
 * `Last-Event-ID` across a restart of the runner hub (reliability issue, part 3): events published
 * before the hub object was evicted are replayed to a client that reconnects with the last id it saw.
 */
import { env, evictDurableObject, SELF } from 'cloudflare:test'
import { describe, expect, it } from 'vitest'
import { ADMIN, EDGE, TestRunner } from './rollout-support.ts'

/** Read an SSE response until `until` holds for the frames so far; returns the frames (hello excluded). */
async function frames(res: Response, until: (frames: string[]) => boolean): Promise<string[]> {
  const reader = (res.body as ReadableStream<Uint8Array>).pipeThrough(new TextDecoderStream()).getReader()
  const seen: string[] = []
  let buffer = ''
  while (!until(seen)) {
    const { value, done } = await reader.read()
    if (done) break
    buffer += value
    for (let split = buffer.indexOf('\n\n'); split >= 0; split = buffer.indexOf('\n\n')) {
      const frame = buffer.slice(0, split)
      buffer = buffer.slice(split + 2)
      if (frame.startsWith('id: ')) seen.push(frame)
    }
  }
  await reader.cancel()
  return seen
}

describe('event replay across a hub restart', () => {
  it('replays the events after Last-Event-ID from the durable window', async () => {
    const first = await SELF.fetch(`${EDGE}/v1/events?types=runner.registered&timeout_seconds=10`, { headers: ADMIN })
    const one = await TestRunner.start('replay-r1')
    const seenBefore = await frames(first, (seen) => seen.some((frame) => frame.includes('"replay-r1"')))
    const lastId = /^id: (\d+)/.exec(seenBefore.find((frame) => frame.includes('"replay-r1"')) as string)?.[1] as string
    one.close()
    // Missed while disconnected, then the hub object restarts.
    const two = await TestRunner.start('replay-r2')
    two.close()
    await evictDurableObject(env.RUNNERS.get(env.RUNNERS.idFromName('default')))
    const again = await SELF.fetch(`${EDGE}/v1/events?types=runner.registered&timeout_seconds=10`, {
      headers: { ...ADMIN, 'last-event-id': lastId },
    })
    const replayed = await frames(again, (seen) => seen.some((frame) => frame.includes('"replay-r2"')))
    expect(replayed.some((frame) => frame.includes('"replay-r1"'))).toBe(false)
    const ids = replayed.map((frame) => Number(/^id: (\d+)/.exec(frame)?.[1]))
    expect(ids.every((id) => id > Number(lastId))).toBe(true)
  })
})
