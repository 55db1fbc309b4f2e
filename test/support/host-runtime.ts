/**
 * @module
 * A tiny host-exec implementation of the runtime contract for evaluator tests: commands run with
 * `bash -lc` directly on the host, and the session mount `/polar/session` is rewritten to the host
 * session directory in commands, cwd, env and upload/download paths. No isolation at all: test
 * support only, for where the real sandbox runtime is not wanted.
 */
import { spawn } from 'node:child_process'
import { createWriteStream } from 'node:fs'
import { cp, mkdir, rm } from 'node:fs/promises'
import { dirname } from 'node:path'
import type { ExecRequest, ExecResult, Runtime } from '../../runner/runtime/runtime.ts'
import { SESSION_MOUNT } from '../../runner/runtime/runtime.ts'

const TAIL_BYTES = 64 * 1024

export class HostRuntime implements Runtime {
  readonly backend = 'host'
  readonly capabilities = { isolatesNetwork: false, cpuLimits: false, memoryLimits: false, storageLimits: false, gpus: false }
  readonly edgeUrlInside = 'http://127.0.0.1:9'
  readonly sessionDir: string
  private readonly running = new Set<ReturnType<typeof spawn>>()

  constructor(sessionDir: string) {
    this.sessionDir = sessionDir
  }

  /** `/polar/session/...` → the host session dir. */
  map(text: string): string {
    return text.replaceAll(SESSION_MOUNT, this.sessionDir)
  }

  async start(): Promise<void> {
    await mkdir(this.sessionDir, { recursive: true })
  }

  exec(request: ExecRequest): Promise<ExecResult> {
    const started = Date.now()
    const env: Record<string, string> = { ...(process.env as Record<string, string>) }
    for (const [key, value] of Object.entries(request.env ?? {})) env[key] = this.map(value)
    const child = spawn('bash', ['-lc', this.map(request.command)], {
      cwd: this.map(request.cwd ?? SESSION_MOUNT),
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    })
    this.running.add(child)
    let stdout = ''
    let stderr = ''
    const stdoutFile = request.stdoutPath ? createWriteStream(request.stdoutPath) : null
    const stderrFile = request.stderrPath ? createWriteStream(request.stderrPath) : null
    child.stdout.on('data', (chunk: Buffer) => {
      stdoutFile?.write(chunk)
      stdout = (stdout + chunk.toString('utf8')).slice(-TAIL_BYTES)
    })
    child.stderr.on('data', (chunk: Buffer) => {
      stderrFile?.write(chunk)
      stderr = (stderr + chunk.toString('utf8')).slice(-TAIL_BYTES)
    })
    let timedOut = false
    let cancelled = false
    const killGroup = () => {
      if (child.pid !== undefined) {
        try {
          process.kill(-child.pid, 'SIGKILL')
        } catch {}
      }
    }
    const timer = request.timeoutMs
      ? setTimeout(() => {
          timedOut = true
          killGroup()
        }, request.timeoutMs)
      : null
    const onAbort = () => {
      cancelled = true
      killGroup()
    }
    request.signal?.addEventListener('abort', onAbort, { once: true })
    return new Promise((resolve, reject) => {
      child.on('error', reject)
      child.on('close', async (code) => {
        if (timer) clearTimeout(timer)
        request.signal?.removeEventListener('abort', onAbort)
        this.running.delete(child)
        await Promise.all([stdoutFile, stderrFile].map((file) => (file ? new Promise((done) => file.end(done)) : null)))
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
    const destination = this.map(target)
    await mkdir(dirname(destination), { recursive: true })
    await cp(source, destination, { recursive: true })
  }

  async download(source: string, target: string): Promise<void> {
    await mkdir(dirname(target), { recursive: true })
    await cp(this.map(source), target, { recursive: true })
  }

  async stop(): Promise<void> {
    await this.cancel()
  }

  async cancel(): Promise<void> {
    for (const child of this.running) {
      if (child.pid !== undefined) {
        try {
          process.kill(-child.pid, 'SIGKILL')
        } catch {}
      }
    }
  }

  async remove(): Promise<void> {
    await rm(this.sessionDir, { recursive: true, force: true })
  }
}
