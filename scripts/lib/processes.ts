/**
 * @module
 * Start and stop the edge (`wrangler dev`, real workerd) as a child process, for tests, the demo and
 * benchmarks. Loopback only; every wait is bounded.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { fileURLToPath } from 'node:url'
import { describePortHolder } from './port-holder.ts'

export const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url))
const WRANGLER_BIN = fileURLToPath(new URL('../../node_modules/wrangler/bin/wrangler.js', import.meta.url))
const READY_TIMEOUT_MS = 60_000

/** Ports `freePort` draws from: below the kernel's ephemeral range when there is room (see `freePort`). */
export function portPool(rangeText = readPortRange()): { low: number; high: number } | null {
  const match = /^\s*(\d+)\s+(\d+)/.exec(rangeText ?? '')
  const ephemeralLow = match ? Number(match[1]) : 0
  // Room for a few thousand ports above the well-known ones; else let the kernel choose (listen on 0).
  return ephemeralLow >= 12_000 ? { low: 10_000, high: ephemeralLow - 1 } : null
}

function readPortRange(): string | null {
  try {
    return readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8')
  } catch {
    return null
  }
}

function tryListen(port: number): Promise<number | null> {
  return new Promise((resolve) => {
    const server = createServer()
    server.once('error', () => resolve(null))
    server.listen(port, '127.0.0.1', () => {
      const address = server.address()
      const bound = typeof address === 'object' && address ? address.port : null
      server.close(() => resolve(bound))
    })
  })
}

/**
 * A loopback port free now, for a process to bind next. Drawn at random from *below* the kernel's ephemeral range
 * when there is room: a port the kernel picks for `listen(0)` comes from the same range as the source ports of
 * outgoing connections, so under load (a bench's thousands of calls, tests in parallel) another socket could take
 * it before the process binds it, or before an edge restarted on the same port binds it again.
 */
export async function freePort(pool = portPool()): Promise<number> {
  if (pool !== null) {
    for (let attempt = 0; attempt < 50; attempt++) {
      const port = pool.low + Math.floor(Math.random() * (pool.high - pool.low + 1))
      if ((await tryListen(port)) !== null) return port
    }
  }
  const port = await tryListen(0)
  if (port === null) throw new Error('no free loopback port')
  return port
}

/** Thrown when a port asked for is taken: its message names the port and says what to do. */
export class PortInUseError extends Error {}

/**
 * Resolves when `port` can be bound on 127.0.0.1 (it is released again at once), else throws `PortInUseError`.
 * Checked before an edge starts on a port asked for: its readiness probe would otherwise be answered by whatever
 * already listens there (an earlier `npm run dev`), and the new edge would look up while it never started.
 */
export function assertPortFree(port: number, flag = '--port'): Promise<void> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', (error: NodeJS.ErrnoException) =>
      reject(
        error.code === 'EADDRINUSE'
          ? new PortInUseError(
              `port ${port} is already in use (${describePortHolder(port)}another edge or engine still running?): stop it, or pick another with ${flag}`,
            )
          : error,
      ),
    )
    server.listen(port, '127.0.0.1', () => server.close(() => resolve()))
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
  /**
   * Run wrangler and its workerd in a process group of their own, so `kill('SIGKILL')` ends both at once
   * (a crash, as the chaos suite needs); the group is also killed when this process exits.
   */
  group?: boolean
  /** wrangler's log level (default `info` when verbose, else `warn`; the Worker's own log lines show at `debug`). */
  logLevel?: 'debug' | 'info' | 'log' | 'warn' | 'error'
}

export interface EdgeProcess {
  url: string
  port: number
  child: ChildProcess
  output(): string
  stop(): Promise<void>
  /** Send a signal to wrangler (and with `group`, to workerd too); resolves once wrangler exited. */
  kill(signal: NodeJS.Signals): Promise<void>
  /** Process ids of wrangler and its children (with `group`), for resource figures. */
  pids(): number[]
}

