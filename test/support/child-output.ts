/**
 * @module
 * What a child process wrote, read until it closed: the one collector the tests that run a CLI or a script share.
 */
import type { ChildProcess } from 'node:child_process'

export interface ChildRun {
  code: number | null
  stdout: string
  stderr: string
}

/** Resolves when `child` (spawned with piped stdout and stderr) has closed; `stderrSoFar` reads it meanwhile. */
export function childOutput(child: ChildProcess): Promise<ChildRun> & { stderrSoFar(): string } {
  let stdout = ''
  let stderr = ''
  child.stdout?.on('data', (chunk: Buffer) => {
    stdout += chunk.toString()
  })
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString()
  })
  const done = new Promise<ChildRun>((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })))
  return Object.assign(done, { stderrSoFar: () => stderr })
}
