/**
 * `npm run bench:tunnel` at its smallest still runs end to end: it drives the rollout API (a task, sessions
 * walked to RUNNING on scripted runners, tunnelled calls) and ends with one JSON line. A change to what the
 * rollout API accepts broke it once without any test noticing (its task named a harness submit now refuses).
 */
import { afterAll, expect, it } from 'vitest'
import { runBench, stopBench } from '../support/bench-run.ts'

afterAll(stopBench)

it('bench:tunnel --rounds 1 (2 KB, direct and tunnel) ends with one JSON line, every call answered', async () => {
  const {
    code,
    stderr,
    result: parsed,
  } = await runBench('bench/tunnel.ts', [
    '--rounds',
    '1',
    '--c1-count',
    '10',
    '--c32-count',
    '32',
    '--sizes',
    '2KB',
    '--paths',
    'direct,tunnel',
    '--warmup',
    '40',
  ])
  expect(code, `bench:tunnel exited ${code}:\n${stderr.slice(-2000)}`).toBe(0)
  const result = parsed as Record<string, { errors: number; p50_ms: Record<string, number> }>
  const c1 = result['2KB_c1']
  expect(c1?.errors).toBe(0)
  expect(c1?.p50_ms.tunnel).toBeGreaterThan(0)
  expect(c1?.p50_ms.direct).toBeGreaterThan(0)
  // The cold round before the warm-up is reported too.
  const cold = (parsed as { cold?: { errors: number; added_p50_ms: Record<string, number> } }).cold
  expect(cold?.errors).toBe(0)
  expect(Number.isFinite(cold?.added_p50_ms.tunnel)).toBe(true)
}, 180_000)
