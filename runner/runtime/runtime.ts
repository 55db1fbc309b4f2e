/**
 * @module
 * The runtime contract every sandbox backend implements (local bubblewrap, docker, apptainer).
 * Polar's layout: the host session directory is mounted at `/polar/session` inside; commands run as
 * `bash -lc <command>` with cwd = `cwd ?? spec.workdir ?? /polar/session`.
 *
 * The runner's stage pools only ever talk to this interface; backends live one per folder under
 * `runner/runtime/<backend>/` and register in `runner/runtime/index.ts`.
 */
import type { RuntimeSpec } from '../../src/contract/rollout.ts'

/** Inside every runtime. */
export const SESSION_MOUNT = '/polar/session'

export interface RuntimeCapabilities {
  /** The sandbox can be cut off from every network but the forwarded edge port. */
  isolatesNetwork: boolean
  cpuLimits: boolean
  memoryLimits: boolean
  storageLimits: boolean
  gpus: boolean
}

export interface ExecRequest {
  command: string
  cwd?: string | null
  env?: Record<string, string> | null
  /** Kill the command after this long; the result then has `timedOut: true` and `exitCode: -1`. */
  timeoutMs?: number | null
  /** Where stdout/stderr are teed (host paths); optional. */
  stdoutPath?: string
  stderrPath?: string
  /** Aborting kills the command (cancel mid-exec). */
  signal?: AbortSignal
}

export interface ExecResult {
  exitCode: number
  /** Tail of the output (bounded; the full text goes to stdoutPath/stderrPath when given). */
  stdout: string
  stderr: string
  timedOut: boolean
  cancelled: boolean
  durationMs: number
}

export interface RuntimeContext {
  sessionId: string
  /** Host directory mounted at SESSION_MOUNT (created by the runner, with artifacts/ and logs/agent/). */
  sessionDir: string
  /**
   * The edge as the sandbox must reach it: a loopback port inside the sandbox that the runtime
   * forwards to `edgeUrl` (and nothing else). Runtimes that cannot isolate the network use it as is.
   */
  edgeUrl: string
}

export interface Runtime {
  readonly backend: string
  readonly capabilities: RuntimeCapabilities
  /**
   * The base URL harnesses inside this runtime must use to reach the edge (e.g. `http://127.0.0.1:<port>`
   * of the forwarded port). Known after `start()`.
   */
  readonly edgeUrlInside: string
  /** HOME inside (writable; harness config files go below it). */
  readonly homeDir: string
  /** Default cwd of exec: `spec.workdir ?? SESSION_MOUNT`. */
  readonly workDir: string
  start(): Promise<void>
  exec(request: ExecRequest): Promise<ExecResult>
  /** Copy a host file or directory into the runtime (`target` is a path inside). */
  upload(source: string, target: string): Promise<void>
  /** Copy a file or directory out of the runtime to a host path. */
  download(source: string, target: string): Promise<void>
  /** Graceful end: stop processes, release resources. Idempotent. */
  stop(): Promise<void>
  /** Immediate end: kill whatever runs now, then stop. Idempotent; safe at any point, even during start(). */
  cancel(): Promise<void>
}

export type RuntimeFactory = (spec: RuntimeSpec, context: RuntimeContext) => Runtime

/** A read-only bind from the host into a sandbox. */
export interface ReadOnlyBind {
  source: string
  target: string
}

/** Options every container backend (docker, apptainer) shares. */
export interface ContainerRuntimeOptions {
  /** `none` (default: loopback + the forwarded edge port) or `host` (the host's network, edge URL as is). */
  network?: 'none' | 'host'
  /** Loopback port inside that reaches the edge (default 8787). */
  edgePort?: number
  /** Process limit when the task sets none (`kwargs.pids_limit`); default none. */
  pidsLimit?: number | null
  /** Parent of the per-session control dirs (default the OS temp dir). */
  stateDir?: string
  /** Extra read-only binds `host:inside`. */
  readOnlyBinds?: ReadOnlyBind[]
}

/** Process limit of a session: the task's `kwargs.pids_limit` (a positive integer), else the runner's default, else none. */
export function pidsLimit(spec: RuntimeSpec, runnerDefault: number | null | undefined): number | null {
  const value = spec.kwargs.pids_limit
  if (typeof value === 'number' && Number.isInteger(value) && value > 0) return value
  return runnerDefault ?? null
}
