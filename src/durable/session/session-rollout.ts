/**
 * @module
 * The rollout side of a SessionObject: lifecycle RPCs, budget alarms, the POST_RUN build and the
 * at-least-once hand-off of the terminal result to the task (and of the freed slot to the runner hub).
 * Kept out of `session-object.ts` so the object stays a thin shell: it owns one `SessionRollout`
 * and delegates.
 *
 * Delivery is an outbox in the lifecycle row: the terminal result is rebuilt deterministically from
 * the durable log on each attempt and streamed into R2 (`result-stream.ts`; the task gets its key and a
 * few small fields, so a result of any size is handed off), retried with backoff by the alarm. A result
 * that can never be handed off (its builder throws midway, or it nests deeper than `MAX_RESULT_DEPTH`)
 * is not retried forever: the session ends ERROR with an empty trajectory that says why, and the task
 * goes on.
 */
import { logError } from '../../contract/log.ts'
import type { UpstreamKind } from '../../contract/completion-record.ts'
import type { RolloutEvent } from '../../contract/rollout.ts'
import type { AgentResult, RunnerSessionStatus } from '../../contract/runner-protocol.ts'
import type { EvalResult, SessionResult, Trajectory } from '../../contract/trajectory.ts'
import { exceedsJsonDepth, MAX_JSON_DEPTH } from '../../normalize/json-depth.ts'
import { applyTrainingFilter } from '../../reconstruct/index.ts'
import type { CompletionLog, RecordResult } from './completion-log.ts'
import type { CompletionInput, SessionConfig } from './record.ts'
import { type GateView, type PolicyVersion, SessionGate } from './session-gate.ts'
import {
  ACTIVE_BEFORE_RUN,
  CONCLUDING,
  type LifecycleOutcome,
  type LifecycleSpec,
  type LifecycleState,
  type RunnerUpstream,
  SessionLifecycle,
  TERMINAL,
  type Transition,
} from './session-lifecycle.ts'
import { buildRunTrajectory, evaluate, sessionResult } from './session-result.ts'
import { evaluatedExportChunks, resultExportChunks, type StoredResult, streamRunResult } from './result-stream.ts'
import type { TrajectoryFormat } from './trajectory-stream.ts'
import { type PartBucket, writeChunks } from './r2-part-writer.ts'
import { LogReadError } from './log-records.ts'
import { sessionResultKey } from '../task/task-keys.ts'
import type { Sql } from './sql.ts'

/** Whether a model call may go ahead now, and where it goes. Rollout calls carry a gate lease. */
export type Admission =
  | { ok: true; managed: false }
  | ({ ok: true; managed: true; ticket: string; policy_version: PolicyVersion } & (
      | { route: 'direct' }
      | { route: 'runner'; runner_id: string; upstream: { model: string; kind: UpstreamKind; max_model_len?: number } }
    ))
  | { ok: false; status: string; paused: boolean }

/**
 * Deepest result handed to a task: records are held to `MAX_JSON_DEPTH` at the edge and the result
 * wraps them in a few levels, far below what RPC serialization can carry.
 */
export const MAX_RESULT_DEPTH = MAX_JSON_DEPTH + 64
const UNDELIVERABLE = 'session result could not be handed to the task'

/** Defaults when the caller does not say: Polar's inference timeout, for both the lease and a paused wait. */
const DEFAULT_LEASE_MS = 900_000 + 60_000
const DEFAULT_PAUSED_WAIT_MS = 900_000

/** The task's side of the hand-off (TaskObject RPC): the result itself is in R2 (`StoredResult.key`). */
export interface TaskNotifier {
  sessionStored(runId: string, stored: StoredResult): Promise<unknown>
}

/** The generation gate's side (InferenceGate RPC). */
export interface GateNotifier {
  subscribe(sessionId: string): Promise<GateView>
  unsubscribe(sessionId: string): Promise<unknown>
}

/** The runner hub's side (RunnerHub RPC). */
export interface HubNotifier {
  sessionEnded(sessionId: string, status: string): Promise<unknown>
  publish(event: RolloutEvent): Promise<unknown>
}

