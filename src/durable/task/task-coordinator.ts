/**
 * @module
 * One task's rollout: expand a `TaskRequest` into `num_samples` sessions, register each with its
 * SessionObject and queue it at the runner hub, collect `SessionResult`s (R2), stop early once
 * enough usable sessions exist, write the `TaskResult`, and deliver the trainer callback.
 * Plain class: the Durable Object shell injects stubs, R2, `fetch` and the clock.
 *
 * Every step is re-driven by the alarm from SQLite state (undispatched sessions, unresolved
 * sessions polled as a safety net, a pending callback), so a restart loses nothing.
 */
import { logError } from '../../contract/log.ts'
import type { UpstreamKind } from '../../contract/completion-record.ts'
import {
  agentTimeoutSeconds,
  ROLLOUT_SESSION_PREFIX,
  type RolloutEvent,
  type TaskRequest,
  type TaskStatus,
} from '../../contract/rollout.ts'
import type { SessionResult, TaskStatusValue } from '../../contract/trajectory.ts'
import { taskStatusOf, toSessionResult } from '../../reconstruct/index.ts'
import { discoverServedModel } from '../../normalize/engine/served-model.ts'
import type { DispatchTicket } from '../runner/dispatch-types.ts'
import type { SessionConfig } from '../session/record.ts'
import type { LifecycleOutcome, LifecycleSpec, LifecycleState } from '../session/session-lifecycle.ts'
import { afterAttempt, attemptCallback, type CallbackPolicy, callbackFailureLine, newCallbackStatus } from './callback-delivery.ts'
import { runResultKey, sessionResultKey, taskResultKey } from './task-keys.ts'
import type { TaskRun, TaskStore } from './task-store.ts'
import { type PartBucket, writeChunks } from '../session/r2-part-writer.ts'
import { fanOutBucket } from './fan-out-bucket.ts'
import type { StoredResult } from '../session/result-stream.ts'

/** Safety net: how often unresolved sessions are polled (Polar polls every 1–5 s; results normally arrive by hand-off). */
export const TASK_POLL_INTERVAL_MS = 30_000
/** A cancelled or early-stopped run re-sends cancels to stragglers this often until they resolve. */
export const CANCEL_SWEEP_INTERVAL_MS = 5_000
/** Registration / queueing fan-out per round. */
const DISPATCH_CONCURRENCY = 16
const CANCEL_CONCURRENCY = 16
/** How long dispatch waits for a direct upstream's `/v1/models` (as `POST /v1/sessions` does). */
const MODEL_DISCOVERY_TIMEOUT_MS = 2_000

export interface SubmitContext {
  public_url: string
  /** The edge's default upstream (for `direct` routes without a URL of their own). */
  upstream: { url: string; kind: UpstreamKind; served_model: string | null }
}

export interface SessionPort {
  register(config: SessionConfig, spec: LifecycleSpec): Promise<{ created: boolean; status: string }>
  cancel(reason?: string): Promise<LifecycleOutcome>
  lifecycle(): Promise<LifecycleState | null>
  /** The session writes its terminal result to R2 and says where (null while it is active). */
  storeResult(): Promise<StoredResult | null>
}

export interface HubPort {
  enqueue(ticket: DispatchTicket): Promise<unknown>
  publish(event: RolloutEvent): Promise<unknown>
  taskState(taskId: string, status: TaskStatusValue): Promise<unknown>
}

export interface BlobPort extends PartBucket {
  put(key: string, value: string | Uint8Array, options?: { httpMetadata?: { contentType?: string } }): Promise<unknown>
  get(key: string): Promise<{ text(): Promise<string>; body: ReadableStream<Uint8Array> } | null>
}

export interface TaskDeps {
  store: TaskStore
  session(sessionId: string): SessionPort
  hub(): HubPort
  blobs: BlobPort
  fetch: typeof fetch
  callbackPolicy: CallbackPolicy
  setAlarm(at: number | null): Promise<void>
  now(): number
}

export type SubmitOutcome = { ok: true; run_id: string } | { ok: false; reason: 'running' }

