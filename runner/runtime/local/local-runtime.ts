/**
 * @module
 * The `local` backend: one bubblewrap sandbox per exec over the session's private root (a host dir, so the
 * session's execs share their files anywhere outside the read-only system dirs: HOME=/root, /tmp, the work
 * dir, /tests, …) and `/polar/session`, while each exec runs in fresh PID/IPC/UTS/network namespaces with
 * only loopback (and its processes end with it). The edge is the one thing reachable: the launcher inside
 * listens on `127.0.0.1:<edgePort>` before the command starts and relays to a unix socket whose other end
 * (`edge-relay.ts`) connects to the edge.
 *
 * Limits: time per exec (kill of the whole PID namespace), memory/cpu/pids through a per-session cgroup v1
 * when the hierarchy is writable, else memory through `prlimit --as` (virtual memory; Node-based harnesses
 * need a generous value there). No storage limit, no GPUs.
 */
import { spawn } from 'node:child_process'
import { accessSync, constants, existsSync, lstatSync, readFileSync, readlinkSync, realpathSync } from 'node:fs'
import { chmod, mkdir, mkdtemp, readlink, rm, symlink } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join, posix } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { RuntimeSpec } from '../../../src/contract/rollout.ts'
import { type EdgeRelay, forwardedEdgeUrl, startEdgeRelay } from '../edge-relay.ts'
import { childExit } from '../exec-support.ts'
import { RuntimeLifecycle } from '../lifecycle.ts'
import { hostCopy, hostPathWithin, insidePath, isUnder } from '../paths.ts'
import {
  type ExecRequest,
  type ExecResult,
  pidsLimit,
  type Runtime,
  type RuntimeCapabilities,
  type RuntimeContext,
  SESSION_MOUNT,
} from '../runtime.ts'
import { type Bind, bwrapArgs, encodeArgs, type SystemDir } from './bwrap-args.ts'
import { type Cgroup, createCgroup } from './cgroup.ts'

export interface LocalRuntimeOptions {
  /** bubblewrap binary (default `bwrap` on PATH). */
  bwrapPath?: string
  /** Loopback port inside the sandbox that reaches the edge (default 8787). */
  edgePort?: number
  /** Extra host dirs mounted read-only (prebuilt harness CLIs, caches), e.g. `{source: '/opt/harnesses', target: '/opt/harnesses'}`. */
  readOnlyBinds?: Bind[]
  /** Parent of the per-session private roots (default the OS temp dir). */
  stateDir?: string
  /** Process limit per session when the task sets none (cgroup only; default none). */
  pidsLimit?: number | null
}

export const LOCAL_EDGE_PORT = 8787
export const LOCAL_HOME = '/root'
const DEFAULT_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
const SYSTEM_DIRS = ['/usr', '/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32', '/etc', '/opt']
/** Mounted per exec (or the runner's helpers): never files of the private root. */
const VIRTUAL_DIRS = ['/proc', '/dev', '/sys', '/run/rollgate']
const LAUNCHER = fileURLToPath(new URL('../sandbox/launcher.mjs', import.meta.url))

function systemDirs(): SystemDir[] {
  const dirs: SystemDir[] = []
  for (const path of SYSTEM_DIRS) {
    if (!existsSync(path)) continue
    const info = lstatSync(path)
    if (info.isSymbolicLink()) dirs.push({ path, symlinkTarget: readlinkSync(path) })
    else if (info.isDirectory()) dirs.push({ path })
  }
  return dirs
}

function writableCgroup(controller: string): boolean {
  try {
    const line = readFileSync('/proc/self/cgroup', 'utf8')
      .split('\n')
      .find((entry) => entry.split(':')[1]?.split(',').includes(controller))
    if (!line) return false
    accessSync(join('/sys/fs/cgroup', controller, line.split(':')[2] ?? ''), constants.W_OK)
    return true
  } catch {
    return false
  }
}

let cachedCapabilities: RuntimeCapabilities | null = null
export function localCapabilities(): RuntimeCapabilities {
  cachedCapabilities ??= {
    isolatesNetwork: true,
    cpuLimits: writableCgroup('cpu'),
    memoryLimits: true,
    storageLimits: false,
    gpus: false,
  }
  return cachedCapabilities
}

function safeName(sessionId: string): string {
  return sessionId.replace(/[^A-Za-z0-9_.-]/g, '_').slice(0, 64)
}

