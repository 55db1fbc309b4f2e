/**
 * @module
 * The runner's stage pools: INIT → READY → RUNNING → POSTRUN, each with its own concurrency, and an
 * independent bounded READY buffer. A prepared session waiting for a run slot sits in the buffer holding no
 * slot at all (Polar holds its INIT worker there, `docs/runner.md`), and INIT only starts a session when the
 * result will have a place: `init_inflight + ready < ready_buffer + free run slots`. With a buffer of B the
 * runner keeps B sessions prepared ahead of the run slots (prewarm); with 0 a run slot waits for a full INIT.
 *
 * Slot ownership is explicit: each session holds at most one `Lease`, taken by `#pump` and given back only
 * by the continuation of the stage that holds it (never by `cancel`), so a cancellation at any point can
 * neither release a slot twice nor leak one. Every session ends exactly once with an `Outcome`; a harness
 * timeout, crash or cancel during RUNNING still goes through POSTRUN (evaluated on the partial work).
 *
 * Budgets: the session budget starts at INIT, the agent budget at RUNNING (both sent by the edge).
 * Stage work is supplied by `StageHandlers` (the real session flow, or simulated stages in tests/benchmarks).
 */
import type { AgentResult } from '../../src/contract/runner-protocol.ts'
import type { EvalResult } from '../../src/contract/trajectory.ts'
import { type Lease, SlotPool } from './slot-pool.ts'

export interface PipelineJob {
  id: string
  /** Higher enters INIT first (the edge's dispatch_priority). */
  priority: number
  /** Session budget in ms, from INIT start; null = none. */
  sessionBudgetMs: number | null
  /** Agent budget in ms, from RUNNING start; null = none. */
  agentBudgetMs: number | null
  /** Prepare a fresh evaluation runtime while the agent runs (evaluator.refresh_runtime). */
  prewarmEvalRuntime: boolean
}

export interface PostrunInput<J, P> {
  job: J
  prepared: P
  agentResult: AgentResult
  /** The prewarmed evaluation runtime (null when not asked for or when its preparation failed). */
  evalRuntime: unknown
  /** False on a hard shutdown: upload logs, skip the evaluator. */
  evaluate: boolean
  /** Time left for POSTRUN. */
  timeoutMs: number
}

export interface StageHandlers<J extends PipelineJob, P> {
  /** INIT: start the runtime and run its prepare actions. Must settle soon after `signal` aborts. */
  init(job: J, signal: AbortSignal): Promise<P>
  /** RUNNING: the harness. Must settle soon after `signal` aborts (killing what runs). */
  run(job: J, prepared: P, signal: AbortSignal): Promise<AgentResult>
  /** Optional fresh runtime for the evaluator, prepared in parallel with RUNNING. */
  prewarmEval?(job: J, signal: AbortSignal): Promise<unknown>
  /** POSTRUN: evaluate and upload logs. */
  postrun(input: PostrunInput<J, P>, signal: AbortSignal): Promise<EvalResult | null>
  /** Release the session's runtimes. Called exactly once per session that got past `init` (or had an eval runtime). */
  dispose(job: J, prepared: P | null, evalRuntime: unknown, hard: boolean): Promise<void>
}

export type PipelineStage = 'QUEUED' | 'INITIALIZING' | 'READY' | 'RUNNING' | 'POSTRUN_QUEUED' | 'POST_RUN' | 'ENDING' | 'DONE'

/** Why a session is being stopped early. */
export type StopKind =
  /** The edge cancelled it (task cancelled, early stop, ack timeout…). */
  | 'cancel'
  /** The edge no longer assigns it to this runner (after a reconnect): stop silently. */
  | 'drop'
  /** Hard shutdown of the runner (second signal). */
  | 'shutdown'
  | 'session_timeout'
  | 'agent_timeout'

export interface Outcome {
  sessionId: string
  agentResult: AgentResult | null
  evalResult: EvalResult | null
  error: string | null
  /** Whether the edge should hear about it (`session.finished`); false for drops and pre-RUNNING shutdowns. */
  report: boolean
  /** Stage the session was in when it ended or was stopped. */
  lastStage: PipelineStage
}

