/**
 * @module
 * The lifecycle every backend shares: `start()` runs once (a second call joins the first; none after
 * `stop()`), `stop()` tears down once after whatever start was doing, `cancel()` kills every exec in flight
 * and then stops, and `exec()` is refused before start and after stop. `supervise()` runs one exec under
 * its request's time limit and abort signal, with bounded output tails, registered so that `cancel()` and
 * the teardown can kill it. Backends supply `startUp()`, `tearDown()` and `runExec()`.
 */
import { execResult, guardExec, OutputTail } from './exec-support.ts'
import type { ExecRequest, ExecResult } from './runtime.ts'

/** One exec as its backend launched it. */
export interface LaunchedExec {
  /** Kill its processes (time limit, abort, cancel, teardown); called at most once; awaited before the result. */
  kill(): void | Promise<void>
  /** Settles once its processes have ended (teardown waits for it). */
  done: Promise<unknown>
  /** Settles once its processes have ended and its output is drained into the tails. */
  finished: Promise<unknown>
  /** Its exit code, asked once `finished` settled and any kill completed. */
  exitCode(): number | Promise<number>
}

interface RunningExec {
  kill(): void
  done: Promise<unknown>
}

export abstract class RuntimeLifecycle {
  #starting: Promise<void> | null = null
  #stopping: Promise<void> | null = null
  #started = false
  readonly #running = new Set<RunningExec>()

  /** Bring the sandbox up; `started` once it resolves. */
  protected abstract startUp(): Promise<void>
  /** Release everything; runs once (the first `stop()`), typically after `startSettled()`. */
  protected abstract tearDown(): Promise<void>
  /** One exec (the lifecycle checks were made by `exec()`; backends also call it for their own probes). */
  protected abstract runExec(request: ExecRequest): Promise<ExecResult>

  start(): Promise<void> {
    if (this.#stopping) return Promise.reject(new Error('runtime stopped'))
    this.#starting ??= this.startUp().then(() => {
      this.#started = true
    })
    return this.#starting
  }

  async exec(request: ExecRequest): Promise<ExecResult> {
    this.assertStarted()
    return this.runExec(request)
  }

  stop(): Promise<void> {
    this.#stopping ??= this.tearDown()
    return this.#stopping
  }

  cancel(): Promise<void> {
    this.killRunning()
    return this.stop()
  }

  /** `stop()` or `cancel()` was called. */
  protected get stopRequested(): boolean {
    return this.#stopping !== null
  }

  protected assertNotStopped(): void {
    if (this.#stopping) throw new Error('runtime stopped')
  }

  /** Refuses use after stop and before start completed. */
  protected assertStarted(): void {
    this.assertNotStopped()
    if (!this.#started) throw new Error('runtime not started')
  }

  /** For `startUp()` between its slow steps: a stop meanwhile ends the start. */
  protected assertStillStarting(): void {
    if (this.#stopping) throw new Error('runtime cancelled during start')
  }

  /** Waits until `start()` (if it was called) has settled, either way. */
  protected async startSettled(): Promise<void> {
    await this.#starting?.catch(() => {})
  }

  protected killRunning(): void {
    for (const entry of this.#running) entry.kill()
  }

  /** Resolves once every exec in flight has ended. */
  protected async runningEnded(): Promise<void> {
    await Promise.all([...this.#running].map((entry) => entry.done))
  }

  /**
   * Runs one exec: output tails (teed to the request's log files), `launch` starts it, the time limit and
   * abort signal kill it once; the result carries the tails and the timed-out / cancelled flags.
   */
  protected async supervise(
    request: ExecRequest,
    launch: (stdout: OutputTail, stderr: OutputTail) => LaunchedExec | Promise<LaunchedExec>,
  ): Promise<ExecResult> {
    const startedAt = Date.now()
    const stdout = await OutputTail.open(request.stdoutPath)
    const stderr = await OutputTail.open(request.stderrPath)
    try {
      const launched = await launch(stdout, stderr)
      let killing: Promise<void> | null = null
      const kill = () => {
        killing ??= Promise.resolve(launched.kill())
      }
      const entry: RunningExec = { kill, done: launched.done }
      this.#running.add(entry)
      const guard = guardExec(request, kill)
      try {
        await launched.finished
        await killing
        return execResult(await launched.exitCode(), stdout, stderr, guard, startedAt)
      } finally {
        guard.release()
        this.#running.delete(entry)
      }
    } finally {
      await stdout.close()
      await stderr.close()
    }
  }
}
