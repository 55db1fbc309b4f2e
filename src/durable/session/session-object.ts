/**
 * @module
 * One Durable Object per capture session: a thin RPC shell over `SessionStore` and `CompletionLog`.
 * A completion's `record` resolves only after SQLite has it (the output gate holds the reply until the
 * write is durable), so the edge releases a response only once its capture is committed.
 */
import { DurableObject } from 'cloudflare:workers'
import type { CompletionRecord, ResponseMessage } from '../../contract/completion-record.ts'
import type { BuilderName } from '../../contract/trajectory.ts'
import { trajectoryObjectKey } from '../../reconstruct/index.ts'
import { BlobStore } from './blob-store.ts'
import { CompletionLog, MAX_RESPONSE_MESSAGE_LOOKUPS, type RecordResult, type StorageStats } from './completion-log.ts'
import type { CompletionInput, SessionConfig } from './record.ts'
import { ensureSchema } from './schema.ts'
import { Sql } from './sql.ts'
import { SESSION_CLOSED, type SessionFinalization, SessionStore } from './session-store.ts'
import { type PartBucket, writeChunks } from './r2-part-writer.ts'
import { contentTypeOf, type StreamSummary, type TrajectoryFormat, trajectoryChunks } from './trajectory-stream.ts'
import { type Admission, SessionRollout } from './session-rollout.ts'
import type { StoredResult } from './result-stream.ts'
import { type LifecycleOutcome, type LifecycleSpec, type LifecycleState, type RunnerUpstream, TERMINAL } from './session-lifecycle.ts'
import type { AgentResult, RunnerSessionStatus } from '../../contract/runner-protocol.ts'
import type { EvalResult, SessionResult } from '../../contract/trajectory.ts'
import { INFERENCE_GATE_NAME, RUNNER_HUB_NAME } from '../runner/names.ts'
import type { GateView } from './session-gate.ts'

export interface SessionSummary {
  config: SessionConfig
  completion_count: number
  storage: StorageStats
  finalized: SessionFinalization | null
  /** The rollout lifecycle status; null for a bare capture session. */
  rollout_status: string | null
}

export interface TrajectoryRequest {
  builder: BuilderName
  config?: Record<string, unknown>
}

/** A trajectory export's request: without a builder, a rollout session's own (the task's), else prefix_merging. */
export interface TrajectoryExportRequest {
  builder?: BuilderName
  config?: Record<string, unknown>
  format?: TrajectoryFormat
}

/**
 * Whether an export carries the evaluation: `evaluated` (a terminal rollout session asked with its task's
 * builder: the task's result), `not_evaluated` (a bare capture session: nothing evaluates it), `pending`
 * (a rollout session not evaluated yet), `other_builder` (evaluated, but asked with another builder or config:
 * the traces differ from those the rewards belong to). All but `evaluated` have `reward: null` traces.
 */
export type TrajectoryEvaluation = 'evaluated' | 'not_evaluated' | 'pending' | 'other_builder'

export interface TrajectoryExport {
  contentType: string
  body: ReadableStream<Uint8Array>
  evaluation: TrajectoryEvaluation
  /** The rollout lifecycle status; null for a bare capture session. */
  rollout_status: string | null
  /** The rollout task's builder (the one the rewards belong to); null for a bare capture session. */
  builder: BuilderName | null
}

/** Builder configs compare as JSON, absent as empty. */
function sameConfig(a: Record<string, unknown> | undefined, b: Record<string, unknown> | undefined): boolean {
  return JSON.stringify(a ?? {}) === JSON.stringify(b ?? {})
}

/**
 * A finalize answer: `created` is false when the session was already finalized with the same builder and
 * config (the stored finalization, unchanged); `conflict` when it was finalized with another builder or config.
 */
export type FinalizeOutcome =
  | { ok: true; created: boolean; finalization: SessionFinalization }
  | { ok: false; conflict: true; finalization: SessionFinalization }

/** What callers see through the stub: every method, promisified (typed here, not by RPC inference). */
type Rpc<T> = { [K in keyof T]: T[K] extends (...args: infer A) => infer R ? (...args: A) => Promise<Awaited<R>> : never }
export type SessionRpc = Rpc<
  Pick<
    SessionObject,
    | 'create'
    | 'config'
    | 'revoked'
    | 'record'
    | 'completions'
    | 'completionById'
    | 'responseMessages'
    | 'summary'
    | 'trajectoryStream'
    | 'finalize'
  >
>