function randomHex(bytes: number): string {
  let hex = ''
  for (const byte of crypto.getRandomValues(new Uint8Array(bytes))) hex += byte.toString(16).padStart(2, '0')
  return hex
}

/** Run `work` over `items`, at most `limit` at a time. */
async function eachLimited<T>(items: readonly T[], limit: number, work: (item: T) => Promise<void>): Promise<void> {
  let next = 0
  const lanes = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) {
      const item = items[next++] as T
      await work(item)
    }
  })
  await Promise.all(lanes)
}

export class TaskCoordinator {
  readonly #deps: TaskDeps
  #publishing: Promise<unknown> = Promise.resolve()
  /** The run's completion while it writes the TaskResult (hand-offs that arrive meanwhile wait for it). */
  #completing: Promise<void> = Promise.resolve()

  constructor(deps: TaskDeps) {
    this.#deps = deps
  }

  async submit(taskId: string, request: TaskRequest, context: SubmitContext): Promise<SubmitOutcome> {
    const { store } = this.#deps
    const current = store.run()
    if (current && current.status === 'running') return { ok: false, reason: 'running' }
    const now = this.#deps.now()
    const run: TaskRun = {
      task_id: taskId,
      run_id: `run_${randomHex(8)}`,
      request,
      status: 'running',
      submitted_at: new Date(now).toISOString(),
      completed_at: null,
      cancelled: false,
      cancel_reason: null,
      early_stopped: false,
      public_url: context.public_url,
      default_upstream: context.upstream,
      task_result_key: null,
      next_poll_at: now + TASK_POLL_INTERVAL_MS,
      next_sweep_at: null,
    }
    const sessionIds = Array.from({ length: request.num_samples }, () => `${ROLLOUT_SESSION_PREFIX}${randomHex(16)}`)
    store.startRun(run, sessionIds, now)
    await this.#deps.setAlarm(now)
    this.#event({ type: 'task.submitted', task_id: taskId, run_id: run.run_id, num_samples: request.num_samples, at: run.submitted_at })
    this.#deps
      .hub()
      .taskState(taskId, 'running')
      .catch(() => {})
    await this.#dispatch()
    await this.#schedule()
    return { ok: true, run_id: run.run_id }
  }

  status(results: SessionResult[]): TaskStatus | null {
    const run = this.#deps.store.run()
    if (!run) return null
    const counts = this.#deps.store.counts()
    return {
      task_id: run.task_id,
      status: run.status,
      total_sessions: counts.total,
      completed_sessions: counts.resolved,
      results,
      result_paths: this.#deps.store.resultKeys(),
      run_id: run.run_id,
      submitted_at: run.submitted_at,
      completed_at: run.completed_at,
      cancelled: run.cancelled,
      early_stopped: run.early_stopped,
      usable_sessions: counts.usable,
      sessions: this.#deps.store.sessions(),
      callback: this.#deps.store.callback(run.run_id),
      task_result_path: run.task_result_key,
    }
  }

  /** The stored results of resolved sessions, in sample order. */
  async results(): Promise<SessionResult[]> {
    const out: SessionResult[] = []
    for (const key of this.#deps.store.resultKeys()) {
      const object = await this.#deps.blobs.get(key)
      if (object) out.push(JSON.parse(await object.text()) as SessionResult)
    }
    return out
  }

