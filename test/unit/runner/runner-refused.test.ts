/**
 * `rollgate runner` with a token the edge refuses stops at once with exit 3 and a message naming the token
 * (a real CLI process against a `ws` server answering the upgrade 401 in the edge's shape); so does an
 * enrolled id whose per-runner secret file is gone, and an `--edge` that is another HTTP server (a 404), each
 * naming its fix; while an edge that cannot be reached or answers 503 is retried with backoff (the process keeps
 * running until signalled). Every runner gets a temporary state dir and HOME: nothing lands in `~/.rollgate`.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer as createHttpServer } from 'node:http'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { WebSocketServer } from 'ws'
import { freePort } from '../../../scripts/lib/processes.ts'

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
    { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ROLLGATE_UPSTREAM_URL: '', HOME: stateDir } },
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

  it('an --edge that is another HTTP server (404 on /runners/connect) stops with exit 3 after one attempt, naming --edge', async () => {
    let requests = 0
    const server = createHttpServer((_request, response) => {
      requests++
      response.writeHead(404, { 'content-type': 'application/json' }).end('{"detail":"Not Found"}')
    })
    const port = await freePort()
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve))
    cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())))
    const runner = runnerProcess(`http://127.0.0.1:${port}`, 'any-token')
    expect(await runner.exited).toBe(3)
    const line = runner
      .stderr()
      .split('\n')
      .find((text) => text.startsWith('rollgate runner: '))
    expect(line).toBe(
      `rollgate runner: http://127.0.0.1:${port} is not a Rollgate edge (no WebSocket upgrade at /runners/connect) (HTTP 404: {"detail":"Not Found"}); ` +
        "--edge / ROLLGATE_EDGE_URL must be the Rollgate edge's base URL (the Worker: http://127.0.0.1:8787 under npm run dev, or its https://… deployment), not the engine or another server",
    )
    expect(requests).toBe(1)
  })

  it('an edge answering 503 (deploying, restarting) is retried (no exit)', async () => {
    let requests = 0
    const server = createHttpServer((_request, response) => {
      requests++
      response.writeHead(503).end('starting')
    })
    const port = await freePort()
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve))
    cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())))
    const runner = runnerProcess(`http://127.0.0.1:${port}`, 'any-token')
    await runner.stderrMatches(/edge\.connect_failed/g, 3)
    expect(runner.child.exitCode).toBeNull()
    expect(requests).toBeGreaterThanOrEqual(3)
  })

  it('an enrolled runner id with no secret file stops with exit 3, naming the file and the admin reset', async () => {
    const wss = new WebSocketServer({
      port: 0,
      host: '127.0.0.1',
      verifyClient: (_info, done) =>
        // The runner link's answer (src/durable/runner/runner-link.ts) for an enrolled id that sent no secret.
        done(
          false,
          401,
          JSON.stringify({ error: { message: 'runner r1 is enrolled: send its per-runner secret', type: 'runner_hub_error', code: 401 } }),
        ),
    })
    await new Promise<void>((resolve) => wss.once('listening', () => resolve()))
    cleanups.push(() => new Promise<void>((resolve) => wss.close(() => resolve())))
    const address = wss.address()
    const port = typeof address === 'object' && address ? address.port : 0
    const runner = runnerProcess(`http://127.0.0.1:${port}`, 'good-token')
    expect(await runner.exited).toBe(3)
    expect(runner.stderr()).toMatch(
      /rollgate runner: runner id r1 is enrolled but no per-runner secret is at \S+r1\.secret \(HTTP 401: .*\); restore that file .*DELETE \/rollout\/runners\/r1\/credential/,
    )
    expect(runner.stderr()).not.toMatch(/check --token/)
  })
})
