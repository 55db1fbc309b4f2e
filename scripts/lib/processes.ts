/**
 * @module
 * Start and stop the edge (`wrangler dev`, real workerd) as a child process, for tests, the demo and
 * benchmarks. Loopback only; every wait is bounded.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { createServer } from 'node:net'
import { fileURLToPath } from 'node:url'

export const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url))
const WRANGLER_BIN = fileURLToPath(new URL('../../node_modules/wrangler/bin/wrangler.js', import.meta.url))
const READY_TIMEOUT_MS = 60_000

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const address = server.address()
      const port = typeof address === 'object' && address ? address.port : 0
      server.close(() => resolve(port))
    })
  })
}

export async function waitForHttp(url: string, timeoutMs = READY_TIMEOUT_MS, child?: ChildProcess): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    if (child && child.exitCode !== null) throw new Error(`process exited (${child.exitCode}) before ${url} answered`)
    try {
      const response = await fetch(url, { signal: AbortSignal.timeout(2_000) })
      if (response.status < 500) return
    } catch {
      // not up yet
    }
    await new Promise((resolve) => setTimeout(resolve, 150))
  }
  throw new Error(`${url} did not answer within ${timeoutMs} ms`)
}

/** Every `ROLLGATE_*` variable of `env` (empty values included: they mean "unset" to the edge). */
export function rollgateVarsFromEnv(env: NodeJS.ProcessEnv = process.env): Record<string, string> {
  const vars: Record<string, string> = {}
  for (const [key, value] of Object.entries(env)) if (key.startsWith('ROLLGATE_') && value !== undefined) vars[key] = value
  return vars
}

export interface EdgeOptions {
  port?: number
  persistTo: string
  vars: Record<string, string>
  /** Print wrangler's output (default: only on failure). */
  verbose?: boolean
}

export interface EdgeProcess {
  url: string
  port: number
  child: ChildProcess
  output(): string
  stop(): Promise<void>
}

export async function startEdge(options: EdgeOptions): Promise<EdgeProcess> {
  const port = options.port ?? (await freePort())
  const inspectorPort = await freePort()
  const args = [
    WRANGLER_BIN,
    'dev',
    '--ip',
    '127.0.0.1',
    '--port',
    String(port),
    '--inspector-port',
    String(inspectorPort),
    '--persist-to',
    options.persistTo,
    '--show-interactive-dev-session=false',
    '--log-level',
    options.verbose ? 'info' : 'warn',
  ]
  for (const [key, value] of Object.entries(options.vars)) args.push('--var', `${key}:${value}`)
  const child = spawn(process.execPath, args, {
    cwd: REPO_ROOT,
    env: { ...process.env, WRANGLER_SEND_METRICS: 'false', CLOUDFLARE_CF_FETCH_ENABLED: 'false', NO_UPDATE_NOTIFIER: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let output = ''
  const collect = (chunk: Buffer) => {
    output += chunk.toString()
    if (output.length > 200_000) output = output.slice(-100_000)
    if (options.verbose) process.stderr.write(chunk)
  }
  child.stdout?.on('data', collect)
  child.stderr?.on('data', collect)
  const url = `http://127.0.0.1:${port}`
  try {
    await waitForHttp(`${url}/`, READY_TIMEOUT_MS, child)
  } catch (error) {
    child.kill('SIGINT')
    throw new Error(`${(error as Error).message}\n--- wrangler output ---\n${output.slice(-4000)}`)
  }
  return {
    url,
    port,
    child,
    output: () => output,
    stop: () => stopChild(child),
  }
}

/** SIGINT (wrangler shuts workerd down cleanly), then SIGKILL if it lingers. */
export function stopChild(child: ChildProcess, graceMs = 10_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve()
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), graceMs)
    child.once('exit', () => {
      clearTimeout(timer)
      resolve()
    })
    child.kill('SIGINT')
  })
}