export interface PipelineOptions<J extends PipelineJob, P> {
  maxInit: number
  maxRun: number
  maxPostrun: number
  readyBuffer: number
  handlers: StageHandlers<J, P>
  /** Every stage change (INITIALIZING, READY, RUNNING, POST_RUN). */
  onStage?(job: J, stage: 'INITIALIZING' | 'READY' | 'RUNNING' | 'POST_RUN'): void
  onFinished?(job: J, outcome: Outcome): void
  /** Errors of dispose / handlers that have nowhere else to go. */
  onError?(job: J, error: unknown): void
  /** POSTRUN time when the session budget is spent or absent (default 300 s). */
  postrunGraceMs?: number
}

export interface PipelineMetrics {
  init_queue_depth: number
  init_inflight: number
  ready_depth: number
  run_inflight: number
  postrun_queue_depth: number
  postrun_inflight: number
}

interface Entry<J, P> {
  job: J
  stage: PipelineStage
  lease: Lease | null
  controller: AbortController | null
  prepared: P | null
  agentResult: AgentResult | null
  evalRuntime: Promise<unknown> | null
  evalController: AbortController | null
  stop: StopKind | null
  stopReason: string | null
  sessionDeadline: number | null
  timers: ReturnType<typeof setTimeout>[]
  seq: number
}

const DEFAULT_POSTRUN_GRACE_MS = 300_000

function isHard(kind: StopKind): boolean {
  return kind === 'shutdown' || kind === 'drop'
}

function message(error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}

export class StagePipeline<J extends PipelineJob, P> {
  readonly init: SlotPool
  readonly run: SlotPool
  readonly postrun: SlotPool
  readonly readyBuffer: number
  readonly #options: PipelineOptions<J, P>
  readonly #entries = new Map<string, Entry<J, P>>()
  readonly #queued: Entry<J, P>[] = []
  readonly #ready: Entry<J, P>[] = []
  readonly #postrunQueue: Entry<J, P>[] = []
  #seq = 0
  #idleWaiters: (() => void)[] = []
  #closed = false
  readonly counters = { finished: 0, completed: 0, failed: 0, timeout: 0, cancelled: 0 }

  constructor(options: PipelineOptions<J, P>) {
    if (!Number.isInteger(options.readyBuffer) || options.readyBuffer < 0) throw new Error('readyBuffer must be an integer ≥ 0')
    for (const key of ['maxInit', 'maxRun', 'maxPostrun'] as const) {
      if (!Number.isInteger(options[key]) || options[key] < 1) throw new Error(`${key} must be an integer ≥ 1`)
    }
    this.#options = options
    this.init = new SlotPool('init', options.maxInit)
    this.run = new SlotPool('run', options.maxRun)
    this.postrun = new SlotPool('postrun', options.maxPostrun)
    this.readyBuffer = options.readyBuffer
  }

  get size(): number {
    return this.#entries.size
  }

  has(sessionId: string): boolean {
    return this.#entries.has(sessionId)
  }

  stageOf(sessionId: string): PipelineStage | null {
    return this.#entries.get(sessionId)?.stage ?? null
  }