export class LocalRuntime extends RuntimeLifecycle implements Runtime {
  readonly backend = 'local'
  readonly capabilities = localCapabilities()
  readonly homeDir = LOCAL_HOME
  readonly workDir: string
  private readonly edgePort: number
  private stateDir: string | null = null
  private rootDir: string | null = null
  private relay: EdgeRelay | null = null
  private cgroup: Cgroup | null = null
  private memoryRlimit: number | null = null
  private readonly dirs = systemDirs()

  readonly spec: RuntimeSpec
  readonly context: RuntimeContext
  private readonly options: LocalRuntimeOptions

  constructor(spec: RuntimeSpec, context: RuntimeContext, options: LocalRuntimeOptions = {}) {
    super()
    this.spec = spec
    this.context = context
    this.options = options
    if (spec.gpus > 0) throw new Error('the local runtime has no GPUs (runtime.gpus must be 0)')
    if (spec.storage_mb !== null) throw new Error('the local runtime cannot limit storage (runtime.storage_mb must be null)')
    if (spec.cpus !== null && !this.capabilities.cpuLimits) {
      throw new Error('runtime.cpus needs a writable cgroup v1 cpu controller (run the runner as root on a cgroup v1 host)')
    }
    this.edgePort = options.edgePort ?? LOCAL_EDGE_PORT
    this.workDir = insidePath(spec.workdir ?? SESSION_MOUNT)
    if (!isUnder(this.workDir, SESSION_MOUNT) && this.systemPath(this.workDir)) {
      throw new Error(`runtime.workdir ${this.workDir} is inside a read-only system dir`)
    }
    for (const virtual of VIRTUAL_DIRS) {
      if (isUnder(this.workDir, virtual)) throw new Error(`runtime.workdir ${this.workDir} is not a file path of the sandbox`)
    }
  }

  get edgeUrlInside(): string {
    return forwardedEdgeUrl(this.context.edgeUrl, this.edgePort)
  }

  protected async startUp(): Promise<void> {
    const base = await mkdtemp(join(this.options.stateDir ?? tmpdir(), `rollgate-local-${safeName(this.context.sessionId)}-`))
    this.stateDir = base
    await mkdir(this.context.sessionDir, { recursive: true })
    const root = join(base, 'root')
    this.rootDir = root
    for (const dir of ['root', 'tmp', 'polar/session', 'run/rollgate']) await mkdir(join(root, dir), { recursive: true })
    await chmod(join(root, 'tmp'), 0o1777)
    await this.ensureSystemLinks()
    // the work dir exists before the first exec (it is every exec's default cwd), in the session dir or the root
    const workHost = isUnder(this.workDir, SESSION_MOUNT)
      ? await hostPathWithin(this.context.sessionDir, posix.relative(SESSION_MOUNT, this.workDir))
      : await hostPathWithin(root, posix.relative('/', this.workDir))
    await mkdir(workHost, { recursive: true })
    await mkdir(join(base, 'control'), { recursive: true })
    this.relay = await startEdgeRelay(join(base, 'control', 'edge.sock'), this.context.edgeUrl)
    const memoryBytes = this.spec.memory_mb ? this.spec.memory_mb * 1024 * 1024 : null
    const pids = pidsLimit(this.spec, this.options.pidsLimit)
    this.cgroup = await createCgroup(`${safeName(this.context.sessionId)}-${base.slice(-6)}`, { memoryBytes, cpus: this.spec.cpus, pids })
    if (memoryBytes && !this.cgroup?.controllers.includes('memory')) this.memoryRlimit = memoryBytes
    this.assertStillStarting()
    // Prove the sandbox comes up here (INIT), not at the first harness step.
    const probe = await this.spawnExec({ command: 'true', timeoutMs: 30_000 }, false)
    if (probe.exitCode !== 0) throw new Error(`local sandbox failed to start: ${probe.stderr.trim() || `exit ${probe.exitCode}`}`)
  }

  protected runExec(request: ExecRequest): Promise<ExecResult> {
    return this.spawnExec(request, true)
  }

