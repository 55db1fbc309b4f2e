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
import { mkdtemp, mkdir, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join, posix } from 'node:path'
import { PassThrough, type Readable, type Writable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import Dockerode from 'dockerode'
import type { RuntimeSpec } from '../../../src/contract/rollout.ts'
import { CONTAINER_CAPABILITIES, CONTAINER_EDGE_PORT, ContainerRuntime } from '../container-runtime.ts'
import { type EdgeRelay, startEdgeRelay } from '../edge-relay.ts'
import { shellQuote, streamEnded, waitForFile } from '../exec-support.ts'
import { insidePath } from '../paths.ts'
import {
  type ContainerRuntimeOptions,
  type ExecRequest,
  type ExecResult,
  pidsLimit,
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

export const DOCKER_EDGE_PORT = CONTAINER_EDGE_PORT
const READY_TIMEOUT_MS = 30_000
const KILL_WAIT_MS = 10_000

export const DOCKER_CAPABILITIES = CONTAINER_CAPABILITIES

export function dockerSocketPath(options: Pick<DockerRuntimeOptions, 'socketPath'> = {}): string {
  if (options.socketPath) return options.socketPath
  const host = process.env.DOCKER_HOST
  if (host?.startsWith('unix://')) return host.slice('unix://'.length)
  return '/var/run/docker.sock'
}

function containerName(sessionId: string): string {
  return `rollgate-${sessionId.replace(/[^A-Za-z0-9_.-]/g, '_').slice(0, 48)}-${randomBytes(3).toString('hex')}`
}

export class DockerRuntime extends ContainerRuntime {
  readonly backend = 'docker'
  homeDir = '/root'
  private readonly options: DockerRuntimeOptions
  private readonly docker: Dockerode
  private container: Dockerode.Container | null = null
  private controlDir: string | null = null
  private relay: EdgeRelay | null = null

  constructor(spec: RuntimeSpec, context: RuntimeContext, options: DockerRuntimeOptions = {}) {
    super('docker', spec, context, options)
    this.options = options
    this.docker = options.docker ?? new Dockerode({ socketPath: dockerSocketPath(options) })
  }

  /** The container's name (for logs and operators). */
  get containerId(): string | null {
    return this.container?.id ?? null
  }

  protected async startUp(): Promise<void> {
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
    const pids = pidsLimit(this.spec, this.options.pidsLimit)
    this.assertStillStarting()
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
    this.assertStillStarting()
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
  }

  protected async runExec(request: ExecRequest): Promise<ExecResult> {
    const container = this.container
    const controlDir = this.controlDir
    if (!container || !controlDir) throw new Error('runtime not started')
    const pidfile = `exec-${randomBytes(6).toString('hex')}.pid`
    try {
      return await this.supervise(request, async (stdout, stderr) => {
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
        const stream = (await exec.start({ hijack: true, stdin: false })) as Readable
        const out = new PassThrough()
        const err = new PassThrough()
        this.docker.modem.demuxStream(stream, out, err)
        const ended = streamEnded(stream).then(() => {
          out.end()
          err.end()
        })
        return {
          kill: () => this.killExec(join(controlDir, pidfile), `${HELPER_CONTROL_DIR}/${pidfile}`, ended),
          done: ended,
          finished: Promise.all([ended, stdout.consume(out), stderr.consume(err)]),
          // A stop that removes the container also removes its exec instances (404): the command was killed.
          exitCode: async () =>
            exec.inspect().then(
              (info) => info.ExitCode ?? -1,
              (error: { statusCode?: number }) => {
                if (error.statusCode === 404) return -1
                throw error
              },
            ),
        }
      })
    } finally {
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
    await streamEnded(stream)
  }

  protected async putArchive(inside: string, archive: Readable): Promise<void> {
    const parent = posix.dirname(inside)
    const made = await this.runExec({ command: `mkdir -p ${shellQuote(parent)}`, timeoutMs: 60_000 })
    if (made.exitCode !== 0) throw new Error(`mkdir ${parent} failed: ${made.stderr.trim()}`)
    await this.container!.putArchive(archive as unknown as NodeJS.ReadableStream, { path: parent })
  }

  protected async getArchive(inside: string, into: Writable): Promise<void> {
    const archive = (await this.container!.getArchive({ path: inside })) as unknown as Readable
    await pipeline(archive, into)
  }

  protected async tearDown(): Promise<void> {
    await this.startSettled()
    // Removing the container kills everything in it; the hijacked exec streams then end.
    await this.container?.remove({ force: true, v: true }).catch((error: { statusCode?: number }) => {
      if (error.statusCode !== 404) throw error
    })
    await this.runningEnded()
    await this.relay?.close()
    if (this.controlDir) await rm(this.controlDir, { recursive: true, force: true }).catch(() => {})
  }
}
