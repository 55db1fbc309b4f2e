/**
 * `npm run bench:gateway-ab` at its smallest runs end to end with the durable floor as a variant: the edge
 * (this tree, bundled) and `bench/floor-worker.js`'s durable floor each in a workerd of their own, every call
 * answered, one JSON line last with each variant's CPU per call (each rep's too).
 */
import { afterAll, expect, it } from 'vitest'
import { runBench, stopBench } from '../support/bench-run.ts'

afterAll(stopBench)

it('bench:gateway-ab --bundle edge=current --bundle dfloor=durable-floor (1 rep, 2 KB) answers every call', async () => {
  const {
    code,
    stderr,
    result: parsed,
  } = await runBench('bench/gateway-ab.ts', [
    '--bundle',
    'edge=current',
    '--bundle',
    'dfloor=durable-floor',
    '--reps',
    '1',
    '--sizes',
    '2048',
    '--c1-count',
    '5',
    '--c16-count',
    '16',
    '--warmup',
    '20',
  ])
  expect(code, `bench:gateway-ab exited ${code}:\n${stderr.slice(-2000)}`).toBe(0)
  const result = parsed as {
    warmup_requests_per_variant: number
    sizes: Record<
      string,
      Record<string, { errors: number; cpu_ms: number; req_s: number; cpu_ms_reps: number[]; cpu_ratio_reps: number[] }>
    >
  }
  const figures = Object.values(result.sizes)[0] ?? {}
  for (const name of ['edge_c1', 'edge_c16', 'dfloor_c1', 'dfloor_c16']) {
    expect(figures[name]?.errors, name).toBe(0)
    expect(figures[name]?.cpu_ms, name).toBeGreaterThan(0)
    expect(figures[name]?.req_s, name).toBeGreaterThan(0)
    // Each rep's figure, and its ratio to the first variant's same rep (1 rep: the median is that rep).
    expect(figures[name]?.cpu_ms_reps, name).toEqual([figures[name]?.cpu_ms])
    expect(figures[name]?.cpu_ratio_reps, name).toHaveLength(1)
  }
  expect(figures.edge_c1?.cpu_ratio_reps).toEqual([1])
  expect(result.warmup_requests_per_variant).toBe(20)
}, 180_000)
