/**
 * @module
 * Start the canned vLLM-shaped stub upstream (`stub-upstream.ts`) in its own process, for benchmarks.
 */
import { spawn } from 'node:child_process'
import { join } from 'node:path'
import { REPO_ROOT, stopChild } from '../../scripts/lib/processes.ts'

export async function startStub(): Promise<{ url: string; stop(): Promise<void> }> {
  const child = spawn(process.execPath, [join(REPO_ROOT, 'bench/lib/stub-upstream.ts'), '--port', '0'], {
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout.on('data', (chunk: Buffer) => {
      const match = /listening (\d+)/.exec(chunk.toString())
      if (match) resolve(Number(match[1]))
    })
    child.once('exit', () => reject(new Error('stub upstream exited')))
  })
  // Never leave the stub behind, even when the benchmark crashes.
  process.once('exit', () => child.kill('SIGKILL'))
  return { url: `http://127.0.0.1:${port}`, stop: () => stopChild(child) }
}
