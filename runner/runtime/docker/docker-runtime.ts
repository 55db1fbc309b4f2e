/**
 * @module
 * The `docker` backend: one container per session through the Docker Engine API (dockerode over the unix
 * socket), following Polar's layout (session dir bind-mounted at `/polar/session`, commands via
 * `bash -lc`, cwd `cwd ?? workdir ?? /polar/session`).
 *
 * Network: `none` (only loopback) plus the forwarded edge port: the container's main process is the
 * runner's launcher (the runner's Node binary with its own loader and libraries bind-mounted, so any
 * image works, busybox included) relaying `127.0.0.1:<edgePort>` to a bind-mounted unix socket whose
 * other end goes to the edge. `host` only when the runner is configured for it (then the edge URL is used
 * as is). Each exec runs through the launcher in its own process group, its pid recorded in the control
 * dir, so a timeout or cancel kills the whole group with a second exec.
 *
 * Limits: `memory_mb` (Memory), `cpus` (NanoCpus), `kwargs.pids_limit` / runner default (PidsLimit), GPUs
 * through the nvidia device request. No storage limit.
 */
import { randomBytes } from 'node:crypto'
import { mkdir, mkdtemp, rm, stat } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { basename, dirname, join, posix } from 'node:path'
import { PassThrough, type Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import Dockerode from 'dockerode'
import { extract, pack } from 'tar-fs'
import type { RuntimeSpec } from '../../../src/contract/rollout.ts'
import { type EdgeRelay, startEdgeRelay } from '../edge-relay.ts'
import { execResult, guardExec, OutputTail, shellQuote, waitForFile } from '../exec-support.ts'
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
import { HELPER_CONTROL_DIR, helperCommand, helperMounts } from '../sandbox/host-node.ts'

export interface DockerRuntimeOptions extends ContainerRuntimeOptions {
  /** Docker Engine socket (default from `DOCKER_HOST=unix://…`, else `/var/run/docker.sock`). */
  socketPath?: string
  /** A client to reuse (tests); overrides `socketPath`. */
  docker?: Dockerode
}

export const DOCKER_EDGE_PORT = 8787
const READY_TIMEOUT_MS = 30_000
const KILL_WAIT_MS = 10_000

export const DOCKER_CAPABILITIES: RuntimeCapabilities = {
  isolatesNetwork: true,
  cpuLimits: true,
  memoryLimits: true,
  storageLimits: false,
  gpus: true,
}

export function dockerSocketPath(options: Pick<DockerRuntimeOptions, 'socketPath'> = {}): string {
  if (options.socketPath) return options.socketPath
  const host = process.env.DOCKER_HOST
  if (host?.startsWith('unix://')) return host.slice('unix://'.length)
  return '/var/run/docker.sock'
}

function containerName(sessionId: string): string {
  return `rollgate-${sessionId.replace(/[^A-Za-z0-9_.-]/g, '_').slice(0, 48)}-${randomBytes(3).toString('hex')}`
}

interface RunningExec {
  kill(): void
  done: Promise<unknown>
}

export class DockerRuntime implements Runtime {
  readonly backend = 'docker'
  readonly capabilities = DOCKER_CAPABILITIES
  readonly spec: RuntimeSpec
  readonly context: RuntimeContext
  readonly workDir: string
  homeDir = '/root'
  private readonly options: DockerRuntimeOptions
  private readonly docker: Dockerode
  private readonly network: 'none' | 'host'
  private readonly edgePort: number
  private container: Dockerode.Container | null = null
  private controlDir: string | null = null
  private relay: EdgeRelay | null = null
  private starting: Promise<void> | null = null
  private stopping: Promise<void> | null = null
  private started = false
  private readonly running = new Set<RunningExec>()

  constructor(spec: RuntimeSpec, context: RuntimeContext, options: DockerRuntimeOptions = {}) {
    if (!spec.image) throw new Error('the docker runtime needs runtime.image')
    if (spec.storage_mb !== null) throw new Error('the docker runtime cannot limit storage (runtime.storage_mb must be null)')
    this.spec = spec
    this.context = context
    this.options = options
    this.docker = options.docker ?? new Dockerode({ socketPath: dockerSocketPath(options) })
    this.network = options.network ?? 'none'
    this.edgePort = options.edgePort ?? DOCKER_EDGE_PORT
    this.workDir = insidePath(spec.workdir ?? SESSION_MOUNT)
  }

  get edgeUrlInside(): string {
    if (this.network === 'host') return this.context.edgeUrl.replace(/\/+$/, '')
    const url = new URL(this.context.edgeUrl)
    return `http://127.0.0.1:${this.edgePort}${url.pathname.replace(/\/+$/, '')}`
  }

  /** The container's name (for logs and operators). */
  get containerId(): string | null {
    return this.container?.id ?? null
  }

  start(): Promise<void> {
    if (this.stopping) return Promise.reject(new Error('runtime stopped'))
    this.starting ??= this.doStart()
    return this.starting
  }

  private async doStart(): Promise<void> {
    const controlDir = await mkdtemp(join(this.options.stateDir ?? tmpdir(), 'rgctl-'))
    this.controlDir = controlDir
    await mkdir(this.context.sessionDir, { recursive: true })
    const binds = [`${this.context.sessionDir}:${SESSION_MOUNT}`, `${controlDir}:${HELPER_CONTROL_DIR}`]
    for (const mount of helperMounts()) binds.push(`${mount.source}:${mount.target}:ro`)
    for (const bind of this.options.readOnlyBinds ?? []) binds.push(`${bind.source}:${bind.target}:ro`)
    const ready = `${HELPER_CONTROL_DIR}/ready`
    let main: string[]
    if (this.network === 'none') {
      this.relay = await startEdgeRelay(join(controlDir, 'edge.sock'), this.context.edgeUrl)
      main = helperCommand(['serve', '--port', String(this.edgePort), '--socket', `${HELPER_CONTROL_DIR}/edge.sock`, '--ready', ready])
    } else {
      main = helperCommand(['idle', '--ready', ready])
    }
    const pids = numberKwarg(this.spec.kwargs.pids_limit) ?? this.options.pidsLimit ?? null
    if (this.stopping) throw new Error('runtime cancelled during start')
    this.container = await this.docker.createContainer({
      name: containerName(this.context.sessionId),
      Image: this.spec.image,
      Entrypoint: [],
      Cmd: main,
      Labels: { 'rollgate.session': this.context.sessionId },
      HostConfig: {
        NetworkMode: this.network,
        Binds: binds,
        Init: true,
        ...(this.spec.memory_mb ? { Memory: this.spec.memory_mb * 1024 * 1024 } : {}),
        ...(this.spec.cpus ? { NanoCpus: Math.round(this.spec.cpus * 1e9) } : {}),
        ...(pids ? { PidsLimit: pids } : {}),
        ...(this.spec.gpus > 0 ? { DeviceRequests: [{ Driver: 'nvidia', Count: this.spec.gpus, Capabilities: [['gpu']] }] } : {}),
      },
    })
    if (this.stopping) throw new Error('runtime cancelled during start')
    await this.container.start()
    const exited = this.container.wait().then((state: { StatusCode?: number }) => state)
    try {
      await waitForFile(join(controlDir, 'ready'), READY_TIMEOUT_MS, exited)
    } catch (error) {
      const logs = await this.container
        .logs({ stdout: true, stderr: true, tail: 50 })
        .then((buffer) => String(buffer))
        .catch(() => '')
      throw new Error(`container helper did not come up (${(error as Error).message}): ${logs.trim()}`)
    }
    const probe = await this.runExec({ command: `mkdir -p ${shellQuote(this.workDir)} && printf %s "$HOME"`, cwd: '/', timeoutMs: 30_000 })
    if (probe.exitCode !== 0) throw new Error(`container exec failed: ${probe.stderr.trim() || `exit ${probe.exitCode}`}`)
    if (probe.stdout.startsWith('/')) this.homeDir = probe.stdout
    this.started = true
  }

  async exec(request: ExecRequest): Promise<ExecResult> {
    if (this.stopping) throw new Error('runtime stopped')
    if (!this.started) throw new Error('runtime not started')
    return this.runExec(request)
  }

  private async runExec(request: ExecRequest): Promise<ExecResult> {
    const container = this.container
    const controlDir = this.controlDir
    if (!container || !controlDir) throw new Error('runtime not started')
    const startedAt = Date.now()
    const id = randomBytes(6).toString('hex')
    const pidfile = `exec-${id}.pid`
    const env = Object.entries(request.env ?? {}).map(([key, value]) => `${key}=${value}`)
    const exec = await container.exec({
      Cmd: helperCommand(['run', '--pidfile', `${HELPER_CONTROL_DIR}/${pidfile}`, '--', request.command]),
      Env: env,
      WorkingDir: insidePath(request.cwd ?? this.workDir),
      AttachStdout: true,
      AttachStderr: true,
      AttachStdin: false,
      Tty: false,
    })
    const stdout = await OutputTail.open(request.stdoutPath)
    const stderr = await OutputTail.open(request.stderrPath)
    const stream = (await exec.start({ hijack: true, stdin: false })) as Readable
    const out = new PassThrough()
    const err = new PassThrough()
    this.docker.modem.demuxStream(stream, out, err)
    const ended = new Promise<void>((resolve) => {
      stream.once('end', resolve)
      stream.once('close', resolve)
      stream.once('error', () => resolve())
    }).then(() => {
      out.end()
      err.end()
    })
    let killing: Promise<void> | null = null
    const kill = () => {
      killing ??= this.killExec(join(controlDir, pidfile), `${HELPER_CONTROL_DIR}/${pidfile}`, ended)
    }
    const entry: RunningExec = { kill, done: ended }
    this.running.add(entry)
    const guard = guardExec(request, kill)
    try {
      await Promise.all([ended, stdout.consume(out), stderr.consume(err)])
      await killing
      const info = await exec.inspect()
      return execResult(info.ExitCode ?? -1, stdout, stderr, guard, startedAt)
    } finally {
      guard.release()
      this.running.delete(entry)
      await stdout.close()
      await stderr.close()
      await rm(join(controlDir, pidfile), { force: true })
    }
  }

  /** Kill an exec's process group once its pidfile exists (unless it ends first). */
  private async killExec(hostPidfile: string, insidePidfile: string, ended: Promise<void>): Promise<void> {
    const container = this.container
    if (!container) return
    try {
      await waitForFile(hostPidfile, KILL_WAIT_MS, ended)
    } catch {
      return // ended on its own, or never started its command
    }
    const killer = await container.exec({ Cmd: helperCommand(['kill', insidePidfile]), AttachStdout: true, AttachStderr: true })
    const stream = (await killer.start({ hijack: true, stdin: false })) as Readable
    stream.resume()
    await new Promise<void>((resolve) => {
      stream.once('end', resolve)
      stream.once('close', resolve)
      stream.once('error', () => resolve())
    })
  }

  private async makeDir(target: string): Promise<void> {
    const result = await this.runExec({ command: `mkdir -p ${shellQuote(target)}`, timeoutMs: 60_000 })
    if (result.exitCode !== 0) throw new Error(`mkdir ${target} failed: ${result.stderr.trim()}`)
  }

  async upload(source: string, target: string): Promise<void> {
    if (this.stopping) throw new Error('runtime stopped')
    if (!this.started) throw new Error('runtime not started')
    const inside = insidePath(target, this.workDir)
    const session = await sessionHostPath(this.context.sessionDir, inside)
    if (session !== null) return hostCopy(source, session)
    const parent = posix.dirname(inside)
    const name = posix.basename(inside)
    await this.makeDir(parent)
    const info = await stat(source)
    const archive = info.isDirectory()
      ? pack(source, { map: (header) => ({ ...header, name: posix.join(name, header.name) }) })
      : pack(dirname(source), { entries: [basename(source)], map: (header) => ({ ...header, name }) })
    await this.container!.putArchive(archive as unknown as NodeJS.ReadableStream, { path: parent })
  }

  async download(source: string, target: string): Promise<void> {
    if (this.stopping) throw new Error('runtime stopped')
    if (!this.started) throw new Error('runtime not started')
    const inside = insidePath(source, this.workDir)
    const session = await sessionHostPath(this.context.sessionDir, inside)
    if (session !== null) return hostCopy(session, target)
    const archive = (await this.container!.getArchive({ path: inside })) as unknown as Readable
    const top = posix.basename(inside)
    const name = basename(target)
    await mkdir(dirname(target), { recursive: true })
    await pipeline(
      archive,
      extract(dirname(target), {
        map: (header) => {
          const rest = header.name === top ? '' : header.name.slice(top.length + 1)
          return { ...header, name: rest ? posix.join(name, rest) : name }
        },
      }),
    )
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
    // Removing the container kills everything in it; the hijacked exec streams then end.
    await this.container?.remove({ force: true, v: true }).catch((error: { statusCode?: number }) => {
      if (error.statusCode !== 404) throw error
    })
    await Promise.all([...this.running].map((entry) => entry.done))
    await this.relay?.close()
    if (this.controlDir) await rm(this.controlDir, { recursive: true, force: true }).catch(() => {})
  }
}

function numberKwarg(value: unknown): number | null {
  return typeof value === 'number' && Number.isInteger(value) && value > 0 ? value : null
}
