/**
 * @module
 * Start the real runner agent as a child process (`runner-process.ts`: `rollgate runner` with the host
 * runtime) and follow its JSON-lines log. Every wait is bounded; `stop()` ends it in any case.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { RunnerCommandOptions } from '../../cli/commands/runner.ts'

const ENTRY = fileURLToPath(new URL('./runner-process.ts', import.meta.url))
const CLI = fileURLToPath(new URL('../../cli/rollgate.ts', import.meta.url))

export interface LogLine {
  event: string
  [key: string]: unknown
}

export interface RunnerProc {
  child: ChildProcess
  lines: LogLine[]
  exited: Promise<number | null>
  waitFor(predicate: (line: LogLine) => boolean, timeoutMs?: number, label?: string): Promise<LogLine>
  output(): string
  stop(): Promise<void>
}

/**
 * A test runner's options: local runtime, one slot a stage, no status port, JSON logs, its state under
 * `stateRoot/<runnerId>` (sessions in its `sessions/`); `extra` overrides any of them.
 */
export function runnerOptions(
  base: { edge: string; token: string; upstream: string | null; stateRoot: string; runnerId: string },
  extra: Partial<RunnerCommandOptions> = {},
): RunnerCommandOptions {
  const stateDir = join(base.stateRoot, base.runnerId)
  return {
    edge: base.edge,
    token: base.token,
    upstream: base.upstream,
    servedModel: null,
    upstreamKind: 'vllm',
    runtime: 'local',
    image: null,
    maxInit: 1,
    maxRun: 1,
    maxPostrun: 1,
    readyBuffer: null,
    stateDir,
    workDir: join(stateDir, 'sessions'),
    runnerId: base.runnerId,
    statusPort: 0,
    statusHost: '127.0.0.1',
    jsonLogs: true,
    ...extra,
  }
}

/** `mode: 'host'` uses the host runtime entry; `'cli'` runs `cli/rollgate.ts runner` with flags. */
export function startRunner(
  options: RunnerCommandOptions,
  mode: 'host' | 'cli' = 'host',
  extraEnv: Record<string, string> = {},
): RunnerProc {
  const args =
    mode === 'host'
      ? [ENTRY, JSON.stringify(options)]
      : [
          CLI,
          'runner',
          '--edge',
          options.edge,
          '--token',
          options.token,
          '--upstream',
          options.upstream ?? 'none',
          '--runtime',
          options.runtime,
          '--max-init',
          String(options.maxInit),
          '--max-run',
          String(options.maxRun),
          '--max-postrun',
          String(options.maxPostrun),
          '--state-dir',
          options.stateDir,
          '--runner-id',
          options.runnerId,
          '--status-port',
          String(options.statusPort),
          '--json-logs',
          ...(options.readyBuffer !== null ? ['--ready-buffer', String(options.readyBuffer)] : []),
          ...(options.workDir ? ['--work-dir', options.workDir] : []),
          ...(options.image ? ['--image', options.image] : []),
          ...(options.roBind ?? []).flatMap((bind) => ['--ro-bind', `${bind.source}:${bind.target}`]),
        ]
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...extraEnv } })
  const lines: LogLine[] = []
  let raw = ''
  let pending = ''
  const waiters = new Set<() => void>()
  child.stderr?.on('data', (chunk: Buffer) => {
    raw += chunk.toString()
    if (raw.length > 400_000) raw = raw.slice(-200_000)
    pending += chunk.toString()
    let newline = pending.indexOf('\n')
    while (newline >= 0) {
      const line = pending.slice(0, newline)
      pending = pending.slice(newline + 1)
      try {
        lines.push(JSON.parse(line) as LogLine)
      } catch {
        // not a log line
      }
      newline = pending.indexOf('\n')
    }
    for (const wake of [...waiters]) wake()
  })
  child.stdout?.on('data', (chunk: Buffer) => {
    raw += chunk.toString()
  })
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)))
  const proc: RunnerProc = {
    child,
    lines,
    exited,
    output: () => raw,
    async waitFor(predicate, timeoutMs = 30_000, label = 'log line') {
      const deadline = Date.now() + timeoutMs
      let seen = 0
      for (;;) {
        for (; seen < lines.length; seen++) if (predicate(lines[seen] as LogLine)) return lines[seen] as LogLine
        if (child.exitCode !== null) throw new Error(`runner exited (${child.exitCode}) before ${label}\n${raw.slice(-3000)}`)
        const left = deadline - Date.now()
        if (left <= 0) throw new Error(`no ${label} within ${timeoutMs} ms\n${raw.slice(-3000)}`)
        await new Promise<void>((resolve) => {
          const timer = setTimeout(done, Math.min(left, 500))
          function done() {
            clearTimeout(timer)
            waiters.delete(done)
            resolve()
          }
          waiters.add(done)
        })
      }
    },
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return
      child.kill('SIGKILL')
      await exited
    },
  }
  return proc
}
