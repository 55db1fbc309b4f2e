/**
 * `npm run bench:tunnel` at its smallest still runs end to end: it drives the rollout API (a task, sessions
 * walked to RUNNING on scripted runners, tunnelled calls) and ends with one JSON line. A change to what the
 * rollout API accepts broke it once without any test noticing (its task named a harness submit now refuses).
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

it('bench:tunnel --rounds 1 (2 KB, direct and tunnel) ends with one JSON line, every call answered', async () => {
  const bench = spawn(
    process.execPath,
    ['bench/tunnel.ts', '--rounds', '1', '--c1-count', '10', '--c32-count', '32', '--sizes', '2KB', '--paths', 'direct,tunnel'],
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
  expect(code, `bench:tunnel exited ${code}:\n${stderr.slice(-2000)}`).toBe(0)
  const last = stdout.trim().split('\n').at(-1) ?? ''
  const result = JSON.parse(last) as Record<string, { errors: number; p50_ms: Record<string, number> }>
  const c1 = result['2KB_c1']
  expect(c1?.errors).toBe(0)
  expect(c1?.p50_ms.tunnel).toBeGreaterThan(0)
  expect(c1?.p50_ms.direct).toBeGreaterThan(0)
}, 180_000)