export class SessionObject extends DurableObject<Env> {
  readonly #sql: Sql
  readonly #store: SessionStore
  #log: CompletionLog | null = null
  #rollout: SessionRollout | null = null
  /** Records under way: finalize waits for them, so its trajectory covers every call it let through. */
  readonly #recording = new Set<Promise<unknown>>()
  #finalizing: Promise<FinalizeOutcome> | null = null

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env)
    this.#sql = new Sql(ctx.storage.sql)
    ensureSchema(this.#sql)
    this.#store = new SessionStore(this.#sql)
  }

  create(config: SessionConfig): { config: SessionConfig; created: boolean } {
    return this.#store.create(config)
  }

  config(): SessionConfig | null {
    return this.#store.config()
  }

  /**
   * Why the session's token no longer works, or null while it does: revoked once a bare session is
   * finalized (or being finalized), and once a rollout session ended (completed, failed, timed out, cancelled).
   */
  revoked(): string | null {
    const finalization = this.#store.finalization()
    if (finalization) return `session was finalized at ${finalization.finalized_at}`
    if (this.#finalizing) return 'session is being finalized'
    const status = this.#rolloutSide().lifecycle()?.status
    return status === 'COMPLETED' || status === 'ERROR' || status === 'TIMEOUT' ? `session ended ${status}` : null
  }

  async record(input: CompletionInput): Promise<RecordResult> {
    this.#assertOpen()
    return this.#track(this.#requireLog().record(input))
  }

  /** `maxBytes` bounds the answer's estimated size (an RPC answer may not exceed 32 MiB); at least one record. */
  async completions(afterSeq?: number, limit?: number, maxBytes?: number): Promise<CompletionRecord[]> {
    return this.#requireLog().list(afterSeq, limit, maxBytes)
  }

  async completionById(completionId: string): Promise<CompletionRecord | null> {
    return this.#requireLog().getById(completionId)
  }

  /** Sampled response messages of `ok` completions by id (the edge restores replayed tool calls from them). */
  responseMessages(completionIds: string[]): Record<string, ResponseMessage> {
    return this.#requireLog().responseMessages(completionIds.slice(0, MAX_RESPONSE_MESSAGE_LOOKUPS))
  }

  summary(): SessionSummary | null {
    const config = this.#store.config()
    if (!config) return null
    const log = this.#requireLog()
    return {
      config,
      completion_count: log.count(),
      storage: log.stats(),
      finalized: this.#store.finalization(),
      rollout_status: this.#rolloutSide().lifecycle()?.status ?? null,
    }
  }

  /**
   * The trajectory (or a trainer export of it) as a byte stream, built from the durable log while it is
   * read: no RPC answer limit, no whole-trajectory string (`trajectory-stream.ts`). An evaluated rollout
   * session's export is its evaluated result (rewards, evaluation, training filter: the task's result,
   * `result-stream.ts`) when asked with the task's builder (the default for a rollout session); otherwise
   * it is rebuilt from the capture log, rewards null, and `evaluation` says why.
   */
  trajectoryStream(request: TrajectoryExportRequest): TrajectoryExport {
    const config = this.#requireConfig()
    const format = request.format ?? 'trajectory'
    const rollout = this.#rolloutSide()
    const state = rollout.lifecycle()
    const spec = state?.spec.builder
    const builder = request.builder ?? spec?.strategy ?? 'prefix_merging'
    const builderConfig = request.builder || request.config ? request.config : spec?.config
    const taskBuilder = spec !== undefined && builder === spec.strategy && sameConfig(builderConfig, spec.config)
    const evaluated = state && taskBuilder ? rollout.evaluatedExport(format) : null
    const evaluation: TrajectoryEvaluation = evaluated
      ? 'evaluated'
      : !state
        ? 'not_evaluated'
        : !TERMINAL.includes(state.status)
          ? 'pending'
          : 'other_builder'
    const chunks =
      evaluated ??
      trajectoryChunks(
        this.#requireLog(),
        { builder, format, ...(builderConfig ? { config: builderConfig } : {}) },
        this.#sessionInfo(config),
      )
    const encoder = new TextEncoder()
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        const next = await chunks.next()
        if (next.done) controller.close()
        else controller.enqueue(encoder.encode(next.value))
      },
      async cancel() {
        await chunks.return(undefined)
      },
    })
    return {
      contentType: contentTypeOf(format),
      body,
      evaluation,
      rollout_status: state?.status ?? null,
      builder: spec?.strategy ?? null,
    }
  }

  #sessionInfo(config: SessionConfig) {
    return { session_id: config.session_id, task_id: config.task_id, metadata: config.metadata }
  }

  /**
   * Close the session, build its trajectory and write it to R2 (`trajectories/<session_id>/<builder>.json`).
   * From the moment finalize starts, model calls are refused (`SESSION_CLOSED`); calls already recording are
   * waited for. Finalizing again with the same builder and config returns the stored finalization unchanged
   * (R2 is not rewritten); with another builder or config it is a conflict.
   */
  async finalize(request: TrajectoryRequest): Promise<FinalizeOutcome> {
    if (this.#finalizing) return this.#sameFinalization(await this.#finalizing, request)
    const stored = this.#store.finalization()
    if (stored) return this.#sameFinalization({ ok: true, created: false, finalization: stored }, request)
    this.#finalizing = this.#build(request)
    try {
      return await this.#finalizing
    } finally {
      this.#finalizing = null
    }
  }

  async #build(request: TrajectoryRequest): Promise<FinalizeOutcome> {
    const config = this.#requireConfig()
    await Promise.allSettled([...this.#recording])
    // Streamed to R2 in parts: the whole trajectory is never one string (nor, for per_request, in memory).
    const key = trajectoryObjectKey(config.session_id, request.builder)
    const summary: StreamSummary = { trace_count: 0 }
    // Nobody reads the chunks before the end: the build gives the event loop fewer turns (`BuildPace`).
    const chunks = trajectoryChunks(this.#requireLog(), request, this.#sessionInfo(config), summary, 'background')
    const written = await writeChunks(this.env.BLOBS as unknown as PartBucket, key, chunks, 'application/json')
    const finalization: SessionFinalization = {
      finalized_at: new Date().toISOString(),
      builder: request.builder,
      config: request.config ?? null,
      trajectory_key: key,
      trace_count: summary.trace_count,
      trajectory_bytes: written.bytes,
      trajectory_parts: written.parts,
      completion_count: this.#requireLog().count(),
    }
    this.#store.setFinalization(finalization)
    return { ok: true, created: true, finalization }
  }

  #sameFinalization(outcome: FinalizeOutcome, request: TrajectoryRequest): FinalizeOutcome {
    const { finalization } = outcome
    const same =
      finalization.builder === request.builder && JSON.stringify(finalization.config ?? null) === JSON.stringify(request.config ?? null)
    return same ? { ok: true, created: false, finalization } : { ok: false, conflict: true, finalization }
  }

  #assertOpen(): void {
    const finalization = this.#store.finalization()
    if (!finalization && !this.#finalizing) return
    const when = finalization ? `was finalized at ${finalization.finalized_at}` : 'is being finalized'
    throw new Error(`${SESSION_CLOSED} session ${this.#requireConfig().session_id} ${when}; it records no more model calls`)
  }

  #track<T>(recording: Promise<T>): Promise<T> {
    this.#recording.add(recording)
    const settled = () => this.#recording.delete(recording)
    recording.then(settled, settled)
    return recording
  }

  // --- Rollout lifecycle (logic in session-rollout.ts / session-lifecycle.ts) ---

  register(config: SessionConfig, spec: LifecycleSpec): Promise<{ created: boolean; status: string }> {
    return this.#rolloutSide().register(config, spec)
  }

  admit(leaseMs?: number, maxWaitMs?: number): Promise<Admission> {
    return this.#rolloutSide().admit(leaseMs, maxWaitMs)
  }

  peek(): Admission {
    return this.#rolloutSide().peek()
  }

  recordAdmitted(ticket: string, input: CompletionInput): Promise<RecordResult> {
    return this.#track(this.#rolloutSide().recordAdmitted(ticket, input))
  }

  gateSync(view: GateView): { subscribed: boolean; inflight: number; waiting: number; completions: number } {
    return this.#rolloutSide().gateSync(view)
  }

  lifecycle(): LifecycleState | null {
    return this.#rolloutSide().lifecycle()
  }

  assignRunner(runnerId: string, upstream: RunnerUpstream | null): Promise<LifecycleOutcome> {
    return this.#rolloutSide().assignRunner(runnerId, upstream)
  }

  runnerReport(runnerId: string, status: RunnerSessionStatus): Promise<LifecycleOutcome> {
    return this.#rolloutSide().runnerReport(runnerId, status)
  }

  runnerFinished(
    runnerId: string,
    agentResult: AgentResult | null,
    evalResult: EvalResult | null,
    error: string | null,
  ): Promise<LifecycleOutcome> {
    return this.#rolloutSide().runnerFinished(runnerId, agentResult, evalResult, error)
  }

  runnerLost(runnerId: string, reason: string): Promise<LifecycleOutcome & { requeued?: boolean }> {
    return this.#rolloutSide().runnerLost(runnerId, reason)
  }

  cancel(reason?: string): Promise<LifecycleOutcome> {
    return this.#rolloutSide().cancel(reason)
  }

  result(): Promise<SessionResult | null> {
    return this.#rolloutSide().result()
  }

  storeResult(): Promise<StoredResult | null> {
    return this.#rolloutSide().storeResult()
  }

  async alarm(): Promise<void> {
    await this.#rolloutSide().alarm()
  }

  #rolloutSide(): SessionRollout {
    this.#rollout ??= new SessionRollout({
      sql: this.#sql,
      storage: this.ctx.storage,
      config: () => this.#store.config(),
      createConfig: (config) => this.#store.create(config),
      log: () => this.#requireLog(),
      blobs: this.env.BLOBS as unknown as PartBucket,
      assertOpen: () => this.#assertOpen(),
      task: (taskId) => this.env.TASKS.get(this.env.TASKS.idFromName(taskId)),
      hub: () => this.env.RUNNERS.get(this.env.RUNNERS.idFromName(RUNNER_HUB_NAME)),
      gate: () => this.env.INFERENCE_GATE.get(this.env.INFERENCE_GATE.idFromName(INFERENCE_GATE_NAME)),
    })
    return this.#rollout
  }

  #requireConfig(): SessionConfig {
    const config = this.#store.config()
    if (!config) throw new Error('session not initialized')
    return config
  }

  #requireLog(): CompletionLog {
    if (this.#log) return this.#log
    const config = this.#store.config()
    if (!config) throw new Error('session not initialized')
    this.#log = new CompletionLog(this.#sql, new BlobStore(this.env.BLOBS), config.session_id)
    return this.#log
  }
}
