/**
 * @module
 * Pieces every backend's `exec` shares: bounded output tails teed to log files, the time limit / cancel
 * plumbing that turns a timeout or an abort into one `kill()` call and the right `ExecResult` flags, and
 * the end of a child process or a stream as one promise.
 */
import type { ChildProcess } from 'node:child_process'
import { createWriteStream, watch, type WriteStream } from 'node:fs'
import { access, mkdir } from 'node:fs/promises'
import { basename, dirname } from 'node:path'
import type { Readable } from 'node:stream'
import type { ExecRequest, ExecResult } from './runtime.ts'

/** Bytes of stdout/stderr kept in `ExecResult` (the full text goes to the tee files). */
export const OUTPUT_TAIL_BYTES = 64 * 1024

/** Keeps the last `limit` bytes of a stream and tees everything to an optional file. */
export class OutputTail {
  private chunks: Buffer[] = []
  private size = 0
  private file: WriteStream | null = null
  private readonly limit: number

  constructor(limit = OUTPUT_TAIL_BYTES) {
    this.limit = limit
  }

  static async open(path: string | undefined, limit = OUTPUT_TAIL_BYTES): Promise<OutputTail> {
    const tail = new OutputTail(limit)
    if (path) {
      await mkdir(dirname(path), { recursive: true })
      tail.file = createWriteStream(path, { flags: 'a' })
    }
    return tail
  }

  write(chunk: Buffer): void {
    this.file?.write(chunk)
    this.chunks.push(chunk)
    this.size += chunk.length
    while (this.size - (this.chunks[0]?.length ?? 0) >= this.limit && this.chunks.length > 1) {
      this.size -= this.chunks.shift()!.length
    }
  }

  /** Drain a readable into the tail; resolves when it ends. */
  consume(stream: Readable): Promise<void> {
    stream.on('data', (chunk: Buffer) => this.write(chunk))
    return streamEnded(stream)
  }

  text(): string {
    const all = Buffer.concat(this.chunks)
    return all.subarray(Math.max(0, all.length - this.limit)).toString('utf8')
  }

  async close(): Promise<void> {
    const file = this.file
    this.file = null
    if (file) await new Promise<void>((resolve) => file.end(resolve))
  }
}

export interface ExecGuard {
  readonly timedOut: boolean
  readonly cancelled: boolean
  /** Stop the timer and the abort listener. */
  release(): void
}

/**
 * Arms the request's time limit and abort signal; either one calls `kill` once. An already-aborted signal
 * kills immediately.
 */
export function guardExec(request: Pick<ExecRequest, 'timeoutMs' | 'signal'>, kill: () => void): ExecGuard {
  const state = { timedOut: false, cancelled: false, killed: false }
  const fire = (reason: 'timedOut' | 'cancelled') => {
    if (state.killed) return
    state.killed = true
    state[reason] = true
    kill()
  }
  const timer = request.timeoutMs && request.timeoutMs > 0 ? setTimeout(() => fire('timedOut'), request.timeoutMs) : null
  const onAbort = () => fire('cancelled')
  if (request.signal?.aborted) onAbort()
  else request.signal?.addEventListener('abort', onAbort, { once: true })
  return {
    get timedOut() {
      return state.timedOut
    },
    get cancelled() {
      return state.cancelled
    },
    release() {
      if (timer) clearTimeout(timer)
      request.signal?.removeEventListener('abort', onAbort)
    },
  }
}

export function execResult(exitCode: number, stdout: OutputTail, stderr: OutputTail, guard: ExecGuard, startedAt: number): ExecResult {
  const interrupted = guard.timedOut || guard.cancelled
  return {
    exitCode: interrupted ? -1 : exitCode,
    stdout: stdout.text(),
    stderr: stderr.text(),
    timedOut: guard.timedOut,
    cancelled: guard.cancelled,
    durationMs: Date.now() - startedAt,
  }
}

/** Resolves once a stream ends, closes or fails (never rejects). */
export function streamEnded(stream: NodeJS.EventEmitter): Promise<void> {
  return new Promise((resolve) => {
    stream.once('end', resolve)
    stream.once('error', () => resolve())
    stream.once('close', resolve)
  })
}

/**
 * A child process's exit status: its code, 137 when a signal ended it (128 + SIGKILL), 127 when it could
 * not be started (`onError` hears why).
 */
export function childExit(child: ChildProcess, onError?: (error: Error) => void): Promise<number> {
  return new Promise((resolve) => {
    child.once('error', (error) => {
      onError?.(error)
      resolve(127)
    })
    child.once('close', (code, signal) => resolve(code ?? (signal ? 137 : 1)))
  })
}

/** `'a b'` → `'a b'` quoted for POSIX sh. */
export function shellQuote(value: string): string {
  return `'${value.replaceAll("'", `'\\''`)}'`
}

/** Resolves when `path` exists (fs.watch on its dir), rejects after `timeoutMs` or when `abort` fires. */
export function waitForFile(path: string, timeoutMs: number, abort?: Promise<unknown>): Promise<void> {
  return new Promise((resolve, reject) => {
    const watcher = watch(dirname(path), () => check())
    const timer = setTimeout(() => finish(new Error(`${basename(path)} did not appear within ${timeoutMs} ms`)), timeoutMs)
    let done = false
    const finish = (error?: Error) => {
      if (done) return
      done = true
      clearTimeout(timer)
      watcher.close()
      if (error) reject(error)
      else resolve()
    }
    const check = () => {
      access(path).then(
        () => finish(),
        () => {},
      )
    }
    abort?.then(
      () => finish(new Error('aborted')),
      () => finish(new Error('aborted')),
    )
    check()
  })
}