  /** Sessions held, with the status the edge knows them by (POSTRUN is still RUNNING to the edge). */
  held(): { session_id: string; status: 'ASSIGNED' | 'INITIALIZING' | 'READY' | 'RUNNING' }[] {
    const map = { QUEUED: 'ASSIGNED', INITIALIZING: 'INITIALIZING', READY: 'READY' } as const
    return [...this.#entries.values()]
      .filter((entry) => entry.stage !== 'DONE' && entry.stage !== 'ENDING')
      .map((entry) => ({
        session_id: entry.job.id,
        status: entry.stage in map ? map[entry.stage as keyof typeof map] : 'RUNNING',
      }))
  }

  metrics(): PipelineMetrics {
    return {
      init_queue_depth: this.#queued.length,
      init_inflight: this.init.inUse,
      ready_depth: this.#ready.length,
      run_inflight: this.run.inUse,
      postrun_queue_depth: this.#postrunQueue.length,
      postrun_inflight: this.postrun.inUse,
    }
  }

  /** Queue a session for INIT. Returns false if it is already held or the pipeline is closed. */
  submit(job: J): boolean {
    if (this.#closed || this.#entries.has(job.id)) return false
    const entry: Entry<J, P> = {
      job,
      stage: 'QUEUED',
      lease: null,
      controller: null,
      prepared: null,
      agentResult: null,
      evalRuntime: null,
      evalController: null,
      stop: null,
      stopReason: null,
      sessionDeadline: null,
      timers: [],
      seq: this.#seq++,
    }
    this.#entries.set(job.id, entry)
    this.#queued.push(entry)
    this.#queued.sort((a, b) => b.job.priority - a.job.priority || a.seq - b.seq)
    this.#pump()
    return true
  }

  /** Stop a session wherever it is. Idempotent; unknown ids are ignored (returns false). */
  cancel(sessionId: string, kind: StopKind = 'cancel', reason: string | null = null): boolean {
    const entry = this.#entries.get(sessionId)
    if (!entry || entry.stage === 'DONE' || entry.stage === 'ENDING') return false
    this.#stop(entry, kind, reason)
    return true
  }

  /** Refuse new sessions from now on (drain). */
  close(): void {
    this.#closed = true
  }

  /** Hard stop: cancel everything; running sessions still go through a short POSTRUN (logs, no evaluation). */
  shutdown(reason = 'runner shutting down'): void {
    this.#closed = true
    for (const entry of [...this.#entries.values()]) this.#stop(entry, 'shutdown', reason)
  }

  /** Resolves when no session is held. */
  idle(): Promise<void> {
    if (this.#entries.size === 0) return Promise.resolve()
    return new Promise((resolve) => this.#idleWaiters.push(resolve))
  }

  // --- internals ---

  #stop(entry: Entry<J, P>, kind: StopKind, reason: string | null): void {
    if (entry.stage === 'DONE' || entry.stage === 'ENDING') return
    const hard = isHard(kind)
    // POSTRUN is bounded by its own timeout; only a hard stop (shutdown, drop) interrupts it.
    if (!hard && (entry.stage === 'POSTRUN_QUEUED' || entry.stage === 'POST_RUN')) return
    // The first reason wins, except that a hard stop overrides a soft one.
    if (entry.stop && !(hard && !isHard(entry.stop))) return
    entry.stop = kind
    entry.stopReason = reason
    switch (entry.stage) {
      case 'QUEUED':
        this.#remove(this.#queued, entry)
        this.#end(entry, 'QUEUED', { agentResult: null, evalResult: null, error: this.#stopText(entry) })
        break
      case 'READY':
        this.#remove(this.#ready, entry)
        void this.#disposeThenEnd(entry, { agentResult: null, evalResult: null, error: this.#stopText(entry) })
        break
      case 'INITIALIZING':
      case 'RUNNING':
      case 'POST_RUN':
        entry.controller?.abort(kind)
        entry.evalController?.abort(kind)
        break
      case 'POSTRUN_QUEUED':
        // Runs soon without evaluating (hard stop); its eval runtime preparation stops now.
        entry.evalController?.abort(kind)
        break
    }
    this.#pump()
  }

  #stopText(entry: Entry<J, P>): string {
    const base =
      entry.stop === 'session_timeout'
        ? 'session budget exceeded'
        : entry.stop === 'agent_timeout'
          ? 'agent budget exceeded'
          : entry.stop === 'shutdown'
            ? 'runner cancelled'
            : entry.stop === 'drop'
              ? 'no longer assigned to this runner'
              : 'cancelled'
    return entry.stopReason ? `${base}: ${entry.stopReason}` : base
  }

  #remove(list: Entry<J, P>[], entry: Entry<J, P>): void {
    const index = list.indexOf(entry)
    if (index >= 0) list.splice(index, 1)
  }

  #take(entry: Entry<J, P>, lease: Lease): void {
    if (entry.lease) throw new Error(`session ${entry.job.id} already holds a ${entry.lease.pool.name} slot`)
    entry.lease = lease
  }

  #give(entry: Entry<J, P>): void {
    const lease = entry.lease
    entry.lease = null
    lease?.release()
  }

  /** Start whatever can start: POSTRUN first (it frees runtimes), then RUNNING, then INIT. */
  #pump(): void {
    this.#startFrom(this.#postrunQueue, this.postrun, (entry) => this.#runPostrun(entry))
    this.#startFrom(this.#ready, this.run, (entry) => this.#runAgent(entry))
    // INIT only for a session whose result will have a place (the READY buffer or a free run slot).
    this.#startFrom(
      this.#queued,
      this.init,
      (entry) => this.#runInit(entry),
      () => this.init.inUse + this.#ready.length < this.readyBuffer + this.run.free,
    )
  }

  /** Moves the head of `queue` into its stage while `admit()` allows and `pool` has a slot. */
  #startFrom(queue: Entry<J, P>[], pool: SlotPool, start: (entry: Entry<J, P>) => Promise<void>, admit = () => true): void {
    while (queue.length > 0 && admit()) {
      const entry = queue[0] as Entry<J, P>
      const lease = pool.tryAcquire(entry.job.id)
      if (!lease) break
      queue.shift()
      this.#take(entry, lease)
      void start(entry)
    }
  }

  #stage(entry: Entry<J, P>, stage: 'INITIALIZING' | 'READY' | 'RUNNING' | 'POST_RUN' | 'POSTRUN_QUEUED'): void {
    entry.stage = stage
    if (stage !== 'POSTRUN_QUEUED') {
      try {
        this.#options.onStage?.(entry.job, stage)
      } catch (error) {
        this.#options.onError?.(entry.job, error)
      }
    }
  }

  #timer(entry: Entry<J, P>, ms: number, kind: StopKind): void {
    const timer = setTimeout(() => this.#stop(entry, kind, null), Math.max(0, ms))
    timer.unref?.()
    entry.timers.push(timer)
  }

  async #runInit(entry: Entry<J, P>): Promise<void> {
    const { job } = entry
    const controller = new AbortController()
    entry.controller = controller
    this.#stage(entry, 'INITIALIZING')
    if (job.sessionBudgetMs !== null) {
      entry.sessionDeadline = Date.now() + job.sessionBudgetMs
      this.#timer(entry, job.sessionBudgetMs, 'session_timeout')
    }
    let prepared: P | null = null
    let failure: string | null = null
    try {
      prepared = await this.#options.handlers.init(job, controller.signal)
    } catch (error) {
      failure = `init failed: ${message(error)}`
    }
    entry.controller = null
    this.#give(entry)
    if (entry.stop || failure !== null) {
      entry.prepared = prepared
      await this.#disposeThenEnd(entry, { agentResult: null, evalResult: null, error: entry.stop ? this.#stopText(entry) : failure })
      this.#pump()
      return
    }
    entry.prepared = prepared
    this.#stage(entry, 'READY')
    this.#ready.push(entry)
    this.#pump()
  }

  async #runAgent(entry: Entry<J, P>): Promise<void> {
    const { job } = entry
    const controller = new AbortController()
    entry.controller = controller
    this.#stage(entry, 'RUNNING')
    if (job.agentBudgetMs !== null) this.#timer(entry, job.agentBudgetMs, 'agent_timeout')
    if (job.prewarmEvalRuntime && this.#options.handlers.prewarmEval) {
      const evalController = new AbortController()
      entry.evalController = evalController
      // Never rejects: a failed preparation leaves the evaluator without a fresh runtime (it reports that).
      entry.evalRuntime = this.#options.handlers.prewarmEval(job, evalController.signal).catch((error: unknown) => {
        this.#options.onError?.(job, error)
        return null
      })
    }
    let result: AgentResult
    try {
      const outcome = await this.#options.handlers.run(job, entry.prepared as P, controller.signal)
      result = entry.stop ? this.#stoppedResult(entry, outcome.return_code) : outcome
    } catch (error) {
      result = entry.stop
        ? this.#stoppedResult(entry, null)
        : { status: 'failed', return_code: null, error: `harness crashed: ${message(error)}`, timeout_stage: null }
    }
    entry.controller = null
    entry.agentResult = result
    this.#give(entry)
    this.#stage(entry, 'POSTRUN_QUEUED')
    this.#postrunQueue.push(entry)
    this.#pump()
  }

  #stoppedResult(entry: Entry<J, P>, returnCode: number | null): AgentResult {
    if (entry.stop === 'agent_timeout' || entry.stop === 'session_timeout') {
      return { status: 'timeout', return_code: returnCode, error: this.#stopText(entry), timeout_stage: 'exec' }
    }
    return { status: 'failed', return_code: returnCode, error: this.#stopText(entry), timeout_stage: null }
  }

  async #runPostrun(entry: Entry<J, P>): Promise<void> {
    const { job } = entry
    const controller = new AbortController()
    entry.controller = controller
    this.#stage(entry, 'POST_RUN')
    const hard = entry.stop !== null && isHard(entry.stop)
    if (hard) controller.abort(entry.stop)
    const left = entry.sessionDeadline === null ? 0 : entry.sessionDeadline - Date.now()
    const grace = this.#options.postrunGraceMs ?? DEFAULT_POSTRUN_GRACE_MS
    const timeoutMs = Math.max(left, grace)
    const timer = setTimeout(() => controller.abort('postrun_timeout'), timeoutMs)
    timer.unref?.()
    let evalResult: EvalResult | null = null
    let error: string | null = null
    let evalRuntime: unknown = null
    try {
      evalRuntime = entry.evalRuntime ? await entry.evalRuntime : null
      evalResult = await this.#options.handlers.postrun(
        { job, prepared: entry.prepared as P, agentResult: entry.agentResult as AgentResult, evalRuntime, evaluate: !hard, timeoutMs },
        controller.signal,
      )
    } catch (caught) {
      error = `postrun failed: ${message(caught)}`
    } finally {
      clearTimeout(timer)
    }
    entry.controller = null
    try {
      await this.#options.handlers.dispose(job, entry.prepared, evalRuntime, hard)
    } catch (caught) {
      this.#options.onError?.(job, caught)
    }
    this.#give(entry)
    this.#end(entry, 'POST_RUN', { agentResult: entry.agentResult, evalResult, error })
    this.#pump()
  }

  async #disposeThenEnd(entry: Entry<J, P>, result: Pick<Outcome, 'agentResult' | 'evalResult' | 'error'>): Promise<void> {
    const lastStage = entry.stage
    entry.stage = 'ENDING'
    if (entry.prepared !== null) {
      try {
        await this.#options.handlers.dispose(entry.job, entry.prepared, null, entry.stop === 'shutdown')
      } catch (error) {
        this.#options.onError?.(entry.job, error)
      }
    }
    this.#end(entry, lastStage, result)
  }

  #end(entry: Entry<J, P>, lastStage: PipelineStage, result: Pick<Outcome, 'agentResult' | 'evalResult' | 'error'>): void {
    if (entry.stage === 'DONE') return
    entry.stage = 'DONE'
    for (const timer of entry.timers) clearTimeout(timer)
    entry.timers = []
    entry.evalController?.abort('done')
    this.#entries.delete(entry.job.id)
    const reachedRun = result.agentResult !== null
    // Pre-RUNNING sessions of a shutdown or a drop go back to the edge untouched (it re-dispatches them).
    const report = entry.stop === 'drop' ? false : entry.stop === 'shutdown' ? reachedRun : true
    this.counters.finished++
    if (entry.stop === 'cancel' || entry.stop === 'drop' || entry.stop === 'shutdown') this.counters.cancelled++
    else if (result.agentResult?.status === 'completed' && !result.error) this.counters.completed++
    else if (result.agentResult?.status === 'timeout' || entry.stop === 'session_timeout') this.counters.timeout++
    else this.counters.failed++
    const outcome: Outcome = { sessionId: entry.job.id, ...result, report, lastStage }
    try {
      this.#options.onFinished?.(entry.job, outcome)
    } catch (error) {
      this.#options.onError?.(entry.job, error)
    }
    if (this.#entries.size === 0) {
      const waiters = this.#idleWaiters
      this.#idleWaiters = []
      for (const wake of waiters) wake()
    }
  }
}
