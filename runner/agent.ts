/**
 * @module
 * The runner agent: one `EdgeConnection`, one `TunnelClient`, one `StagePipeline`. It
 * - registers with every session it still holds (pipeline + finished-but-unreported), so an edge restart or a
 *   network blip loses nothing; applies the edge's `keep` / `drop`;
 * - acknowledges `assign` (refusing while draining), feeds the pipeline, reports every stage change
 *   (`session.status`) and every end (`session.finished`, kept in an outbox until it is written to a live,
 *   registered connection);
 * - heartbeats stage metrics (and sends one right after each stage change, so dispatch sees fresh load);
 * - re-reads its engine's model and window (`/v1/models`) on every reconnect, every minute, and once a failed
 *   engine call's engine answers again; an engine that came up after the runner (or now serves another model or
 *   window) goes to the edge in a heartbeat (`upstream`). It registers once per connection, never again on a live
 *   one: a second `register` would list the sessions held at that instant, and an assignment the edge sent for the
 *   first registration and still on its way would be taken for lost;
 * - drains (`drain()`: no new sessions, finish held ones, close "drained") and cancels (`cancel()`: stop
 *   everything, report partial results of sessions that reached RUNNING, close "shutdown" so the edge
 *   re-dispatches the rest).
 */
import type { EdgeBodyFrame } from '../src/contract/tunnel-frames.ts'
import { type EdgeMessage, RUNNER_PROTOCOL_VERSION, type RunnerCapacity, type RunnerMessageInput } from '../src/contract/runner-protocol.ts'
import { discoverServedModel, type ServedModel } from '../src/normalize/engine/served-model.ts'
import { type ConnectRefusedError, EdgeConnection } from './connection/edge-connection.ts'
import { SecretStore } from './connection/secret-store.ts'
import { negotiatedFeatures, TUNNEL_CLIENT_CAPABILITIES, TunnelClient, type TunnelFeatures } from './connection/tunnel-client.ts'
import { type Outcome, type StageHandlers, StagePipeline } from './pools/pipeline.ts'
import { jobFromAssignment, type SessionJob } from './session/session-flow.ts'

export interface RunnerAgentOptions {
  edgeUrl: string
  token: string
  runnerId: string
  stateDir: string
  upstreamUrl: string | null
  /** Served model, fixed; null: read from the engine's `/v1/models` (and read again, see `upstreamRefreshMs`). */
  servedModel: string | null
  upstreamKind?: 'vllm' | 'sglang' | 'openai'
  /** The engine's context window, fixed; null: read with the model (and read again when the engine restarts). */
  maxModelLen?: number | null
  capacity: Required<RunnerCapacity>
  handlers: StageHandlers<SessionJob, unknown>
  labels?: Record<string, string>
  evaluators?: string[]
  log(event: string, fields?: Record<string, unknown>): void
  backoff?: { baseMs: number; maxMs: number }
  /** How often to ask an engine that was down (at start, or after a failed call) for its model (default 5 s). */
  modelRetryMs?: number
  /** How often to re-read the engine's model and window while all is well (default 60 s; 0: never). */
  upstreamRefreshMs?: number
}

type HeldStatus = 'ASSIGNED' | 'INITIALIZING' | 'READY' | 'RUNNING'

