/**
 * @module
 * A runtime without a sandbox, for tests of the runner agent that do not test isolation: commands run on
 * the host with `bash -lc`, `/polar/session` mapped to the host session directory (in paths, cwd and env
 * values), the edge reached directly. Aborting an exec kills its whole process group.
 */
import { spawn } from 'node:child_process'
import { cpSync, createWriteStream, mkdirSync } from 'node:fs'
import { dirname, join } from 'node:path'
import type { RuntimeSpec } from '../../src/contract/rollout.ts'
import { type ExecRequest, type ExecResult, type Runtime, type RuntimeContext, SESSION_MOUNT } from '../../runner/runtime/runtime.ts'

export class HostRuntime implements Runtime {
  readonly backend = 'host'
  readonly capabilities = { isolatesNetwork: false, cpuLimits: false, memoryLimits: false, storageLimits: false, gpus: false }
  readonly context: RuntimeContext
  readonly spec: RuntimeSpec | null
  readonly #children = new Set<ReturnType<typeof spawn>>()
  stopped = false

  constructor(spec: RuntimeSpec | null, context: RuntimeContext) {
    this.spec = spec
    this.context = context
  }

  get edgeUrlInside(): string {
    return this.context.edgeUrl
  }

  get homeDir(): string {
    return join(this.context.sessionDir, 'home')
  }

  get workDir(): string {
    return this.context.sessionDir
  }

  /** Inside path → host path. */
  map(path: string): string {
    return path.startsWith(SESSION_MOUNT) ? this.context.sessionDir + path.slice(SESSION_MOUNT.length) : path
  }

  async start(): Promise<void> {
    mkdirSync(this.homeDir, { recursive: true })
  }

  exec(request: ExecRequest): Promise<ExecResult> {
    const started = Date.now()
    const env: Record<string, string> = { PATH: process.env.PATH ?? '/usr/bin:/bin' }
    for (const [key, value] of Object.entries({ ...this.spec?.env, ...request.env }))
      env[key] = value.replaceAll(SESSION_MOUNT, this.context.sessionDir)
    const child = spawn('bash', ['-lc', request.command], {
      cwd: this.map(request.cwd ?? SESSION_MOUNT),
      env,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    this.#children.add(child)
    let stdout = ''
    let stderr = ''
    const out = request.stdoutPath ? createWriteStream(request.stdoutPath) : null
    const err = request.stderrPath ? createWriteStream(request.stderrPath) : null
    child.stdout?.on('data', (chunk: Buffer) => {
      stdout = (stdout + chunk.toString()).slice(-8192)
      out?.write(chunk)
    })
    child.stderr?.on('data', (chunk: Buffer) => {
      stderr = (stderr + chunk.toString()).slice(-8192)
      err?.write(chunk)
    })
    let timedOut = false
    let cancelled = false
    const kill = () => {
      try {
        if (child.pid) process.kill(-child.pid, 'SIGKILL')
      } catch {
        // gone
      }
    }
    const timer = request.timeoutMs
      ? setTimeout(() => {
          timedOut = true
          kill()
        }, request.timeoutMs)
      : null
    const onAbort = () => {
      cancelled = true
      kill()
    }
    if (request.signal?.aborted) onAbort()
    request.signal?.addEventListener('abort', onAbort, { once: true })
    return new Promise((resolve) => {
      child.on('close', (code) => {
        if (timer) clearTimeout(timer)
        request.signal?.removeEventListener('abort', onAbort)
        this.#children.delete(child)
        out?.end()
        err?.end()
        resolve({
          exitCode: timedOut || cancelled ? -1 : (code ?? -1),
          stdout,
          stderr,
          timedOut,
          cancelled,
          durationMs: Date.now() - started,
        })
      })
    })
  }

  async upload(source: string, target: string): Promise<void> {
    const to = this.map(target)
    mkdirSync(dirname(to), { recursive: true })
    cpSync(source, to, { recursive: true })
  }

  async download(source: string, target: string): Promise<void> {
    mkdirSync(dirname(target), { recursive: true })
    cpSync(this.map(source), target, { recursive: true })
  }

  async stop(): Promise<void> {
    this.stopped = true
    await this.cancel()
  }

  async cancel(): Promise<void> {
    for (const child of this.#children) {
      try {
        if (child.pid) process.kill(-child.pid, 'SIGKILL')
      } catch {
        // gone
      }
    }
  }
}