  /** A terminal result made here (a session that never registered, or whose own result is unreachable). Idempotent. */
  async sessionResolved(runId: string, result: SessionResult): Promise<{ accepted: boolean }> {
    const run = this.#deps.store.run()
    if (!run || run.run_id !== runId || !this.#deps.store.has(result.session_id)) return { accepted: false }
    if (this.#deps.store.isResolved(result.session_id)) return { accepted: true }
    const key = sessionResultKey(run.task_id, result.session_id)
    const text = JSON.stringify(result)
    await this.#deps.blobs.put(key, text, { httpMetadata: { contentType: 'application/json' } })
    return this.sessionStored(runId, {
      session_id: result.session_id,
      status: result.status,
      error: result.error,
      node_id: result.node_id,
      reward: sessionReward(result),
      trace_count: result.trajectory.traces.length,
      key,
      bytes: text.length,
    })
  }

  /**
   * A session's terminal result, which the session wrote to R2 at `stored.key` (hand-off from its
   * SessionObject, or found by polling): the task keeps the key and the small fields. Idempotent.
   */
  async sessionStored(runId: string, stored: StoredResult): Promise<{ accepted: boolean }> {
    const { store } = this.#deps
    const run = store.run()
    if (!run || run.run_id !== runId || !store.has(stored.session_id)) return { accepted: false }
    if (store.isResolved(stored.session_id)) {
      // Resolved by another hand-off whose completion of the run may still be writing: answer after it.
      await this.#completing.catch(() => {})
      return { accepted: true }
    }
    // Only where this task's results live (a session writes there; nothing else is read back as a result).
    const key = sessionResultKey(run.task_id, stored.session_id)
    if (stored.key !== key) return { accepted: false }
    store.markResolved(
      stored.session_id,
      stored.status,
      stored.status === 'COMPLETED',
      stored.node_id,
      key,
      this.#deps.now(),
      stored.reward,
    )
    const counts = store.counts()
    this.#event({
      type: 'task.session_resolved',
      task_id: run.task_id,
      run_id: runId,
      session_id: stored.session_id,
      status: stored.status,
      completed_sessions: counts.resolved,
      total_sessions: counts.total,
      at: new Date(this.#deps.now()).toISOString(),
    })
    await this.#afterResolution()
    return { accepted: true }
  }

  async cancel(reason: string): Promise<TaskRun | null> {
    const { store } = this.#deps
    const run = store.run()
    if (!run) return null
    if (run.status !== 'running') return run
    if (!run.cancelled) {
      store.saveRun({ ...run, cancelled: true, cancel_reason: reason })
      this.#event({
        type: 'task.cancelled',
        task_id: run.task_id,
        run_id: run.run_id,
        reason,
        at: new Date(this.#deps.now()).toISOString(),
      })
    }
    await this.#sweep()
    await this.#schedule()
    return store.run()
  }

  async alarm(): Promise<void> {
    const run = this.#deps.store.run()
    if (!run) return
    // Work due by the time this alarm was set for is due now (an alarm never fires early in production;
    // `runDurableObjectAlarm` in tests does, and then exactly the earliest work runs).
    const dueBy = Math.max(this.#deps.now(), this.#nextAlarmAt() ?? 0)
    if (run.status === 'running') {
      await this.#dispatch()
      if ((run.cancelled || run.early_stopped) && (run.next_sweep_at === null || dueBy >= run.next_sweep_at)) await this.#sweep()
      const latest = this.#deps.store.run()
      if (latest?.status === 'running' && (latest.next_poll_at === null || dueBy >= latest.next_poll_at)) await this.#poll()
    }
    await this.#deliverCallbacks(dueBy)
    await this.#schedule()
  }

  /** Cancel every unresolved session of a cancelled / early-stopped run; repeated until they resolve. */
  async #sweep(): Promise<void> {
    const { store } = this.#deps
    const run = store.run()
    if (run?.status !== 'running') return
    store.saveRun({ ...run, next_sweep_at: this.#deps.now() + CANCEL_SWEEP_INTERVAL_MS })
    const reason = run.cancelled ? (run.cancel_reason ?? 'task cancelled') : 'early stop: enough usable sessions'
    await this.#cancelUnresolved(reason)
  }

  /** Register and queue every sample not yet dispatched (idempotent per session). */
  async #dispatch(): Promise<void> {
    const { store } = this.#deps
    const run = store.run()
    if (run?.status !== 'running' || run.cancelled) return
    const context: SubmitContext = { public_url: run.public_url, upstream: run.default_upstream }
    const request = run.request
    const route = request.upstream?.route ?? 'auto'
    const upstream = {
      url: (request.upstream?.url ?? context.upstream.url).replace(/\/+$/, ''),
      kind: request.upstream?.kind ?? context.upstream.kind,
      served_model: request.upstream?.served_model === undefined ? context.upstream.served_model : request.upstream.served_model,
    }
    const pending = store.undispatched()
    if (!pending.length) return
    const engine = await this.#directEngine(
      route,
      { ...upstream, served_model: upstream.served_model ?? null },
      { maxModelLen: request.upstream?.max_model_len ?? null, servedModel: request.upstream?.served_model !== undefined },
    )
    const agentTimeout = agentTimeoutSeconds(request)
    const policyVersion = request.metadata.policy_version
    await eachLimited(pending, DISPATCH_CONCURRENCY, async ({ session_id, index }) => {
      const config: SessionConfig = {
        session_id,
        task_id: run.task_id,
        created_at: new Date(this.#deps.now()).toISOString(),
        upstream: { ...upstream, served_model: engine.servedModel, max_model_len: engine.maxModelLen },
        policy_version: typeof policyVersion === 'string' || typeof policyVersion === 'number' ? policyVersion : null,
        metadata: request.metadata,
      }
      const spec: LifecycleSpec = {
        task_id: run.task_id,
        run_id: run.run_id,
        index,
        timeout_seconds: request.timeout_seconds,
        agent_timeout_seconds: agentTimeout,
        builder: request.builder,
        evaluator: request.evaluator,
        metadata: request.metadata,
        route,
        training_filter: request.training_filter ?? 'none',
      }
      await this.#deps.session(session_id).register(config, spec)
      await this.#deps.hub().enqueue({
        session_id,
        task_id: run.task_id,
        run_id: run.run_id,
        priority: request.dispatch_priority,
        public_url: run.public_url,
        route,
        spec: {
          session_id,
          task_id: run.task_id,
          run_id: run.run_id,
          index,
          instruction: request.instruction,
          runtime: request.runtime,
          agent: request.agent,
          builder: request.builder,
          evaluator: request.evaluator,
          metadata: request.metadata,
          timeout_seconds: request.timeout_seconds,
          agent_timeout_seconds: agentTimeout,
          dispatch_priority: request.dispatch_priority,
        },
      })
      store.markDispatched(session_id, this.#deps.now())
    })
  }