export class RunnerAgent {
  readonly options: RunnerAgentOptions
  readonly pipeline: StagePipeline<SessionJob, unknown>
  readonly connection: EdgeConnection
  readonly tunnel: TunnelClient
  /** What the edge accepted for the tunnel on the current connection (null until `registered`). */
  #tunnelFeatures: TunnelFeatures | null = null
  /** `session.finished` frames not yet written to a registered connection. */
  readonly #outbox = new Map<string, { message: RunnerMessageInput; status: HeldStatus }>()
  readonly #lastStatus = new Map<string, HeldStatus>()
  #draining = false
  #drainedByEdge = false
  #stopped = false
  #model: string | null
  #resolveRefused: (error: ConnectRefusedError) => void = () => {}
  /** Settles when an answer at connect cannot get better by retrying (`ConnectRefusedError`) and the agent has stopped. */
  readonly refused: Promise<ConnectRefusedError> = new Promise((resolve) => {
    this.#resolveRefused = resolve
  })
  #window: number | null
  /** Connections registered so far (the first one's register frame carries what `start()` just read). */
  #registrations = 0
  /** The engine as the current connection's edge was last told it (its `register`, then heartbeats): JSON. */
  #announced: string | null = null
  /** `session.finished` frames handed to a socket and not yet written, with that connection's number: not sent
   * again on the same connection meanwhile (a later connection sends them again: the old write may never end). */
  readonly #writing = new Map<RunnerMessageInput, number>()
  /** Connections opened so far (one `register` each). */
  #connections = 0
  /** The connection (by number) that was told `drain` (0: none). */
  #drainSentOn = 0
  /** Asking a failed engine until it answers again (one watch at a time). */
  #engineWatch: Promise<void> | null = null
  #refreshTimer: ReturnType<typeof setInterval> | null = null
  readonly startedAt = Date.now()
  readonly recent: { at: number; sessionId: string; status: string; reward: number | null }[] = []

