/**
 * @module
 * Run one `bench/*.ts` script at its smallest as a child process and read its last stdout line (a bench's result
 * is one JSON object there). The child is ended by `stopBench` (call it from `afterAll`) if a test gives up first.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { join } from 'node:path'
import { childOutput } from './child-output.ts'

const ROOT = join(import.meta.dirname, '../..')
const running = new Set<ChildProcess>()

export interface BenchRun {
  code: number | null
  stderr: string
  /** The last stdout line, parsed (null when it is not JSON). */
  result: unknown
}

export async function runBench(script: string, args: readonly string[]): Promise<BenchRun> {
  const child = spawn(process.execPath, [script, ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] })
  running.add(child)
  const { code, stdout, stderr } = await childOutput(child)
  running.delete(child)
  const last = stdout.trim().split('\n').at(-1) ?? ''
  let result: unknown = null
  try {
    result = JSON.parse(last)
  } catch {}
  return { code, stderr, result }
}

/** End every bench child still running (SIGTERM: the benches stop what they started). */
export async function stopBench(): Promise<void> {
  await Promise.all(
    [...running].map(async (child) => {
      if (child.exitCode !== null || child.signalCode !== null) return
      const exited = new Promise((resolve) => child.once('exit', resolve))
      child.kill('SIGTERM')
      await exited
    }),
  )
}
