/**
 * `npm run bench:gateway-ab` at its smallest runs end to end with the durable floor as a variant: the edge
 * (this tree, bundled) and `bench/floor-worker.js`'s durable floor each in a workerd of their own, every call
 * answered, one JSON line last with each variant's CPU per call.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { join } from 'node:path'
import { afterAll, expect, it } from 'vitest'

const ROOT = join(import.meta.dirname, '../..')
let child: ChildProcess | undefined

afterAll(async () => {
  if (child && child.exitCode === null && child.signalCode === null) {
    const exited = new Promise((resolve) => child?.once('exit', resolve))
    child.kill('SIGTERM')
    await exited
  }
})

it('bench:gateway-ab --bundle edge=current --bundle dfloor=durable-floor (1 rep, 2 KB) answers every call', async () => {
  const bench = spawn(
    process.execPath,
    [
      'bench/gateway-ab.ts',
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
    ],
    { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
  )
  child = bench
  let stdout = ''
  let stderr = ''
  bench.stdout.on('data', (chunk: Buffer) => {
    stdout += chunk.toString()
  })
  bench.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString()
  })
  const code = await new Promise<number | null>((resolve) => bench.once('exit', resolve))
  expect(code, `bench:gateway-ab exited ${code}:\n${stderr.slice(-2000)}`).toBe(0)
  const last = stdout.trim().split('\n').at(-1) ?? ''
  const result = JSON.parse(last) as { sizes: Record<string, Record<string, { errors: number; cpu_ms: number; req_s: number }>> }
  const figures = Object.values(result.sizes)[0] ?? {}
  for (const name of ['edge_c1', 'edge_c16', 'dfloor_c1', 'dfloor_c16']) {
    expect(figures[name]?.errors, name).toBe(0)
    expect(figures[name]?.cpu_ms, name).toBeGreaterThan(0)
    expect(figures[name]?.req_s, name).toBeGreaterThan(0)
  }
}, 180_000)
