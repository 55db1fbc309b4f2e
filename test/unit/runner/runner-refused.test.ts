/**
 * `rollgate runner` with a token the edge refuses stops at once with exit 3 and a message naming the token
 * (a real CLI process against a `ws` server answering the upgrade 401 in the edge's shape), while an edge
 * that cannot be reached is retried with backoff (the process keeps running until signalled).
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { WebSocketServer } from 'ws'

const CLI = join(import.meta.dirname, '../../../cli/rollgate.ts')
const cleanups: (() => Promise<void> | void)[] = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

function runnerProcess(edgeUrl: string, token: string) {
  const stateDir = mkdtempSync(join(tmpdir(), 'rollgate-refused-'))
  const child: ChildProcess = spawn(
    process.execPath,
    [CLI, 'runner', '--edge', edgeUrl, '--token', token, '--upstream', 'none', '--state-dir', stateDir, '--runner-id', 'r1', '--json-logs'],
    { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ROLLGATE_UPSTREAM_URL: '' } },
  )
  let stderr = ''
  const waiters: (() => void)[] = []
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString()
    for (const wake of waiters.splice(0)) wake()
  })
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)))
  cleanups.push(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL')
      await exited
    }
    rmSync(stateDir, { recursive: true, force: true })
  })
  /** Resolves once stderr holds `count` matches of `pattern` (or the process ended). */
  const stderrMatches = async (pattern: RegExp, count: number) => {
    while ((stderr.match(pattern) ?? []).length < count && child.exitCode === null)
      await new Promise<void>((resolve) => waiters.push(resolve))
    return stderr
  }
  return { child, exited, stderr: () => stderr, stderrMatches }
}

describe('rollgate runner at connect', () => {
  it('a refused runner token (401) stops with exit 3 and a clear message after one attempt', async () => {
    let upgrades = 0
    const wss = new WebSocketServer({
      port: 0,
      host: '127.0.0.1',
      verifyClient: (_info, done) => {
        upgrades++
        done(false, 401, 'Unauthorized', { 'content-type': 'application/json' })
      },
    })
    await new Promise<void>((resolve) => wss.once('listening', () => resolve()))
    cleanups.push(() => new Promise<void>((resolve) => wss.close(() => resolve())))
    const address = wss.address()
    const port = typeof address === 'object' && address ? address.port : 0
    const runner = runnerProcess(`http://127.0.0.1:${port}`, 'wrong-token')
    expect(await runner.exited).toBe(3)
    expect(runner.stderr()).toMatch(/the edge refused this runner \(HTTP 401.*check --token \/ ROLLGATE_RUNNER_TOKEN/)
    expect(upgrades).toBe(1)
  })

  it('an edge that cannot be reached is retried (no exit)', async () => {
    // A port that refuses connections: bound, then closed.
    const server = createServer()
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const address = server.address()
    const port = typeof address === 'object' && address ? address.port : 0
    await new Promise<void>((resolve) => server.close(() => resolve()))
    const runner = runnerProcess(`http://127.0.0.1:${port}`, 'any-token')
    await runner.stderrMatches(/edge\.connect_failed/g, 3)
    expect(runner.child.exitCode).toBeNull()
    expect(runner.stderr()).not.toMatch(/edge\.refused/)
  })
})