/** The rollout RPCs as callers see them through a SessionObject stub. */
type Rpc<T> = { [K in keyof T]: T[K] extends (...args: infer A) => infer R ? (...args: A) => Promise<Awaited<R>> : never }
export type SessionRolloutRpc = Rpc<
  Pick<
    SessionRollout,
    | 'register'
    | 'admit'
    | 'peek'
    | 'recordAdmitted'
    | 'gateSync'
    | 'lifecycle'
    | 'assignRunner'
    | 'runnerReport'
    | 'runnerFinished'
    | 'runnerLost'
    | 'cancel'
    | 'result'
    | 'storeResult'
  >
>

export interface SessionRolloutDeps {
  sql: Sql
  storage: Pick<DurableObjectStorage, 'setAlarm' | 'deleteAlarm'>
  config(): SessionConfig | null
  createConfig(config: SessionConfig): { config: SessionConfig; created: boolean }
  log(): CompletionLog
  /** Where the session writes its terminal result for the task (R2). */
  blobs: PartBucket
  /** Throws when the session no longer records model calls (finalized). */
  assertOpen?(): void
  task(taskId: string): TaskNotifier
  hub(): HubNotifier
  gate(): GateNotifier
  now?: () => number
}

export class SessionRollout {
  readonly #deps: SessionRolloutDeps
  readonly #lifecycle: SessionLifecycle
  readonly #gate: SessionGate
  #concluding: Promise<void> | null = null
  /** Events leave in order: each publish waits for the previous one. */
  #publishing: Promise<unknown> = Promise.resolve()

  constructor(deps: SessionRolloutDeps) {
    this.#deps = deps
    this.#lifecycle = new SessionLifecycle(deps.sql, deps.now)
    this.#gate = new SessionGate(deps.sql, deps.now)
  }

  /** Create the session (config + REGISTERED lifecycle) for one sample of a task. Idempotent. */
  async register(config: SessionConfig, spec: LifecycleSpec): Promise<{ created: boolean; status: string }> {
    const { created: configCreated } = this.#deps.createConfig(config)
    const { state, created } = this.#lifecycle.register(spec)
    if (created) {
      await this.#changed([{ previous: null, status: 'REGISTERED', reason: null }])
    } else if (!configCreated && state.spec.run_id !== spec.run_id) {
      throw new Error(`session ${config.session_id} belongs to run ${state.spec.run_id}`)
    }
    return { created, status: state.status }
  }

