/**
 * @module
 * The `apptainer` backend (rootless, daemonless): one instance per session driven through the CLI
 * (`ROLLGATE_APPTAINER_BIN`, Polar's `POLAR_APPTAINER_BIN`, else `apptainer` on PATH); argv in `argv.ts`.
 * The image is a `.sif` path or any Apptainer URI (`docker-daemon:<tag>`, `docker://…`).
 *
 * No Apptainer binary exists on the machines this was written on: the argv is unit-tested, and the process
 * flow runs against a stand-in CLI (`test/support/fake-apptainer.mjs`), not a real instance.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdir, mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join, posix } from 'node:path'
import type { Readable, Writable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import type { RuntimeSpec } from '../../../src/contract/rollout.ts'
import { CONTAINER_CAPABILITIES, CONTAINER_EDGE_PORT, ContainerRuntime } from '../container-runtime.ts'
import { type EdgeRelay, startEdgeRelay } from '../edge-relay.ts'
import { childExit, shellQuote, waitForFile } from '../exec-support.ts'
import { insidePath } from '../paths.ts'
import { type ContainerRuntimeOptions, type ExecRequest, type ExecResult, pidsLimit, type RuntimeContext } from '../runtime.ts'
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

export const APPTAINER_EDGE_PORT = CONTAINER_EDGE_PORT
const CLI_TIMEOUT_MS = 600_000
const READY_TIMEOUT_MS = 60_000

export const APPTAINER_CAPABILITIES = CONTAINER_CAPABILITIES

export function apptainerBinary(options: Pick<ApptainerRuntimeOptions, 'bin'> = {}): string {
  return options.bin ?? process.env.ROLLGATE_APPTAINER_BIN ?? process.env.POLAR_APPTAINER_BIN ?? 'apptainer'
}

export class ApptainerRuntime extends ContainerRuntime {
  readonly backend = 'apptainer'
  readonly homeDir = APPTAINER_HOME
  readonly name: string
  private readonly options: ApptainerRuntimeOptions
  private readonly bin: string
  private stateDir: string | null = null
  private relay: EdgeRelay | null = null
  private relayProcess: ChildProcess | null = null
  private instanceStarted = false

  constructor(spec: RuntimeSpec, context: RuntimeContext, options: ApptainerRuntimeOptions = {}) {
    super('apptainer', spec, context, options, ' (a .sif path or an Apptainer URI)')
    this.options = options
    this.bin = apptainerBinary(options)
    this.name = instanceName(context.sessionId)
  }

  private async cli(argv: string[], timeoutMs = CLI_TIMEOUT_MS): Promise<{ code: number; stderr: string }> {
    const child = spawn(this.bin, argv, { stdio: ['ignore', 'ignore', 'pipe'] })
    let stderr = ''
    child.stderr?.on('data', (chunk: Buffer) => {
      stderr = (stderr + chunk.toString()).slice(-8000)
    })
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs)
    const code = await childExit(child)
    clearTimeout(timer)
    return { code, stderr }
  }

  protected async startUp(): Promise<void> {
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
      pidsLimit: pidsLimit(this.spec, this.options.pidsLimit),
    })
    this.assertStillStarting()
    const started = await this.cli(argv)
    if (started.code !== 0) throw new Error(`apptainer instance start failed (${started.code}): ${started.stderr.trim()}`)
    this.instanceStarted = true
    if (this.network === 'none') {
      const relay = spawn(this.bin, relayArgv(this.name, this.edgePort), { stdio: 'ignore' })
      this.relayProcess = relay
      await waitForFile(join(controlDir, 'ready'), READY_TIMEOUT_MS, childExit(relay))
    }
    const probe = await this.runExec({ command: `mkdir -p ${shellQuote(this.workDir)}`, cwd: '/', timeoutMs: 60_000 })
    if (probe.exitCode !== 0) throw new Error(`apptainer exec failed: ${probe.stderr.trim() || `exit ${probe.exitCode}`}`)
  }

  protected async runExec(request: ExecRequest): Promise<ExecResult> {
    const stateDir = this.stateDir
    if (!stateDir) throw new Error('runtime not started')
    const pidfile = `exec-${randomBytes(6).toString('hex')}.pid`
    const argv = execArgv({
      name: this.name,
      cwd: insidePath(request.cwd ?? this.workDir),
      env: request.env ?? {},
      command: request.command,
      pidfile: `${HELPER_CONTROL_DIR}/${pidfile}`,
    })
    try {
      return await this.supervise(request, (stdout, stderr) => {
        const child = spawn(this.bin, argv, { stdio: ['ignore', 'pipe', 'pipe'] })
        const closed = childExit(child)
        return {
          kill: async () => {
            try {
              await waitForFile(join(stateDir, 'ctl', pidfile), 10_000, closed)
              await this.cli(killArgv(this.name, `${HELPER_CONTROL_DIR}/${pidfile}`), 30_000)
            } catch {
              child.kill('SIGKILL') // never got to start its command (or ended meanwhile)
            }
          },
          done: closed,
          finished: Promise.all([closed, stdout.consume(child.stdout!), stderr.consume(child.stderr!)]),
          exitCode: () => closed,
        }
      })
    } finally {
      await rm(join(stateDir, 'ctl', pidfile), { force: true })
    }
  }

  protected async putArchive(inside: string, archive: Readable): Promise<void> {
    const child = spawn(this.bin, untarArgv(this.name, posix.dirname(inside)), { stdio: ['pipe', 'ignore', 'pipe'] })
    const [code] = await Promise.all([childExit(child), pipeline(archive, child.stdin as Writable).catch(() => {})])
    if (code !== 0) throw new Error(`apptainer upload to ${inside} failed (exit ${code})`)
  }

  protected async getArchive(inside: string, into: Writable): Promise<void> {
    const child = spawn(this.bin, tarArgv(this.name, posix.dirname(inside), posix.basename(inside)), { stdio: ['ignore', 'pipe', 'pipe'] })
    const [code] = await Promise.all([childExit(child), pipeline(child.stdout!, into)])
    if (code !== 0) throw new Error(`apptainer download of ${inside} failed (exit ${code})`)
  }

  protected async tearDown(): Promise<void> {
    await this.startSettled()
    this.killRunning()
    if (this.instanceStarted) await this.cli(instanceStopArgv(this.name), 30_000)
    this.relayProcess?.kill('SIGKILL')
    await this.runningEnded()
    await this.relay?.close()
    if (this.stateDir) await rm(this.stateDir, { recursive: true, force: true }).catch(() => {})
  }
}
