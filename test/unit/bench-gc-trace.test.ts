/** V8's GC trace as `bench:gateway --gc-trace` reads it (`bench/lib/gc-trace.ts`): which lines count, and which calls held a full collection. */
import { describe, expect, it } from 'vitest'
import { GcTrace, gcDuringCalls } from '../../bench/lib/gc-trace.ts'

const line = (kind: string, pause: number, extra: Record<string, unknown> = {}) =>
  `[29694:0x53167fca4000:0]     3569 ms: GC: ${JSON.stringify({ pause, mutator: 27.3, gc: kind, reason: 'allocation limit', promoted: 0, start_object_size: 120e6, end_object_size: 15e6, ...extra })}`

describe('gc trace', () => {
  it('keeps the GC lines of workerd log output, each stamped when it came, and nothing else', () => {
    const trace = new GcTrace()
    expect(trace.note(line('mc', 23.5), 1000)).toBe(true)
    expect(trace.note('[29694:0x53167fca4000:0]    36202 ms: Memory pool: Removed pages: 4, removed large pages: 22', 1001)).toBe(false)
    expect(trace.note('{"timestamp":1,"level":"log","message":"GC: {"}', 1002)).toBe(false)
    expect(trace.note(`[1:0xabc]    5 ms: GC: {"pause":`, 1003)).toBe(false)
    expect(trace.note(line('s', 1.5, { promoted: 14e6 }), 1004)).toBe(true)
    expect(trace.events).toEqual([
      expect.objectContaining({ at: 1000, isolate: '0x53167fca4000', kind: 'mc', pauseMs: 23.5, startObjects: 120e6, endObjects: 15e6 }),
      expect.objectContaining({ at: 1004, kind: 's', pauseMs: 1.5, promoted: 14e6 }),
    ])
    expect(trace.between(1001, 2000)).toHaveLength(1)
  })

  it('counts the full collections, finds the calls that held one, and whether the slowest 1 % are those', () => {
    const trace = new GcTrace()
    // 200 calls of 10 ms, one every 20 ms from t=0; calls 50 and 120 held a collection (and took 40 ms).
    const calls = Array.from({ length: 200 }, (_, i) => ({ sentAt: i * 20, ms: i === 50 || i === 120 ? 40 : 10 }))
    trace.note(line('mc', 30), 50 * 20 + 35)
    trace.note(line('mc', 28), 120 * 20 + 39)
    // Between two calls: held by none. A forced collection (inspector) is not the workload's.
    trace.note(line('mc', 25), 7 * 20 + 15)
    trace.note(line('mc', 40, { reason: 'low memory notification' }), 9 * 20 + 5)
    trace.note(line('s', 1, { promoted: 2e6 }), 3 * 20 + 2)
    trace.note(line('s', 1, { promoted: 4e6 }), 4 * 20 + 2)
    const gc = gcDuringCalls(trace.events, calls)
    expect(gc).toMatchObject({
      calls: 200,
      major_gcs: 3,
      major_gcs_per_100_calls: 1.5,
      major_pause_ms: { p50: 28, max: 30 },
      major_freed_mb_p50: 105,
      scavenges: 2,
      promoted_mb_per_scavenge: 3,
      calls_holding_a_major: 2,
      their_latency_ms_p50: 40,
      all_calls_latency_ms_p50: 10,
      slowest_1pct_holding_a_major: '2 of 2',
    })
  })
})