  private async spawnExec(request: ExecRequest, relayEdge: boolean): Promise<ExecResult> {
    const rootDir = this.rootDir
    if (!rootDir || !this.relay) throw new Error('runtime not started')
    await this.ensureSystemLinks()
    const cwd = insidePath(request.cwd ?? this.workDir)
    const env: Record<string, string> = { PATH: DEFAULT_PATH, HOME: LOCAL_HOME, USER: 'root', LANG: 'C.UTF-8', TMPDIR: '/tmp' }
    Object.assign(env, request.env ?? {})
    const { options, command } = bwrapArgs({
      rootDir,
      sessionDir: this.context.sessionDir,
      edgeSocket: this.relay.socketPath,
      nodeBinary: realpathSync(process.execPath),
      launcher: LAUNCHER,
      systemDirs: this.dirs,
      readOnlyBinds: this.options.readOnlyBinds ?? [],
      privileged: process.getuid?.() === 0,
      env,
      cwd,
      command: request.command,
      edgePort: relayEdge ? this.edgePort : null,
    })
    const bwrap = this.options.bwrapPath ?? 'bwrap'
    const prefix = this.memoryRlimit ? ['prlimit', `--as=${this.memoryRlimit}`, '--'] : []
    const cgroupFiles = this.cgroup?.procsFiles ?? []
    // A shell puts itself into the session's cgroups, then execs bwrap, so every sandboxed process is counted.
    const argv = [
      '/bin/sh',
      '-c',
      'for f in $ROLLGATE_CGROUP_PROCS; do echo $$ > "$f" || exit 126; done; exec "$@"',
      'sh',
      ...prefix,
      bwrap,
      '--args',
      '3',
      '--',
      ...command,
    ]
    return this.supervise(request, (stdout, stderr) => {
      const child = spawn(argv[0]!, argv.slice(1), {
        stdio: ['ignore', 'pipe', 'pipe', 'pipe'],
        env: { PATH: process.env.PATH ?? DEFAULT_PATH, ROLLGATE_CGROUP_PROCS: cgroupFiles.join(' ') },
      })
      const argsPipe = child.stdio[3] as NodeJS.WritableStream
      argsPipe.on('error', () => {}) // bwrap may die before reading (then its exit says why)
      argsPipe.end(encodeArgs(options))
      const closed = childExit(child, (error) => stderr.write(Buffer.from(`rollgate: cannot start bwrap: ${error.message}\n`)))
      return {
        // bwrap dies; --die-with-parent then kills the sandbox's PID 1, which takes its whole namespace down.
        kill: () => void child.kill('SIGKILL'),
        done: closed,
        finished: Promise.all([closed, stdout.consume(child.stdout!), stderr.consume(child.stderr!)]),
        exitCode: () => closed,
      }
    })
  }

  private systemPath(inside: string): string | null {
    for (const dir of this.dirs) if (isUnder(inside, dir.path)) return dir.path
    for (const bind of this.options.readOnlyBinds ?? []) if (isUnder(inside, bind.target)) return bind.target
    return null
  }

  /** `/bin -> usr/bin` style system dirs are symlinks in the private root; put back whatever replaced them. */
  private async ensureSystemLinks(): Promise<void> {
    const root = this.rootDir
    if (!root) return
    for (const dir of this.dirs) {
      if (dir.symlinkTarget === undefined) continue
      const path = join(root, dir.path)
      const current = await readlink(path).catch(() => null)
      if (current === dir.symlinkTarget) continue
      await rm(path, { recursive: true, force: true })
      await symlink(dir.symlinkTarget, path)
    }
  }

  /** Host path of an inside path; writes are refused on read-only and virtual mounts. */
  private async hostPath(path: string, forWrite: boolean): Promise<string> {
    const inside = insidePath(path, this.workDir)
    const root = this.rootDir
    if (!root) throw new Error('runtime not started')
    if (isUnder(inside, SESSION_MOUNT)) return hostPathWithin(this.context.sessionDir, posix.relative(SESSION_MOUNT, inside))
    for (const virtual of VIRTUAL_DIRS) {
      if (isUnder(inside, virtual)) throw new Error(`${inside} is not a file path of the local sandbox`)
    }
    const bind = (this.options.readOnlyBinds ?? []).find((entry) => isUnder(inside, entry.target))
    const system = this.systemPath(inside)
    if (forWrite && (bind || system !== null)) throw new Error(`${inside} is read-only in the local sandbox (not writable)`)
    if (bind) return join(bind.source, posix.relative(bind.target, inside))
    if (system !== null) return inside
    return hostPathWithin(root, posix.relative('/', inside))
  }

  async upload(source: string, target: string): Promise<void> {
    this.assertNotStopped()
    await hostCopy(source, await this.hostPath(target, true))
  }

  async download(source: string, target: string): Promise<void> {
    this.assertNotStopped()
    await hostCopy(await this.hostPath(source, false), target)
  }

  protected async tearDown(): Promise<void> {
    this.killRunning()
    await this.startSettled()
    this.killRunning()
    await this.runningEnded()
    await this.relay?.close()
    await this.cgroup?.destroy()
    if (this.stateDir) await rm(this.stateDir, { recursive: true, force: true, maxRetries: 3 }).catch(() => {})
  }
}