  /**
   * What a direct upstream serves, as `POST /v1/sessions` learns it: the context window — the task's own
   * `upstream.max_model_len`, else the engine's `GET /v1/models` (cached per upstream), else null: output
   * budgets then pass unchanged (logged) — and the served model when neither the task nor the edge names
   * one. Tunnelled calls use what their runner reported at register.
   */
  async #directEngine(
    route: string,
    upstream: { url: string; kind: UpstreamKind; served_model: string | null },
    given: { maxModelLen: number | null; servedModel: boolean },
  ): Promise<{ servedModel: string | null; maxModelLen: number | null }> {
    const known = { servedModel: upstream.served_model, maxModelLen: given.maxModelLen }
    const wantModel = upstream.served_model === null && !given.servedModel
    if (route === 'runner' || upstream.kind === 'openai' || (!wantModel && known.maxModelLen !== null)) return known
    const served = await discoverServedModel(upstream.url, {
      timeoutMs: MODEL_DISCOVERY_TIMEOUT_MS,
      fetch: this.#deps.fetch,
      onFailure: (reason) => logError('task.window_unknown', `${reason}: the window is unknown, output budgets are not lowered`),
    })
    return { servedModel: wantModel ? served.id : upstream.served_model, maxModelLen: known.maxModelLen ?? served.maxModelLen }
  }

  /** Safety net: ask every unresolved session for its state; take terminal results directly. */
  async #poll(): Promise<void> {
    const { store } = this.#deps
    const run = store.run()
    if (!run) return
    store.saveRun({ ...run, next_poll_at: this.#deps.now() + TASK_POLL_INTERVAL_MS })
    for (const sessionId of store.unresolved()) {
      const session = this.#deps.session(sessionId)
      const state = await session.lifecycle().catch(() => null)
      if (!state) continue
      store.noteStatus(sessionId, state.status, state.runner_id, this.#deps.now())
      if (state.status === 'COMPLETED' || state.status === 'ERROR' || state.status === 'TIMEOUT') {
        const stored = await session.storeResult().catch(() => null)
        if (stored) await this.sessionStored(run.run_id, stored)
      }
    }
  }

  async #cancelUnresolved(reason: string): Promise<void> {
    await eachLimited(this.#deps.store.unresolved(), CANCEL_CONCURRENCY, async (sessionId) => {
      const outcome = await this.#deps
        .session(sessionId)
        .cancel(reason)
        .catch((error: unknown) => {
          logError('cancel failed', sessionId, error)
          return null
        })
      if (!outcome) return
      if (outcome.ok) {
        // Take its result now when the session has it (the hand-off would bring it later), so the cancel answers
        // with the task's state after cancelling rather than "running".
        const stored = await this.#deps
          .session(sessionId)
          .storeResult()
          .catch(() => null)
        const run = this.#deps.store.run()
        if (stored && run) await this.sessionStored(run.run_id, stored).catch(() => null)
        return
      }
      // Never registered (cancelled before dispatch): nothing will report back, so resolve it here.
      if (outcome.status === null) {
        await this.#resolveLocally(sessionId, reason)
        return
      }
      // Already ended but its hand-off has not arrived: fetch the result, or end it here so the cancel ends the task.
      if (outcome.status === 'COMPLETED' || outcome.status === 'ERROR' || outcome.status === 'TIMEOUT') {
        const run = this.#deps.store.run()
        const stored = await this.#deps
          .session(sessionId)
          .storeResult()
          .catch(() => null)
        const accepted = stored && run ? await this.sessionStored(run.run_id, stored).catch(() => null) : null
        if (!accepted?.accepted) await this.#resolveLocally(sessionId, `${reason}; the session's result could not be retrieved`)
      }
    })
  }

  /** Resolve a session with an ERROR result made here (it never registered, or its own result is unreachable). */
  async #resolveLocally(sessionId: string, reason: string): Promise<void> {
    const run = this.#deps.store.run()
    if (!run) return
    const trajectory = { status: 'ERROR' as const, metadata: { session_id: sessionId, task_id: run.task_id }, traces: [], error: reason }
    const result = toSessionResult(trajectory, {
      session_id: sessionId,
      task_id: run.task_id,
      status: 'ERROR',
      error: reason,
      metadata: run.request.metadata,
    })
    await this.sessionResolved(run.run_id, result)
  }

  /** Early stop, and completion once every session resolved. */
  async #afterResolution(): Promise<void> {
    const { store } = this.#deps
    const run = store.run()
    if (run?.status !== 'running') return
    const counts = store.counts()
    const threshold = run.request.early_stop_min_usable_sessions
    if (threshold !== null && !run.early_stopped && !run.cancelled && counts.usable >= threshold && counts.resolved < counts.total) {
      store.saveRun({ ...run, early_stopped: true })
      // Cancelled stragglers hand their results back through `sessionResolved`, which completes the run.
      await this.#sweep()
      await this.#schedule()
      return
    }
    if (counts.resolved < counts.total) return
    this.#completing = this.#complete(run)
    await this.#completing
  }

  /** Every session resolved: write the TaskResult (streamed from the sessions' R2 objects) and end the run. */
  async #complete(run: TaskRun): Promise<void> {
    const { store } = this.#deps
    const counts = store.counts()
    const status: TaskStatusValue = run.cancelled ? 'failed' : taskStatusOf(store.sessions())
    const key = taskResultKey(run.task_id)
    const runKey = runResultKey(run.task_id, run.run_id)
    // Streamed from the sessions' R2 objects into parts: the task never holds a result. Each session's
    // result is read once; every part goes to both objects (the run's and the task's latest).
    const paths = store.resultKeys()
    await writeChunks(
      fanOutBucket(this.#deps.blobs, [runKey, key]),
      runKey,
      taskResultChunks(this.#deps.blobs, run.task_id, status, paths),
      'application/json',
    )
    const now = this.#deps.now()
    const latest = store.run() ?? run
    if (latest.request.callback_url) {
      store.putCallback(
        latest.run_id,
        newCallbackStatus(latest.request.callback_url, `${latest.task_id}/${latest.run_id}`, now),
        runKey,
        now,
      )
    }
    store.saveRun({
      ...latest,
      status,
      completed_at: new Date(now).toISOString(),
      task_result_key: key,
      next_poll_at: null,
      next_sweep_at: null,
    })
    this.#event({
      type: 'task.completed',
      task_id: run.task_id,
      run_id: run.run_id,
      status,
      usable_sessions: counts.usable,
      at: new Date(now).toISOString(),
    })
    this.#deps
      .hub()
      .taskState(run.task_id, status)
      .catch(() => {})
    await this.#schedule()
  }

  /** Attempt every pending callback due by `dueBy` (epoch ms), oldest run first. */
  async #deliverCallbacks(dueBy: number): Promise<void> {
    const { store } = this.#deps
    const run = store.run()
    if (!run) return
    for (const { run_id: runId, status: callback, body_key: bodyKey } of store.pendingCallbacks()) {
      if (callback.next_attempt_at !== null && callback.next_attempt_at > dueBy) continue
      const object = await this.#deps.blobs.get(bodyKey)
      if (!object) continue
      const outcome = await attemptCallback(this.#deps.fetch, callback, object.body, {
        'x-rollgate-task-id': run.task_id,
        'x-rollgate-run-id': runId,
      })
      const updated = afterAttempt(callback, outcome, this.#deps.callbackPolicy, this.#deps.now())
      store.putCallback(runId, updated, bodyKey, this.#deps.now())
      if (!outcome.ok) logError(callbackFailureLine(run.task_id, updated, this.#deps.now()))
      this.#event({
        type: 'task.callback',
        task_id: run.task_id,
        run_id: runId,
        state: updated.state,
        attempts: updated.attempts,
        last_status: updated.last_status,
        at: new Date(this.#deps.now()).toISOString(),
      })
    }
  }

  async #schedule(): Promise<void> {
    await this.#deps.setAlarm(this.#nextAlarmAt())
  }

  /** The earliest pending work: dispatch, poll, cancellation sweep, callback attempt. */
  #nextAlarmAt(): number | null {
    const run = this.#deps.store.run()
    if (!run) return null
    const candidates: number[] = []
    if (run.status === 'running') {
      if (!run.cancelled && this.#deps.store.undispatched().length) candidates.push(this.#deps.now())
      if (run.next_poll_at !== null) candidates.push(run.next_poll_at)
      if ((run.cancelled || run.early_stopped) && run.next_sweep_at !== null) candidates.push(run.next_sweep_at)
    }
    for (const { status } of this.#deps.store.pendingCallbacks()) {
      if (status.next_attempt_at !== null) candidates.push(status.next_attempt_at)
    }
    return candidates.length ? Math.min(...candidates) : null
  }

  /** Best effort, never blocking; one at a time, so subscribers see this task's events in the order they happened. */
  #event(event: RolloutEvent): void {
    this.#publishing = this.#publishing.then(() => this.#deps.hub().publish(event)).catch(() => {})
  }
}

