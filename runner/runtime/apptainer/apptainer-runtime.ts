/**
 * @module
 * The `apptainer` backend (rootless, daemonless): one instance per session driven through the CLI
 * (`ROLLGATE_APPTAINER_BIN`, Polar's `POLAR_APPTAINER_BIN`, else `apptainer` on PATH); argv in `argv.ts`.
 * The image is a `.sif` path or any Apptainer URI (`docker-daemon:<tag>`, `docker://…`).
 *
 * No Apptainer binary exists on the machines this was written on: the argv is unit-tested, the process
 * flow is not exercised against a real instance.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdir, mkdtemp, rm, stat } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { basename, dirname, join, posix } from 'node:path'
import type { Readable, Writable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { extract, pack } from 'tar-fs'
import type { RuntimeSpec } from '../../../src/contract/rollout.ts'
import { type EdgeRelay, startEdgeRelay } from '../edge-relay.ts'
import { execResult, guardExec, OutputTail, waitForFile } from '../exec-support.ts'
import { hostCopy, insidePath, sessionHostPath } from '../paths.ts'
import {
  type ContainerRuntimeOptions,
  type ExecRequest,
  type ExecResult,
  type Runtime,
  type RuntimeCapabilities,
  type RuntimeContext,
  SESSION_MOUNT,
} from '../runtime.ts'
import { HELPER_CONTROL_DIR, helperMounts } from '../sandbox/host-node.ts'
import {
  APPTAINER_HOME,
  execArgv,
  instanceName,
  instanceStartArgv,
  instanceStopArgv,
  killArgv,
  relayArgv,
  tarArgv,
  untarArgv,
} from './argv.ts'

export interface ApptainerRuntimeOptions extends ContainerRuntimeOptions {
  /** CLI binary (default `ROLLGATE_APPTAINER_BIN`, `POLAR_APPTAINER_BIN`, else `apptainer`). */
  bin?: string
}

export const APPTAINER_EDGE_PORT = 8787
const CLI_TIMEOUT_MS = 600_000
const READY_TIMEOUT_MS = 60_000

export const APPTAINER_CAPABILITIES: RuntimeCapabilities = {
  isolatesNetwork: true,
  cpuLimits: true,
  memoryLimits: true,
  storageLimits: false,
  gpus: true,
}

export function apptainerBinary(options: Pick<ApptainerRuntimeOptions, 'bin'> = {}): string {
  return options.bin ?? process.env.ROLLGATE_APPTAINER_BIN ?? process.env.POLAR_APPTAINER_BIN ?? 'apptainer'
}

interface RunningExec {
  kill(): void
  done: Promise<unknown>
}

function exitOf(child: ChildProcess): Promise<number> {
  return new Promise((resolve) => {
    child.once('error', () => resolve(127))
    child.once('close', (code, signal) => resolve(code ?? (signal ? 137 : 1)))
  })
}

export class ApptainerRuntime implements Runtime {
  readonly backend = 'apptainer'
  readonly capabilities = APPTAINER_CAPABILITIES
  readonly homeDir = APPTAINER_HOME
  readonly spec: RuntimeSpec
  readonly context: RuntimeContext
  readonly workDir: string
  readonly name: string
  private readonly options: ApptainerRuntimeOptions
  private readonly bin: string
  private readonly network: 'none' | 'host'
  private readonly edgePort: number
  private stateDir: string | null = null
  private relay: EdgeRelay | null = null
  private relayProcess: ChildProcess | null = null
  private instanceStarted = false
  private started = false
  private starting: Promise<void> | null = null
  private stopping: Promise<void> | null = null
  private readonly running = new Set<RunningExec>()

  constructor(spec: RuntimeSpec, context: RuntimeContext, options: ApptainerRuntimeOptions = {}) {
    if (!spec.image) throw new Error('the apptainer runtime needs runtime.image (a .sif path or an Apptainer URI)')
    if (spec.storage_mb !== null) throw new Error('the apptainer runtime cannot limit storage (runtime.storage_mb must be null)')
    this.spec = spec
    this.context = context
    this.options = options
    this.bin = apptainerBinary(options)
    this.network = options.network ?? 'none'
    this.edgePort = options.edgePort ?? APPTAINER_EDGE_PORT
    this.workDir = insidePath(spec.workdir ?? SESSION_MOUNT)
    this.name = instanceName(context.sessionId)
  }

