/**
 * @module
 * The event bus's replay window: `Last-Event-ID` of an event it still holds replays what came after; `0`, an
 * id of an earlier boot or one that left the ring replays the whole window (never a silent gap).
 */
import { describe, expect, it } from 'vitest'
import type { RolloutEvent } from '../../../src/contract/rollout.ts'
import { EventBus } from '../../../src/durable/runner/event-bus.ts'

const submitted = (taskId: string) =>
  ({ type: 'task.submitted', task_id: taskId, num_samples: 1, at: '2026-01-01T00:00:00Z' }) as unknown as RolloutEvent

/** Subscribe, read until the replay is written (it is written synchronously at subscribe), then close. */
async function replayed(bus: EventBus, lastEventId: string | null): Promise<string[]> {
  const abort = new AbortController()
  const response = bus.subscribe({ taskId: null, types: [], lastEventId, durationMs: 60_000, signal: abort.signal })
  const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader()
  let text = ''
  const expected = new Promise<void>((resolve) => {
    const pump = async () => {
      for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) {
        text += chunk.value
        if (text.includes('"task_id":"end"')) return resolve()
      }
      resolve()
    }
    void pump()
  })
  bus.publish(submitted('end'))
  await expected
  abort.abort()
  await reader.cancel().catch(() => {})
  return [...text.matchAll(/"task_id":"([^"]+)"/g)].map((match) => match[1] as string).filter((id) => id !== 'end')
}

describe('EventBus replay', () => {
  it('replays after a held id, and the whole window for 0, a stale boot or an id that left the ring', async () => {
    const bus = new EventBus()
    const ids = ['a', 'b', 'c'].map((task) => bus.publish(submitted(task)))
    expect(await replayed(bus, null)).toEqual([])
    expect(await replayed(bus, ids[0] as string)).toEqual(['b', 'c'])
    expect(await replayed(bus, ids[2] as string)).toEqual([])
    expect(await replayed(bus, '0')).toEqual(['a', 'b', 'c'])
    expect(await replayed(bus, 'oldboot.2')).toEqual(['a', 'b', 'c'])
  })
})