export async function startEdge(options: EdgeOptions): Promise<EdgeProcess> {
  if (options.port !== undefined && options.port !== 0) await assertPortFree(options.port)
  const port = options.port || (await freePort())
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
    options.logLevel ?? (options.verbose ? 'info' : 'warn'),
  ]
  for (const [key, value] of Object.entries(options.vars)) args.push('--var', `${key}:${value}`)
  const child = spawn(process.execPath, args, {
    cwd: REPO_ROOT,
    env: {
      // wrangler dev's local trace store keeps every request's full URL (a session token can be in it) on
      // disk under the persistence dir, whatever wrangler.toml says: off unless asked for.
      X_LOCAL_OBSERVABILITY: 'false',
      ...process.env,
      WRANGLER_SEND_METRICS: 'false',
      CLOUDFLARE_CF_FETCH_ENABLED: 'false',
      NO_UPDATE_NOTIFIER: '1',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: options.group === true,
  })
  const group = options.group === true && child.pid !== undefined ? child.pid : null
  const killGroup = (signal: NodeJS.Signals) => {
    if (group === null) return
    try {
      process.kill(-group, signal)
    } catch {
      // already gone
    }
  }
  const onExit = () => killGroup('SIGKILL')
  if (group !== null) process.once('exit', onExit)
  let output = ''
  const collect = (chunk: Buffer) => {
    output += chunk.toString()
    if (output.length > 200_000) output = output.slice(-100_000)
    if (options.verbose) process.stderr.write(chunk)
  }
  child.stdout?.on('data', collect)
  child.stderr?.on('data', collect)
  const url = `http://127.0.0.1:${port}`
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  const kill = async (signal: NodeJS.Signals) => {
    if (group !== null) killGroup(signal)
    else child.kill(signal)
    await exited
    if (group !== null) {
      // workerd may outlive wrangler by a moment: make sure the whole group is gone, and wait until it is (its
      // sockets are closed only then: an edge restarted on the same port must find the port free).
      killGroup('SIGKILL')
      process.off('exit', onExit)
      await groupGone(group)
    }
  }
  try {
    await waitForHttp(`${url}/`, READY_TIMEOUT_MS, child)
  } catch (error) {
    await kill('SIGKILL')
    throw new Error(`${(error as Error).message}\n--- wrangler output ---\n${output.slice(-4000)}`)
  }
  return {
    url,
    port,
    child,
    output: () => output,
    stop: async () => {
      if (group === null) return stopChild(child)
      const timer = setTimeout(() => killGroup('SIGKILL'), 10_000)
      await kill('SIGINT')
      clearTimeout(timer)
    },
    kill,
    pids: () => (group === null ? (child.pid ? [child.pid] : []) : groupPids(group)),
  }
}

/** Live process ids of a process group (Linux /proc). */
/** Resolves once no process of the group is alive (zombies hold no socket); bounded by `timeoutMs`. */
export async function groupGone(pgid: number, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (groupPids(pgid, { live: true }).length > 0) {
    if (Date.now() > deadline) throw new Error(`process group ${pgid} still running ${timeoutMs} ms after SIGKILL`)
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
}

export function groupPids(pgid: number, { live = false }: { live?: boolean } = {}): number[] {
  const pids: number[] = []
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8')
      // pid (comm) state ppid pgrp …: comm may contain spaces, so split after the closing parenthesis.
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
      if (Number(fields[2]) === pgid && !(live && (fields[0] === 'Z' || fields[0] === 'X'))) pids.push(Number(entry))
    } catch {
      // exited meanwhile
    }
  }
  return pids
}

/** Resident set size of a process in MB (0 when it is gone). */
export function rssMb(pid: number): number {
  try {
    const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
    return match ? Math.round(Number(match[1]) / 102.4) / 10 : 0
  } catch {
    return 0
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