  constructor(options: RunnerAgentOptions) {
    this.options = options
    this.#model = options.servedModel
    this.#window = options.maxModelLen ?? null
    this.pipeline = new StagePipeline<SessionJob, unknown>({
      maxInit: options.capacity.max_init_workers,
      maxRun: options.capacity.max_run_workers,
      maxPostrun: options.capacity.max_postrun_workers,
      readyBuffer: options.capacity.ready_buffer,
      handlers: options.handlers,
      onStage: (job, stage) => this.#onStage(job, stage),
      onFinished: (job, outcome) => this.#onFinished(job, outcome),
      onError: (job, error) => options.log('session.error', { session_id: job.id, error: (error as Error).message ?? String(error) }),
    })
    this.connection = new EdgeConnection({
      edgeUrl: options.edgeUrl,
      token: options.token,
      runnerId: options.runnerId,
      secrets: new SecretStore(options.stateDir, options.runnerId),
      register: () => this.#registerFrame(),
      heartbeat: () => this.#heartbeatFrame(),
      onMessage: (message) => this.#onMessage(message),
      onRegistered: () => {
        // The engine may have answered between this connection's `register` and the edge's answer.
        this.#announce()
        this.#flushOutbox()
        // A reconnect (the edge restarted, or the link dropped): the engine may have restarted meanwhile too.
        if (++this.#registrations > 1) void this.#refreshUpstream()
      },
      onDisconnected: (reason) => {
        this.#tunnelFeatures = null
        this.tunnel.abortAll(`edge link closed (${reason})`)
      },
      onRefused: (error) => {
        void this.cancel(`${error.summary}: ${error.message}`).then(() => this.#resolveRefused(error))
      },
      log: options.log,
      ...(options.backoff ? { backoff: options.backoff } : {}),
    })
    this.tunnel = new TunnelClient({
      upstreamUrl: options.upstreamUrl,
      port: {
        send: (message) => this.connection.send(message),
        flushed: (signal) => this.connection.flushed(signal),
        saturated: () => this.connection.saturated(),
        sendParts: (frame, rest) => this.connection.sendParts(frame, rest),
        features: () => this.#tunnelFeatures,
      },
      log: options.log,
      onEngineError: () => this.#watchEngine(),
    })
  }

  get model(): string | null {
    return this.#model
  }

  get draining(): boolean {
    return this.#draining
  }

  /** Sessions held, with the status the edge knows them by. */
  held(): { session_id: string; status: HeldStatus }[] {
    const held = this.pipeline.held()
    const ids = new Set(held.map((entry) => entry.session_id))
    for (const [sessionId, entry] of this.#outbox) if (!ids.has(sessionId)) held.push({ session_id: sessionId, status: entry.status })
    return held
  }

  get unreported(): number {
    return this.#outbox.size
  }

  async start(): Promise<void> {
    if (this.options.upstreamUrl && (!this.#model || this.#window === null))
      await this.#discover(this.options.upstreamUrl, this.options.log)
    this.connection.start()
    if (this.options.upstreamUrl && !this.#model) void this.#awaitModel(this.options.upstreamUrl)
    const refreshMs = this.options.upstreamRefreshMs ?? 60_000
    if (this.options.upstreamUrl && refreshMs > 0) {
      this.#refreshTimer = setInterval(() => void this.#refreshUpstream(), refreshMs)
      this.#refreshTimer.unref()
    }
  }

  /**
   * Read the engine's model and window again (not from the cache) and, when they differ from what the edge was
   * told, tell it: a restarted engine may serve another window (`--max-model-len`), and the edge lowers output
   * budgets to the window the runner announced. Values given on the command line stay. Returns whether the
   * engine answered. Only once the model is known (`#awaitModel` covers an engine that was never up).
   */
  async #refreshUpstream(): Promise<boolean> {
    const upstreamUrl = this.options.upstreamUrl
    if (!upstreamUrl || this.#stopped || this.#model === null) return true
    const served = await discoverEngine(upstreamUrl, () => {}, { fresh: true })
    if (served.id === null || this.#stopped) return false
    const model = this.options.servedModel ?? served.id
    const window = this.options.maxModelLen ?? served.maxModelLen
    if (model === this.#model && window === this.#window) return true
    this.options.log('upstream.changed', {
      url: upstreamUrl,
      model,
      max_model_len: window,
      was: { model: this.#model, max_model_len: this.#window },
    })
    this.#model = model
    this.#window = window
    this.#announce()
    return true
  }

  /**
   * Tell the edge the engine as it is now, in a heartbeat, if the live connection was told otherwise. A heartbeat,
   * not a second register: an assignment in flight is then never taken for lost. Not registered now: the next
   * connection's register frame carries it.
   */
  #announce(): void {
    const upstream = this.#upstream()
    if (!upstream || !this.connection.registered) return
    const told = JSON.stringify(upstream)
    if (told === this.#announced) return
    if (this.connection.send({ ...this.#heartbeatFrame(), upstream })) this.#announced = told
  }

  /** An engine call failed without an answer: ask the engine until it answers again, then take what it serves. */
  #watchEngine(): void {
    if (this.#engineWatch || this.#model === null) return
    const everyMs = this.options.modelRetryMs ?? 5_000
    this.#engineWatch = (async () => {
      while (!this.#stopped && !(await this.#refreshUpstream())) {
        await new Promise((resolve) => setTimeout(resolve, everyMs).unref())
      }
    })().finally(() => {
      this.#engineWatch = null
    })
  }

  /**
   * The engine was not up at start (vLLM can take minutes to load): keep asking it, and once it answers, tell
   * the edge in a heartbeat (`upstream`) so it starts sending sessions that need it.
   */
  async #awaitModel(upstreamUrl: string): Promise<void> {
    const everyMs = this.options.modelRetryMs ?? 5_000
    while (!this.#stopped && !this.#model) {
      await new Promise((resolve) => setTimeout(resolve, everyMs).unref())
      if (this.#stopped) return
      await this.#discover(upstreamUrl, () => {})
    }
    if (!this.#model || this.#stopped) return
    this.options.log('upstream.discovered', { url: upstreamUrl, model: this.#model, max_model_len: this.#window })
    this.#announce()
  }

  async #discover(upstreamUrl: string, log: RunnerAgentOptions['log']): Promise<void> {
    const served = await discoverEngine(upstreamUrl, log)
    this.#model ??= served.id
    this.#window ??= served.maxModelLen
  }

  /** Resolves once registered with the edge. */
  registered(): Promise<void> {
    return this.connection.whenRegistered()
  }

  /** Graceful: take nothing new, finish what is held, report it, close "drained". */
  async drain(): Promise<void> {
    if (!this.#draining) {
      this.#draining = true
      this.pipeline.close()
      if (this.connection.send({ type: 'drain' })) this.#drainSentOn = this.#connections
      this.options.log('runner.draining', { held: this.pipeline.size })
    }
    await this.pipeline.idle()
    await this.#outboxEmpty()
    await this.#stop('drained')
  }

  /** Hard: stop every session now; those that reached RUNNING still report partial results. */
  async cancel(reason = 'runner cancelled'): Promise<void> {
    this.#draining = true
    this.options.log('runner.cancelling', { held: this.pipeline.size, reason })
    this.pipeline.shutdown(reason)
    await this.pipeline.idle()
    await Promise.race([this.#outboxEmpty(), new Promise((resolve) => setTimeout(resolve, 5_000))])
    await this.#stop('shutdown')
  }

  async #stop(reason: 'drained' | 'shutdown'): Promise<void> {
    if (this.#stopped) return
    this.#stopped = true
    if (this.#refreshTimer) clearInterval(this.#refreshTimer)
    this.tunnel.abortAll('runner stopping')
    this.tunnel.close()
    await this.connection.close(reason)
    this.options.log('runner.stopped', { reason, unreported: this.#outbox.size })
  }

  /** The connection's one `register` (built when the socket opens). */
  #registerFrame(): RunnerMessageInput {
    const upstream = this.#upstream()
    this.#connections++
    this.#announced = upstream ? JSON.stringify(upstream) : null
    return {
      type: 'register',
      protocol_version: RUNNER_PROTOCOL_VERSION,
      runner_id: this.options.runnerId,
      capacity: this.options.capacity,
      upstream,
      sessions: this.held(),
      labels: this.options.labels ?? {},
      ...(this.options.evaluators ? { evaluators: this.options.evaluators } : {}),
      capabilities: TUNNEL_CLIENT_CAPABILITIES,
    }
  }

  /** The engine as the edge is told about it; null without an engine or before its model is known. */
  #upstream(): Extract<RunnerMessageInput, { type: 'register' }>['upstream'] {
    if (!this.options.upstreamUrl || !this.#model) return null
    return {
      model: this.#model,
      kind: this.options.upstreamKind ?? 'vllm',
      ...(this.#window !== null ? { max_model_len: this.#window } : {}),
    }
  }

  #heartbeatFrame(): Extract<RunnerMessageInput, { type: 'heartbeat' }> {
    return { type: 'heartbeat', metrics: this.pipeline.metrics() }
  }

  #onMessage(message: EdgeMessage | EdgeBodyFrame): void {
    switch (message.type) {
      case 'registered': {
        this.#tunnelFeatures = negotiatedFeatures(message)
        this.options.log('edge.registered', { keep: message.keep.length, drop: message.drop.length, tunnel: message.capabilities ?? [] })
        for (const sessionId of message.drop) {
          this.#outbox.delete(sessionId)
          this.pipeline.cancel(sessionId, 'drop')
        }
        // Once per connection: `drain()` may have told this one already (between its register and this answer).
        if (this.#draining && this.#drainSentOn !== this.#connections && this.connection.send({ type: 'drain' }))
          this.#drainSentOn = this.#connections
        break
      }
      case 'assign': {
        const { session } = message
        if (this.pipeline.has(session.session_id) || this.#outbox.has(session.session_id)) {
          this.connection.send({ type: 'ack', session_id: session.session_id, accepted: true })
          break
        }
        if (this.#draining) {
          this.connection.send({ type: 'ack', session_id: session.session_id, accepted: false, reason: 'runner is draining' })
          break
        }
        const job = jobFromAssignment(session)
        this.#lastStatus.set(session.session_id, 'ASSIGNED')
        const accepted = this.pipeline.submit(job)
        this.connection.send({
          type: 'ack',
          session_id: session.session_id,
          accepted,
          ...(accepted ? {} : { reason: 'runner is shutting down' }),
        })
        this.options.log('session.assigned', { session_id: session.session_id, task_id: session.task_id, harness: session.agent.harness })
        this.connection.beat()
        break
      }
      case 'cancel':
        this.options.log('session.cancel', { session_id: message.session_id, reason: message.reason })
        this.#outbox.delete(message.session_id)
        this.pipeline.cancel(message.session_id, 'cancel', message.reason)
        break
      case 'tunnel.request':
      case 'tunnel.body':
      case 'tunnel.cancel':
        this.tunnel.onMessage(message)
        break
      case 'drained':
        this.#drainedByEdge = true
        this.options.log('edge.drained', { held: this.pipeline.size })
        break
      case 'error':
        this.options.log('edge.error', { message: message.message })
        break
    }
  }

  get drainedByEdge(): boolean {
    return this.#drainedByEdge
  }

  #onStage(job: SessionJob, stage: 'INITIALIZING' | 'READY' | 'RUNNING' | 'POST_RUN'): void {
    this.options.log('session.stage', { session_id: job.id, stage })
    if (stage === 'POST_RUN') {
      this.connection.beat()
      return
    }
    this.#lastStatus.set(job.id, stage)
    this.connection.send({ type: 'session.status', session_id: job.id, status: stage })
    this.connection.beat()
  }

  #onFinished(job: SessionJob, outcome: Outcome): void {
    const status = this.#lastStatus.get(job.id) ?? 'ASSIGNED'
    this.#lastStatus.delete(job.id)
    this.recent.push({
      at: Date.now(),
      sessionId: job.id,
      status: outcome.agentResult?.status ?? 'error',
      reward: outcome.evalResult?.outcome_reward ?? null,
    })
    if (this.recent.length > 1000) this.recent.splice(0, this.recent.length - 1000)
    this.options.log('session.finished', {
      session_id: job.id,
      agent_status: outcome.agentResult?.status ?? null,
      reward: outcome.evalResult?.outcome_reward ?? null,
      error: outcome.error,
      reported: outcome.report,
    })
    if (!outcome.report) {
      this.connection.beat()
      return
    }
    this.#outbox.set(job.id, {
      status,
      message: {
        type: 'session.finished',
        session_id: job.id,
        agent_result: outcome.agentResult,
        eval_result: outcome.evalResult,
        error: outcome.error,
      },
    })
    this.#flushOutbox()
  }

  #outboxWaiters: (() => void)[] = []

  #flushOutbox(): void {
    if (!this.connection.registered) return
    for (const [sessionId, entry] of [...this.#outbox]) {
      // Already handed to this socket (another session finished before its write completed): not twice.
      const connection = this.#connections
      if (this.#writing.get(entry.message) === connection) continue
      this.#writing.set(entry.message, connection)
      void this.connection.sendWritten(entry.message).then((written) => {
        if (this.#writing.get(entry.message) === connection) this.#writing.delete(entry.message)
        if (!written || this.#outbox.get(sessionId) !== entry) return
        this.#outbox.delete(sessionId)
        if (this.#outbox.size === 0) {
          const waiters = this.#outboxWaiters
          this.#outboxWaiters = []
          for (const wake of waiters) wake()
        }
      })
    }
    this.connection.beat()
  }

  #outboxEmpty(): Promise<void> {
    if (this.#outbox.size === 0) return Promise.resolve()
    return new Promise((resolve) => this.#outboxWaiters.push(resolve))
  }
}

/**
 * The engine's served model and context window (`GET /v1/models`, first model; the module the edge uses
 * too); nulls when it cannot be read (logged: without a window the edge cannot lower output budgets).
 */
export async function discoverEngine(
  upstreamUrl: string,
  log: RunnerAgentOptions['log'],
  options: { fresh?: boolean } = {},
): Promise<ServedModel> {
  const served = await discoverServedModel(upstreamUrl, {
    timeoutMs: 10_000,
    ...options,
    onFailure: (reason) => log('upstream.unreachable', { url: upstreamUrl, error: reason }),
  })
  if (served.id !== null && served.maxModelLen === null) log('upstream.no_window', { url: upstreamUrl, model: served.id })
  return served
}