  /**
   * The status gate and the generation gate at the session: a rollout session takes model calls only
   * while RUNNING, waits (up to `maxWaitMs`) while inference is paused, and hands out a lease the call
   * returns with its record (`recordAdmitted`). Bare sessions pass untouched.
   */
  async admit(leaseMs = DEFAULT_LEASE_MS, maxWaitMs = DEFAULT_PAUSED_WAIT_MS): Promise<Admission> {
    if (!this.#lifecycle.state()) return { ok: true, managed: false }
    if (this.#gate.view().paused && this.#lifecycle.state()?.status === 'RUNNING') await this.#gate.waitOpen(maxWaitMs)
    const state = this.#lifecycle.state()
    if (state?.status !== 'RUNNING') return { ok: false, status: state?.status ?? 'unknown', paused: false }
    const ticket = this.#gate.lease(leaseMs)
    if (ticket === null) return { ok: false, status: state.status, paused: true }
    const policy_version = this.#gate.view().policy_version
    if (state.route === 'runner' && state.runner_id && state.runner_upstream) {
      return {
        ok: true,
        managed: true,
        ticket,
        policy_version,
        route: 'runner',
        runner_id: state.runner_id,
        upstream: state.runner_upstream,
      }
    }
    return { ok: true, managed: true, ticket, policy_version, route: 'direct' }
  }

  /**
   * The status gate without a lease (calls that never generate, e.g. count_tokens): whether the session
   * takes calls now (RUNNING, or a bare session), and where its engine is.
   */
  peek(): Admission {
    const state = this.#lifecycle.state()
    if (!state) return { ok: true, managed: false }
    if (state.status !== 'RUNNING') return { ok: false, status: state.status, paused: false }
    if (state.route === 'runner' && state.runner_id && state.runner_upstream) {
      return {
        ok: true,
        managed: true,
        ticket: '',
        policy_version: null,
        route: 'runner',
        runner_id: state.runner_id,
        upstream: state.runner_upstream,
      }
    }
    return { ok: true, managed: true, ticket: '', policy_version: null, route: 'direct' }
  }

  /** Commit an admitted call's record, then return its gate lease. */
  async recordAdmitted(ticket: string, input: CompletionInput): Promise<RecordResult> {
    try {
      this.#deps.assertOpen?.()
      return await this.#deps.log().record(input)
    } finally {
      this.#gate.release(ticket)
    }
  }

  /**
   * The gate pushes its view; the session says whether it is still under it, how many calls it has in
   * flight, how many wait for the gate to open (the push just woke them when it opens) and how many completions it has captured (the dashboard charts completions per second from it).
   */
  gateSync(view: GateView): { subscribed: boolean; inflight: number; waiting: number; completions: number } {
    this.#gate.update(view)
    return {
      subscribed: this.#lifecycle.state()?.status === 'RUNNING',
      inflight: this.#gate.inflight(),
      waiting: this.#gate.waiting(),
      completions: this.#completionCount(),
    }
  }

  #completionCount(): number {
    try {
      return this.#deps.log().count()
    } catch {
      return 0
    }
  }

  lifecycle(): LifecycleState | null {
    return this.#lifecycle.state()
  }

  async assignRunner(runnerId: string, upstream: RunnerUpstream | null): Promise<LifecycleOutcome> {
    return this.#apply(this.#lifecycle.assign(runnerId, upstream))
  }

  async runnerReport(runnerId: string, status: RunnerSessionStatus): Promise<LifecycleOutcome> {
    const state = this.#lifecycle.state()
    if (status === 'RUNNING' && state?.runner_id === runnerId && state.status !== 'RUNNING') {
      // Under the generation gate before the first call can be admitted (a paused gate holds it at once).
      const sessionId = this.#deps.config()?.session_id ?? ''
      const view = await this.#deps
        .gate()
        .subscribe(sessionId)
        .catch((error: unknown) => {
          logError('generation gate subscribe failed', error)
          return null
        })
      if (view) this.#gate.update(view)
    }
    return this.#apply(this.#lifecycle.report(runnerId, status))
  }

  async runnerFinished(
    runnerId: string,
    agentResult: AgentResult | null,
    evalResult: EvalResult | null,
    error: string | null,
  ): Promise<LifecycleOutcome> {
    const state = this.#lifecycle.state()
    if (!state || state.runner_id !== runnerId)
      return { ok: false, status: state?.status ?? null, reason: `session is not assigned to runner ${runnerId}` }
    const recorded = agentResult ? { ...agentResult, timeout_source: agentResult.status === 'timeout' ? ('agent' as const) : null } : null
    return this.#apply(this.#lifecycle.finishRun(recorded, evalResult, error))
  }

  /**
   * The runner went away. Before RUNNING the session goes back to the queue (`requeued: true`);
   * during RUNNING the run ends and the partial trajectory is built.
   */
  async runnerLost(runnerId: string, reason: string): Promise<LifecycleOutcome & { requeued?: boolean }> {
    const state = this.#lifecycle.state()
    if (!state || state.runner_id !== runnerId)
      return { ok: false, status: state?.status ?? null, reason: `session is not assigned to runner ${runnerId}` }
    if (ACTIVE_BEFORE_RUN.includes(state.status)) {
      const outcome = await this.#apply(this.#lifecycle.requeue(reason))
      const after = this.#lifecycle.state()
      return { ...outcome, requeued: after?.status === 'REGISTERED' }
    }
    const agentResult = { status: 'failed' as const, return_code: null, error: reason, timeout_stage: null, timeout_source: null }
    return this.#apply(this.#lifecycle.finishRun(agentResult, null, reason))
  }

  /** Cancel (Polar `DELETE /sessions/{sid}`): ERROR "session cancelled"; a running session keeps its partial trajectory. */
  async cancel(reason = 'session cancelled'): Promise<LifecycleOutcome> {
    const state = this.#lifecycle.state()
    if (!state) return { ok: false, status: null, reason: 'not a rollout session' }
    if (state.status === 'RUNNING') {
      const agentResult = { status: 'failed' as const, return_code: null, error: reason, timeout_stage: null, timeout_source: null }
      return this.#apply(this.#lifecycle.finishRun(agentResult, null, reason))
    }
    if (ACTIVE_BEFORE_RUN.includes(state.status)) return this.#apply(this.#lifecycle.end({ status: 'ERROR', error: reason }))
    return { ok: false, status: state.status, reason: `session is ${state.status}` }
  }

  /**
   * The terminal result (rebuilt from the durable log) as one object, or null while the session is
   * active: for small sessions and tests (an RPC answer may not exceed 32 MiB). The task gets it through
   * R2 (`storeResult`).
   */
  async result(): Promise<SessionResult | null> {
    const state = this.#lifecycle.state()
    if (!state || !TERMINAL.includes(state.status)) return null
    return (await this.#buildResult(state)).result
  }

  /**
   * The terminal result's export in `format` (`result-stream.ts`: the same evaluated run the task's result
   * is), or null while the session is not yet evaluated (not a rollout session, or still active).
   */
  evaluatedExport(format: TrajectoryFormat): AsyncGenerator<string> | null {
    const state = this.#lifecycle.state()
    if (!state || !TERMINAL.includes(state.status)) return null
    const sessionId = this.#deps.config()?.session_id ?? 'unknown'
    const timing = this.#lifecycle.timing()
    if (state.error?.startsWith(UNDELIVERABLE)) {
      const { result } = this.#undeliverable(state, state.error)
      return (async function* () {
        yield* resultExportChunks(format, result)
      })()
    }
    return evaluatedExportChunks(format, sessionId, this.#deps.log(), state, timing)
  }

  /** Write the terminal result to R2 for the task and say where (null while the session is active). */
  async storeResult(): Promise<StoredResult | null> {
    const state = this.#lifecycle.state()
    if (!state || !TERMINAL.includes(state.status)) return null
    return this.#storeResult(state)
  }

  /** Budgets, a pending POST_RUN, and delivery retries. */
  async alarm(): Promise<void> {
    const state = this.#lifecycle.state()
    if (!state) return
    // What was due by the time this alarm was set for is due now (see TaskCoordinator.alarm).
    const dueBy = Math.max((this.#deps.now ?? Date.now)(), this.#lifecycle.nextAlarm() ?? 0)
    const expired = this.#lifecycle.expired(dueBy)
    if (expired) await this.#timeout(expired.source)
    if (CONCLUDING.includes(this.#lifecycle.state()?.status ?? 'REGISTERED')) await this.#conclude()
    await this.#deliver(dueBy)
    await this.#schedule()
  }

  async #timeout(source: 'agent' | 'session'): Promise<void> {
    const state = this.#lifecycle.state()
    if (!state) return
    const budget = source === 'agent' ? state.spec.agent_timeout_seconds : state.spec.timeout_seconds
    const message = `${source} budget of ${budget} s exhausted in ${state.status}`
    if (state.status === 'RUNNING') {
      const agentResult = {
        status: 'timeout' as const,
        return_code: null,
        error: message,
        timeout_stage: 'exec' as const,
        timeout_source: source,
      }
      await this.#apply(this.#lifecycle.finishRun(agentResult, null, message))
    } else {
      await this.#apply(this.#lifecycle.end({ status: 'TIMEOUT', error: message }))
    }
  }

  async #apply(outcome: LifecycleOutcome): Promise<LifecycleOutcome> {
    if (outcome.ok && outcome.transitions.length) await this.#changed(outcome.transitions)
    return outcome
  }

  async #changed(transitions: Transition[]): Promise<void> {
    this.#emit(transitions)
    if (transitions.some((transition) => transition.previous === 'RUNNING')) {
      // Best effort: the gate also drops subscribers that answer they are no longer RUNNING.
      this.#deps
        .gate()
        .unsubscribe(this.#deps.config()?.session_id ?? '')
        .catch(() => {})
    }
    const status = this.#lifecycle.state()?.status
    await this.#schedule()
    if (status && (CONCLUDING.includes(status) || TERMINAL.includes(status))) {
      // Build and hand off now; the alarm (already set) retries if this isolate dies midway.
      this.#kick()
    }
  }

  #kick(): void {
    const run = async () => {
      if (CONCLUDING.includes(this.#lifecycle.state()?.status ?? 'REGISTERED')) await this.#conclude()
      await this.#deliver()
      await this.#schedule()
    }
    run().catch((error) => logError('session rollout hand-off failed', error))
  }

  /** POST_RUN → BUILDING → EVALUATING → terminal. Serialized; safe to re-run after a crash. */
  #conclude(): Promise<void> {
    this.#concluding ??= (async () => {
      try {
        let state = this.#lifecycle.state()
        if (!state) return
        if (state.status === 'POST_RUN') {
          const through = state.build ? this.#deps.log().count() - 1 : -1
          this.#emit([this.#lifecycle.advance('BUILDING', through)])
        }
        state = this.#lifecycle.state()
        if (state?.status === 'BUILDING') this.#emit([this.#lifecycle.advance('EVALUATING')])
        state = this.#lifecycle.state()
        if (state?.status === 'EVALUATING') {
          // The result's status is known once the traces are planned: none is built here.
          const head = await this.#resultHead(state)
          const outcome = this.#lifecycle.end({ status: head.status as 'COMPLETED' | 'ERROR' | 'TIMEOUT', error: head.error })
          if (outcome.ok) this.#emit(outcome.transitions)
        }
      } finally {
        this.#concluding = null
      }
    })()
    return this.#concluding
  }

  async #buildResult(state: LifecycleState): Promise<{ trajectory: Trajectory; result: SessionResult }> {
    const config = this.#deps.config()
    const sessionId = config?.session_id ?? 'unknown'
    if (state.error?.startsWith(UNDELIVERABLE)) return this.#undeliverable(state, state.error)
    // Reading the log may fail for a moment (storage): that propagates and is retried. Tolerant
    // prefix_merging reads it lazily, so a 1,000-turn rollout holds its traces, not its records.
    const built = await buildRunTrajectory(sessionId, this.#deps.log(), state)
    try {
      const trajectory = applyTrainingFilter(evaluate(built, state), state.spec.training_filter)
      const result = sessionResult(sessionId, trajectory, state, this.#lifecycle.timing())
      if (exceedsJsonDepth(result, MAX_RESULT_DEPTH)) throw new Error(`it nests deeper than ${MAX_RESULT_DEPTH} levels`)
      return { trajectory, result }
    } catch (error) {
      return this.#undeliverable(state, `${UNDELIVERABLE}: ${(error as Error).message}`)
    }
  }

  async #resultHead(state: LifecycleState): Promise<{ status: SessionResult['status']; error: string | null }> {
    if (state.error?.startsWith(UNDELIVERABLE)) return { status: 'ERROR', error: state.error }
    const stream = await streamRunResult(this.#deps.config()?.session_id ?? 'unknown', this.#deps.log(), state, this.#lifecycle.timing())
    await stream.chunks.return(undefined)
    return { status: stream.status, error: stream.error }
  }

  /**
   * Stream the terminal result to R2 (`rollout/task_<task>/ses_<session>.json`, in parts): never one
   * object or string of it, never over RPC. Reading the log or writing R2 may fail for a moment (thrown,
   * retried); a builder that fails midway makes the stand-in ERROR result the session's result.
   */
  async #storeResult(state: LifecycleState): Promise<StoredResult> {
    const sessionId = this.#deps.config()?.session_id ?? 'unknown'
    const key = sessionResultKey(state.spec.task_id, sessionId)
    const write = async (
      status: SessionResult['status'],
      error: string | null,
      chunks: AsyncIterable<string>,
      summary: { reward: number | null; trace_count: number },
    ) => {
      const written = await writeChunks(this.#deps.blobs, key, chunks, 'application/json')
      return {
        session_id: sessionId,
        status,
        error,
        node_id: state.runner_id,
        reward: summary.reward,
        trace_count: summary.trace_count,
        key,
        bytes: written.bytes,
      }
    }
    const standIn = async (error: string) => {
      const { result } = this.#undeliverable(this.#lifecycle.state() ?? state, error)
      return write(
        result.status,
        result.error,
        (async function* () {
          yield JSON.stringify(result)
        })(),
        { reward: null, trace_count: 0 },
      )
    }
    if (state.error?.startsWith(UNDELIVERABLE)) return standIn(state.error)
    const stream = await streamRunResult(sessionId, this.#deps.log(), state, this.#lifecycle.timing(), MAX_RESULT_DEPTH)
    try {
      return await write(stream.status, stream.error, builderErrors(stream.chunks), stream.summary)
    } catch (error) {
      if (!(error instanceof BuildFailure)) throw error
      const message = `${UNDELIVERABLE}: ${error.message}`
      this.#markUndeliverable(message)
      return standIn(message)
    }
  }

  /** The stand-in result of a session whose own result can never be handed off: ERROR, no traces, why. */
  #undeliverable(state: LifecycleState, error: string): { trajectory: Trajectory; result: SessionResult } {
    const sessionId = this.#deps.config()?.session_id ?? 'unknown'
    const trajectory: Trajectory = {
      status: 'ERROR',
      metadata: { session_id: sessionId, task_id: state.spec.task_id, agent_result: state.agent_result },
      traces: [],
      error,
    }
    const failed: LifecycleState = { ...state, status: 'ERROR', final_status: 'ERROR', error }
    return { trajectory, result: sessionResult(sessionId, trajectory, failed, this.#lifecycle.timing()) }
  }

  /** At-least-once hand-off of the terminal result (task) and of the slot (hub). */
  async #deliver(dueBy = (this.#deps.now ?? Date.now)()): Promise<void> {
    const state = this.#lifecycle.state()
    if (!state || !TERMINAL.includes(state.status) || (!state.notify.task && !state.notify.hub)) return
    if (state.notify.next_at !== null && state.notify.next_at > dueBy) return
    let failed = false
    if (state.notify.task) {
      const task = this.#deps.task(state.spec.task_id)
      try {
        // The result goes through R2 (any size); the task gets where it is and a few small fields.
        const stored = await this.#storeResult(state)
        await task.sessionStored(state.spec.run_id, stored)
        this.#lifecycle.notified('task')
      } catch (error) {
        logError('session result hand-off to the task failed', error)
        failed = true
      }
    }
    if (state.notify.hub) {
      try {
        const config = this.#deps.config()
        await this.#deps.hub().sessionEnded(config?.session_id ?? '', state.status)
        this.#lifecycle.notified('hub')
      } catch (error) {
        logError('session end hand-off to the runner hub failed', error)
        failed = true
      }
    }
    if (failed) this.#lifecycle.notifyFailed()
  }

  /** A terminal session whose result cannot be handed off ends ERROR (event included). */
  #markUndeliverable(error: string): void {
    const transition = this.#lifecycle.failTerminal(error)
    if (transition) this.#emit([transition])
  }

  async #schedule(): Promise<void> {
    const next = this.#lifecycle.nextAlarm()
    if (next === null) await this.#deps.storage.deleteAlarm()
    else await this.#deps.storage.setAlarm(next)
  }

  /** State changes go to the event stream, best effort (never blocks or fails the lifecycle). */
  #emit(transitions: Transition[]): void {
    const state = this.#lifecycle.state()
    const config = this.#deps.config()
    if (!state || !config) return
    const hub = this.#deps.hub()
    for (const transition of transitions) {
      const event: RolloutEvent = {
        type: 'session.state_changed',
        session_id: config.session_id,
        task_id: state.spec.task_id,
        status: transition.status,
        previous: transition.previous,
        runner_id: state.runner_id,
        reason: transition.reason,
        at: new Date((this.#deps.now ?? Date.now)()).toISOString(),
      }
      this.#publishing = this.#publishing.then(() => hub.publish(event)).catch(() => {})
    }
  }
}

/** A failure of the builder while the result was written (not of the log or of R2): the same on every attempt. */
class BuildFailure extends Error {}

/** `chunks`, with a builder's failure told apart from a failure reading the log (retried). */
async function* builderErrors(chunks: AsyncGenerator<string>): AsyncGenerator<string> {
  try {
    yield* chunks
  } catch (error) {
    if (error instanceof LogReadError) throw error
    throw new BuildFailure((error as Error).message)
  }
}