  get edgeUrlInside(): string {
    if (this.network === 'host') return this.context.edgeUrl.replace(/\/+$/, '')
    return `http://127.0.0.1:${this.edgePort}${new URL(this.context.edgeUrl).pathname.replace(/\/+$/, '')}`
  }

  private async cli(argv: string[], timeoutMs = CLI_TIMEOUT_MS): Promise<{ code: number; stderr: string }> {
    const child = spawn(this.bin, argv, { stdio: ['ignore', 'ignore', 'pipe'] })
    let stderr = ''
    child.stderr?.on('data', (chunk: Buffer) => {
      stderr = (stderr + chunk.toString()).slice(-8000)
    })
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs)
    const code = await exitOf(child)
    clearTimeout(timer)
    return { code, stderr }
  }

  start(): Promise<void> {
    if (this.stopping) return Promise.reject(new Error('runtime stopped'))
    this.starting ??= this.doStart()
    return this.starting
  }

  private async doStart(): Promise<void> {
    const stateDir = await mkdtemp(join(this.options.stateDir ?? tmpdir(), 'rgapp-'))
    this.stateDir = stateDir
    const controlDir = join(stateDir, 'ctl')
    const homeDir = join(stateDir, 'home')
    const overlayDir = join(this.context.sessionDir, 'overlay')
    for (const dir of [controlDir, homeDir, overlayDir]) await mkdir(dir, { recursive: true })
    if (this.network === 'none') this.relay = await startEdgeRelay(join(controlDir, 'edge.sock'), this.context.edgeUrl)
    const argv = instanceStartArgv({
      image: this.spec.image!,
      name: this.name,
      sessionDir: this.context.sessionDir,
      overlayDir,
      controlDir,
      homeDir,
      helperMounts: helperMounts(),
      readOnlyBinds: this.options.readOnlyBinds ?? [],
      network: this.network,
      gpus: this.spec.gpus,
      memoryMb: this.spec.memory_mb,
      cpus: this.spec.cpus,
      pidsLimit: numberKwarg(this.spec.kwargs.pids_limit) ?? this.options.pidsLimit ?? null,
    })
    if (this.stopping) throw new Error('runtime cancelled during start')
    const started = await this.cli(argv)
    if (started.code !== 0) throw new Error(`apptainer instance start failed (${started.code}): ${started.stderr.trim()}`)
    this.instanceStarted = true
    if (this.network === 'none') {
      const relay = spawn(this.bin, relayArgv(this.name, this.edgePort), { stdio: 'ignore' })
      this.relayProcess = relay
      await waitForFile(join(controlDir, 'ready'), READY_TIMEOUT_MS, exitOf(relay))
    }
    const probe = await this.runExec({ command: `mkdir -p '${this.workDir.replaceAll("'", `'\\''`)}'`, cwd: '/', timeoutMs: 60_000 })
    if (probe.exitCode !== 0) throw new Error(`apptainer exec failed: ${probe.stderr.trim() || `exit ${probe.exitCode}`}`)
    this.started = true
  }

  async exec(request: ExecRequest): Promise<ExecResult> {
    if (this.stopping) throw new Error('runtime stopped')
    if (!this.started) throw new Error('runtime not started')
    return this.runExec(request)
  }

  private async runExec(request: ExecRequest): Promise<ExecResult> {
    const stateDir = this.stateDir
    if (!stateDir) throw new Error('runtime not started')
    const startedAt = Date.now()
    const pidfile = `exec-${randomBytes(6).toString('hex')}.pid`
    const argv = execArgv({
      name: this.name,
      cwd: insidePath(request.cwd ?? this.workDir),
      env: request.env ?? {},
      command: request.command,
      pidfile: `${HELPER_CONTROL_DIR}/${pidfile}`,
    })
    const stdout = await OutputTail.open(request.stdoutPath)
    const stderr = await OutputTail.open(request.stderrPath)
    const child = spawn(this.bin, argv, { stdio: ['ignore', 'pipe', 'pipe'] })
    const closed = exitOf(child)
    let killing: Promise<void> | null = null
    const kill = () => {
      killing ??= (async () => {
        try {
          await waitForFile(join(stateDir, 'ctl', pidfile), 10_000, closed)
          await this.cli(killArgv(this.name, `${HELPER_CONTROL_DIR}/${pidfile}`), 30_000)
        } catch {
          child.kill('SIGKILL') // never got to start its command (or ended meanwhile)
        }
      })()
    }
    const entry: RunningExec = { kill, done: closed }
    this.running.add(entry)
    const guard = guardExec(request, kill)
    try {
      const [code] = await Promise.all([closed, stdout.consume(child.stdout!), stderr.consume(child.stderr!)])
      await killing
      return execResult(code, stdout, stderr, guard, startedAt)
    } finally {
      guard.release()
      this.running.delete(entry)
      await stdout.close()
      await stderr.close()
      await rm(join(stateDir, 'ctl', pidfile), { force: true })
    }
  }

  async upload(source: string, target: string): Promise<void> {
    if (this.stopping) throw new Error('runtime stopped')
    if (!this.started) throw new Error('runtime not started')
    const inside = insidePath(target, this.workDir)
    const session = await sessionHostPath(this.context.sessionDir, inside)
    if (session !== null) return hostCopy(source, session)
    const name = posix.basename(inside)
    const info = await stat(source)
    const archive = info.isDirectory()
      ? pack(source, { map: (header) => ({ ...header, name: posix.join(name, header.name) }) })
      : pack(dirname(source), { entries: [basename(source)], map: (header) => ({ ...header, name }) })
    const child = spawn(this.bin, untarArgv(this.name, posix.dirname(inside)), { stdio: ['pipe', 'ignore', 'pipe'] })
    const [code] = await Promise.all([exitOf(child), pipeline(archive as unknown as Readable, child.stdin as Writable).catch(() => {})])
    if (code !== 0) throw new Error(`apptainer upload to ${inside} failed (exit ${code})`)
  }

  async download(source: string, target: string): Promise<void> {
    if (this.stopping) throw new Error('runtime stopped')
    if (!this.started) throw new Error('runtime not started')
    const inside = insidePath(source, this.workDir)
    const session = await sessionHostPath(this.context.sessionDir, inside)
    if (session !== null) return hostCopy(session, target)
    const top = posix.basename(inside)
    const name = basename(target)
    await mkdir(dirname(target), { recursive: true })
    const child = spawn(this.bin, tarArgv(this.name, posix.dirname(inside), top), { stdio: ['ignore', 'pipe', 'pipe'] })
    const unpack = extract(dirname(target), {
      map: (header) => {
        const rest = header.name === top ? '' : header.name.replace(/^[^/]*\/?/, '')
        return { ...header, name: rest ? posix.join(name, rest) : name }
      },
    })
    const [code] = await Promise.all([exitOf(child), pipeline(child.stdout!, unpack)])
    if (code !== 0) throw new Error(`apptainer download of ${inside} failed (exit ${code})`)
  }

  stop(): Promise<void> {
    this.stopping ??= this.teardown()
    return this.stopping
  }

  cancel(): Promise<void> {
    for (const entry of this.running) entry.kill()
    return this.stop()
  }

  private async teardown(): Promise<void> {
    await this.starting?.catch(() => {})
    for (const entry of this.running) entry.kill()
    if (this.instanceStarted) await this.cli(instanceStopArgv(this.name), 30_000)
    this.relayProcess?.kill('SIGKILL')
    await Promise.all([...this.running].map((entry) => entry.done))
    await this.relay?.close()
    if (this.stateDir) await rm(this.stateDir, { recursive: true, force: true }).catch(() => {})
  }
}

function numberKwarg(value: unknown): number | null {
  return typeof value === 'number' && Number.isInteger(value) && value > 0 ? value : null
}
