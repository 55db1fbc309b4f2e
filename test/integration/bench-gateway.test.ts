/**
 * `npm run bench:gateway` at its smallest runs end to end: five targets in one Miniflare, a cold round and a
 * warm-up before the judged figures, every edge call (warm-up included) stored, one JSON line last.
 */
import { afterAll, expect, it } from 'vitest'
import { runBench, stopBench } from '../support/bench-run.ts'

afterAll(stopBench)

it('bench:gateway (1 rep, 2 KB, warm-up 32) reports a cold round apart and loses no capture', async () => {
  const { code, stderr, result } = await runBench('bench/gateway.ts', [
    '--reps',
    '1',
    '--sizes',
    '2KB',
    '--c1-count',
    '5',
    '--c16-count',
    '16',
    '--warmup',
    '32',
  ])
  expect(code, `bench:gateway exited ${code}:\n${stderr.slice(-2000)}`).toBe(0)
  const parsed = result as {
    warmup_requests_per_target: number
    cold: { size: string; calls_per_target: number; edge_added_p50_ms: number; added_p50_ratio: number } | null
    sizes: Record<string, { vs_floor: Record<string, { cpu_ms_c1: number; req_s_c16: number }> }>
    captures: { successful_edge_calls: number; stored: number; lost: number }
  }
  expect(parsed.warmup_requests_per_target).toBe(32)
  expect(parsed.cold).toMatchObject({ size: '2KB', calls_per_target: 5 })
  expect(Number.isFinite(parsed.cold?.added_p50_ratio)).toBe(true)
  for (const name of ['durable_floor', 'onehop_floor', 'edge']) {
    expect(parsed.sizes['2KB']?.vs_floor[name]?.cpu_ms_c1, name).toBeGreaterThan(0)
    expect(parsed.sizes['2KB']?.vs_floor[name]?.req_s_c16, name).toBeGreaterThan(0)
  }
  // Cold 5 + warm-up 32 + the size's own warm (5 at c=1, 16 at c=16) + 1 rep (5 + 16): all stored.
  expect(parsed.captures).toEqual({ successful_edge_calls: 5 + 32 + 5 + 16 + 5 + 16, stored: 5 + 32 + 5 + 16 + 5 + 16, lost: 0 })
}, 180_000)
