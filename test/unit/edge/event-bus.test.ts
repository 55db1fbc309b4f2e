/**
 * @module
 * The event bus's replay window: `Last-Event-ID` of an event it still holds replays what came after; `0`, an
 * id of an earlier boot or one that left the ring replays the whole window (never a silent gap).
 */
import { describe, expect, it, vi } from 'vitest'
import type { RolloutEvent } from '../../../src/contract/rollout.ts'
import { EventBus, MAX_SUBSCRIBERS, MemoryEventStore, RING_SIZE } from '../../../src/durable/runner/event-bus.ts'

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

/** Subscribe with `filter`; read everything written until the stream ends or `until` holds. */
async function collect(response: Response, until: (text: string) => boolean = () => false): Promise<string> {
  const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader()
  let text = ''
  for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) {
    text += chunk.value
    if (until(text)) break
  }
  await reader.cancel().catch(() => {})
  return text
}

const runnerEvent = (runnerId: string) =>
  ({ type: 'runner.registered', runner_id: runnerId, at: '2026-01-01T00:00:00Z' }) as unknown as RolloutEvent
const ended = (taskId: string) => ({ type: 'task.completed', task_id: taskId, at: '2026-01-01T00:00:00Z' }) as unknown as RolloutEvent

describe('EventBus frames, filters and limits', () => {
  it('writes hello, then each event as an SSE frame with its id, type and JSON; SSE headers', async () => {
    const bus = new EventBus()
    const response = bus.subscribe({ taskId: null, types: [], lastEventId: null, durationMs: 60_000, signal: null })
    expect(response.status).toBe(200)
    expect(Object.fromEntries(response.headers)).toMatchObject({
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      'x-accel-buffering': 'no',
    })
    expect(bus.subscribers).toBe(1)
    expect(bus.publish(submitted('t1'))).toBe('1')
    const text = await collect(response, (seen) => seen.includes('"task_id":"t1"'))
    expect(text).toMatch(/^retry: 2000\nevent: hello\ndata: \{"boot":"[0-9a-z]+","replay":false\}\n\n/)
    expect(text.endsWith(`id: 1\nevent: task.submitted\ndata: ${JSON.stringify(submitted('t1'))}\n\n`)).toBe(true)
    await expect.poll(() => bus.subscribers).toBe(0)
  })

  it('a task filter passes only that task (events without a task id are skipped); a type filter only those types', async () => {
    const bus = new EventBus()
    const byTask = bus.subscribe({ taskId: 't1', types: [], lastEventId: null, durationMs: 60_000, signal: null })
    const byType = bus.subscribe({
      taskId: null,
      types: ['task.completed', 'runner.registered'],
      lastEventId: null,
      durationMs: 60_000,
      signal: null,
    })
    const both = bus.subscribe({ taskId: 't2', types: ['task.completed'], lastEventId: null, durationMs: 60_000, signal: null })
    for (const event of [runnerEvent('r1'), submitted('t2'), submitted('t1'), ended('t2'), ended('t1'), submitted('end')])
      bus.publish(event)
    bus.publish({ ...ended('end') })
    const frames = (text: string) => [...text.matchAll(/id: (\d+)\nevent: ([a-z.]+)\n/g)].map((m) => `${m[1]}:${m[2]}`)
    expect(frames(await collect(byTask, (seen) => seen.includes('id: 5\n')))).toEqual(['3:task.submitted', '5:task.completed'])
    expect(frames(await collect(byType, (seen) => seen.includes('id: 7\n')))).toEqual([
      '1:runner.registered',
      '4:task.completed',
      '5:task.completed',
      '7:task.completed',
    ])
    expect(frames(await collect(both, (seen) => seen.includes('id: 4\n')))).toEqual(['4:task.completed'])
  })

  it('refuses the subscriber past the limit with a 503; a closed one frees its place', async () => {
    const bus = new EventBus()
    const controllers = Array.from({ length: MAX_SUBSCRIBERS }, () => new AbortController())
    for (const controller of controllers) {
      expect(bus.subscribe({ taskId: null, types: [], lastEventId: null, durationMs: 60_000, signal: controller.signal }).status).toBe(200)
    }
    expect(bus.subscribers).toBe(MAX_SUBSCRIBERS)
    const refused = bus.subscribe({ taskId: null, types: [], lastEventId: null, durationMs: 60_000, signal: null })
    expect(refused.status).toBe(503)
    expect(await refused.json()).toEqual({ error: { message: 'too many event subscribers', type: 'overloaded' } })
    controllers[0]!.abort()
    expect(bus.subscribers).toBe(MAX_SUBSCRIBERS - 1)
    expect(bus.subscribe({ taskId: null, types: [], lastEventId: null, durationMs: 60_000, signal: null }).status).toBe(200)
    for (const controller of controllers) controller.abort()
  })

  it('ends the stream at its lifetime; an aborted or cancelled subscriber is dropped', async () => {
    vi.useFakeTimers()
    try {
      const bus = new EventBus({ heartbeatMs: 1_000 })
      const short = bus.subscribe({ taskId: null, types: [], lastEventId: null, durationMs: 2_500, signal: null })
      const reading = collect(short)
      await vi.advanceTimersByTimeAsync(2_499)
      expect(bus.subscribers).toBe(1)
      await vi.advanceTimersByTimeAsync(1)
      expect(bus.subscribers).toBe(0)
      const text = await reading
      expect(text.split(': ping\n\n')).toHaveLength(3)
      // No timers left behind: no more pings are written after the end.
      expect(vi.getTimerCount()).toBe(0)

      const cancelled = bus.subscribe({ taskId: null, types: [], lastEventId: null, durationMs: 60_000, signal: null })
      await cancelled.body!.cancel()
      await vi.advanceTimersByTimeAsync(1_000)
      expect(bus.subscribers).toBe(0)
      expect(vi.getTimerCount()).toBe(0)
    } finally {
      vi.useRealTimers()
    }
  })

  it('the memory window keeps the last RING_SIZE events; ids keep increasing', () => {
    const store = new MemoryEventStore()
    expect(store.latest()).toBe(0)
    for (let i = 0; i < RING_SIZE + 5; i++) store.append(submitted(`t${i}`))
    expect(store.latest()).toBe(RING_SIZE + 5)
    const kept = store.after(0)
    expect(kept).toHaveLength(RING_SIZE)
    expect(kept[0]!.id).toBe(6)
    expect(store.after(RING_SIZE + 3).map((entry) => entry.id)).toEqual([RING_SIZE + 4, RING_SIZE + 5])
  })

  it('Last-Event-ID: only plain decimal ids name an event (anything else replays the window)', async () => {
    const fresh = () => {
      const bus = new EventBus()
      for (const task of ['a', 'b', 'c']) bus.publish(submitted(task))
      return bus
    }
    expect(await replayed(fresh(), '2')).toEqual(['c'])
    expect(await replayed(fresh(), '3')).toEqual([])
    expect(await replayed(fresh(), '4')).toEqual(['a', 'b', 'c'])
    for (const id of ['2x', 'x2', '2e0', '-2', '', '1234567890123456', ' 2'])
      expect(await replayed(fresh(), id), id).toEqual(['a', 'b', 'c'])
    // Fifteen digits still name an id (newer than any issued here: the whole window).
    expect(await replayed(fresh(), '000000000000002')).toEqual(['c'])
  })
})