/** Mean of a session's non-null trace rewards (an outcome reward is broadcast to every trace); null when none. */
export function sessionReward(result: Pick<SessionResult, 'trajectory'>): number | null {
  const rewards = result.trajectory.traces.map((trace) => trace.reward).filter((reward): reward is number => reward !== null)
  return rewards.length ? rewards.reduce((sum, reward) => sum + reward, 0) / rewards.length : null
}

/**
 * A `TaskResult` (`{task_id, status, results, result_paths}`) as chunks: each result is its session's R2
 * object, copied byte for byte (a missing one is an error: the write is retried).
 */
export async function* taskResultChunks(
  blobs: Pick<BlobPort, 'get'>,
  taskId: string,
  status: TaskStatusValue,
  paths: readonly string[],
): AsyncGenerator<string | Uint8Array> {
  yield `{"task_id":${JSON.stringify(taskId)},"status":${JSON.stringify(status)},"results":[`
  for (const [index, path] of paths.entries()) {
    const object = await blobs.get(path)
    if (!object) throw new Error(`session result ${path} is missing from R2`)
    if (index > 0) yield ','
    const reader = object.body.getReader()
    for (;;) {
      const chunk = await reader.read()
      if (chunk.done) break
      yield chunk.value
    }
  }
  yield `],"result_paths":${JSON.stringify(paths)}}`
}
