/**
 * @module
 * Runner registry and dispatch logic of the runner hub, as a plain class (the Durable Object shell
 * owns the WebSockets and injects `send` / `close`).
 *
 * - `register` / `heartbeat` / `drain` keep the registry; a reconnecting runner lists the sessions it
 *   still holds, so none is re-dispatched or lost across an edge restart.
 * - Queued sessions go to the runner with the lowest Polar pressure score (`dispatch-score.ts`); the
 *   runner must `ack` within `ACK_TIMEOUT_MS`, else the session is re-queued.
 * - A runner lost before RUNNING gets its sessions re-dispatched; a runner lost during RUNNING ends
 *   them with the partial trajectory (the SessionObject builds it from its durable log).
 */
import { logError } from '../../contract/log.ts'
import type { RolloutEvent, RolloutStatus, RunnerEntry, RunnerList } from '../../contract/rollout.ts'
import {
  type EdgeMessage,
  RUNNER_CLOSE,
  RUNNER_PROTOCOL_VERSION,
  type RunnerMessage,
  type RunnerSessionStatus,
  type SessionAssignment,
} from '../../contract/runner-protocol.ts'
import type { EvalResult, TaskStatusValue } from '../../contract/trajectory.ts'
import type { AgentResult } from '../../contract/runner-protocol.ts'
import type { LifecycleOutcome, RunnerUpstream } from '../session/session-lifecycle.ts'
import { pickRunner } from './dispatch-score.ts'
import type { DispatchTicket } from './dispatch-types.ts'
import type { EventBus } from './event-bus.ts'
import type { RunnerCredentials } from './runner-credentials.ts'
import { type HubSession, OCCUPYING, type RunnerRegistry, type RunnerRow } from './runner-registry.ts'

/** A runner must acknowledge an assignment within this long. */
export const ACK_TIMEOUT_MS = 15_000
/** Sessions examined per dispatch round. */
const DISPATCH_BATCH = 256
/** Polar: healthy = heartbeat within 2.5 intervals. */
export const HEALTH_FACTOR = 2.5
/** Upper bound on dispatch rounds per pump (each round assigns at least one session). */
const MAX_PUMP_ROUNDS = 64

export interface SessionHubPort {
  assignRunner(runnerId: string, upstream: RunnerUpstream | null): Promise<LifecycleOutcome>
  runnerReport(runnerId: string, status: RunnerSessionStatus): Promise<LifecycleOutcome>
  runnerFinished(
    runnerId: string,
    agentResult: AgentResult | null,
    evalResult: EvalResult | null,
    error: string | null,
  ): Promise<LifecycleOutcome>
  runnerLost(runnerId: string, reason: string): Promise<LifecycleOutcome & { requeued?: boolean }>
}

export interface HubDeps {
  registry: RunnerRegistry
  /** Per-runner secrets: the registration that enrols a runner id mints one. */
  credentials: RunnerCredentials
  bus: EventBus
  session(sessionId: string): SessionHubPort
  /** `connection`: deliver only on that connection of the runner (an assignment), never on a later one. */
  send(runnerId: string, message: EdgeMessage, connection?: string | null): boolean
  close(runnerId: string, code: number, reason: string): void
  /** Whether a socket for this runner is open right now. */
  connected(runnerId: string): boolean
  sessionToken(sessionId: string, timeoutSeconds: number): Promise<string>
  heartbeatIntervalMs: number
  /** How long a disconnected or silent runner keeps its sessions. */
  graceMs: number
  now(): number
  setAlarm(at: number | null): Promise<void>
}

export class HubCoordinator {
  readonly #deps: HubDeps
  #pumping: Promise<void> | null = null
  #pumpAgain = false

  constructor(deps: HubDeps) {
    this.#deps = deps
  }

  // --- from tasks and sessions (RPC) ---

  async enqueue(ticket: DispatchTicket): Promise<{ queued: boolean }> {
    const queued = this.#deps.registry.enqueue(ticket, this.#deps.now())
    await this.pump()
    return { queued }
  }

  /** A session reached a terminal status at the edge: free its slot; tell its runner to stop if it still runs it. */
  async sessionEnded(sessionId: string, status: string): Promise<void> {
    const { registry } = this.#deps
    const row = registry.session(sessionId)
    if (!row) return
    if (row.runner_id && OCCUPYING.includes(row.state)) {
      this.#deps.send(row.runner_id, { type: 'cancel', session_id: sessionId, reason: `session ${status}` })
    }
    registry.remove(sessionId)
    if (row.runner_id) this.#maybeDrained(row.runner_id)
    await this.pump()
  }

  publish(event: RolloutEvent): void {
    this.#deps.bus.publish(event)
  }

  taskState(taskId: string, status: TaskStatusValue): void {
    this.#deps.registry.taskState(taskId, status, this.#deps.now())
  }

  status(): RolloutStatus {
    const { registry } = this.#deps
    const counts = registry.counts()
    return {
      tasks: registry.tasks(),
      pipeline: { pending_sessions: counts.queued, assigned_sessions: counts.assigned },
      nodes: { nodes: registry.runners().map((runner) => registry.info(runner, this.#healthy(runner), this.#deps.heartbeatIntervalMs)) },
    }
  }

  /**
   * The registry as an operator reads it (`GET /rollout/runners`): every registered runner, and every id not
   * registered now that has a credential or an admin drain (`absent`), sorted by id.
   */
  runners(): RunnerList {
    const { registry, credentials } = this.#deps
    const cordons = registry.cordons()
    const enrolled = credentials.list()
    const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString())
    const entries = new Map<string, RunnerEntry>()
    for (const runner of registry.runners()) {
      const healthy = this.#healthy(runner)
      const cordoned = cordons.has(runner.runner_id)
      const { capacity, metrics } = runner
      entries.set(runner.runner_id, {
        runner_id: runner.runner_id,
        state: runner.connected ? 'connected' : 'disconnected',
        accepting: healthy && !runner.draining && !cordoned,
        healthy,
        draining: runner.draining,
        cordoned,
        cordoned_at: iso(cordons.get(runner.runner_id) ?? null),
        credential: enrolled.get(runner.runner_id) ?? 'none',
        slots: {
          init: { inflight: metrics.init_inflight, max: capacity.max_init_workers, queued: metrics.init_queue_depth },
          ready: { depth: metrics.ready_depth, max: capacity.ready_buffer },
          run: { inflight: metrics.run_inflight, max: capacity.max_run_workers },
          postrun: { inflight: metrics.postrun_inflight, max: capacity.max_postrun_workers, queued: metrics.postrun_queue_depth },
        },
        sessions: registry.occupying(runner.runner_id),
        reservations: runner.reservations,
        connection: { id: runner.connection, last_heartbeat: iso(runner.last_seen), disconnected_at: iso(runner.disconnected_at) },
        upstream: runner.upstream,
      })
    }
    for (const runnerId of new Set([...cordons.keys(), ...enrolled.keys()])) {
      if (entries.has(runnerId)) continue
      entries.set(runnerId, {
        runner_id: runnerId,
        state: 'absent',
        accepting: false,
        healthy: false,
        draining: false,
        cordoned: cordons.has(runnerId),
        cordoned_at: iso(cordons.get(runnerId) ?? null),
        credential: enrolled.get(runnerId) ?? 'none',
        slots: null,
        sessions: 0,
        reservations: 0,
        connection: { id: null, last_heartbeat: null, disconnected_at: null },
        upstream: null,
      })
    }
    return { runners: [...entries.values()].sort((a, b) => (a.runner_id < b.runner_id ? -1 : a.runner_id > b.runner_id ? 1 : 0)) }
  }

  /**
   * Admin drain (Polar `DELETE /nodes/{id}`), a cordon: no new session for this runner id, across its
   * reconnects and a restart of its process, until `resume`. What it holds runs to its end.
   *
   * Only an id this edge knows: registered now, or enrolled (a credential: it registered once, and may be
   * away, restarting or declared lost; the cordon then holds from its next registration on). An id never
   * seen is `false` (the route's 404): a mistyped id must not answer "draining" while the runner meant
   * keeps taking work, nor leave a cordon behind that no runner will ever meet.
   */
  async drain(runnerId: string): Promise<boolean> {
    const { registry, credentials } = this.#deps
    if (!registry.runner(runnerId) && !credentials.has(runnerId) && !registry.cordons().has(runnerId)) return false
    this.#deps.registry.cordon(runnerId, this.#deps.now())
    this.#event({ type: 'runner.draining', runner_id: runnerId, at: this.#iso() })
    this.#maybeDrained(runnerId)
    return true
  }

  /**
   * Undo an admin drain. A runner that drains itself (SIGTERM) stays draining. `null`: an id never seen (as
   * for `drain`: neither registered, enrolled nor drained by an admin); else whether the runner still drains
   * (its own drain).
   */
  async resume(runnerId: string): Promise<{ draining: boolean } | null> {
    const { registry, credentials } = this.#deps
    const had = registry.uncordon(runnerId)
    if (had) this.#event({ type: 'runner.resumed', runner_id: runnerId, at: this.#iso() })
    const runner = registry.runner(runnerId)
    if (!runner) return had || credentials.has(runnerId) ? { draining: false } : null
    if (had) await this.pump()
    return { draining: runner.draining }
  }

  /** A runner's link accepted a new socket (`connection`: the link's id for it), before that socket's register. */
  linkOpened(runnerId: string, connection: string): void {
    this.#deps.registry.setConnection(runnerId, connection)
  }

  // --- from runners ---

  /**
   * One control message of a runner's connection. `enrolling`: the connection was accepted without a
   * per-runner secret because the id had none; its successful registration mints one.
   */
  async onMessage(
    runnerId: string,
    message: RunnerMessage,
    registered: boolean,
    enrolling = false,
    connection: string | null = null,
  ): Promise<{ registered: boolean }> {
    const { registry } = this.#deps
    if (message.type === 'register') return { registered: await this.#register(runnerId, message, registered, enrolling, connection) }
    if (!registered) {
      this.#deps.send(runnerId, { type: 'error', message: 'send register first' })
      this.#deps.close(runnerId, RUNNER_CLOSE.protocol, 'not registered')
      return { registered: false }
    }
    registry.touch(runnerId, this.#deps.now())
    switch (message.type) {
      case 'heartbeat':
        registry.heartbeat(runnerId, message.metrics, this.#deps.now())
        if (message.upstream) registry.setUpstream(runnerId, message.upstream)
        // Not awaited: the runner's link forwards its messages in order, so awaiting a dispatch loop that is busy
        // (e.g. a large submit being enqueued) would hold this runner's acks behind it until their deadline passed.
        this.#kick()
        break
      case 'ack':
        await this.#ack(runnerId, message.session_id, message.accepted, message.reason)
        break
      case 'session.status':
        await this.#status(runnerId, message.session_id, message.status)
        break
      case 'session.finished':
        await this.#finished(runnerId, message)
        break
      case 'secret.kept':
        // The runner wrote its new secret durably: confirmed now (as a connection presenting it would), so the
        // shared token alone can no longer enrol this id again. A secret that is not this id's confirms nothing.
        if ((await this.#deps.credentials.check(runnerId, message.runner_secret)) !== 'valid')
          this.#deps.send(runnerId, { type: 'error', message: "secret.kept: not this runner id's secret" })
        break
      case 'drain':
        // The runner's own drain (SIGTERM): its alone, said again on each connection.
        registry.setDraining(runnerId)
        this.#event({ type: 'runner.draining', runner_id: runnerId, at: this.#iso() })
        this.#maybeDrained(runnerId)
        break
      default:
        break
    }
    return { registered: true }
  }

  /** The socket closed or errored. A clean close by the runner is final; otherwise the runner has `graceMs` to come back. */
  async onDisconnect(runnerId: string, final: boolean, reason: string): Promise<void> {
    const runner = this.#deps.registry.runner(runnerId)
    if (!runner) return
    if (final) {
      await this.runnerLost(runnerId, reason)
      return
    }
    this.#deps.registry.markDisconnected(runnerId, this.#deps.now())
    await this.#schedule()
  }

  /** End of a runner: re-dispatch what had not started, end what was running (partial trajectories). */
  async runnerLost(runnerId: string, reason: string): Promise<void> {
    const { registry } = this.#deps
    if (!registry.runner(runnerId)) return
    registry.removeRunner(runnerId)
    this.#deps.close(runnerId, RUNNER_CLOSE.lost, reason)
    this.#event({ type: 'runner.lost', runner_id: runnerId, reason, at: this.#iso() })
    for (const row of registry.sessionsOf(runnerId)) await this.#sessionLost(row, runnerId, reason)
    await this.pump()
  }

  /** Periodic checks: silent or long-disconnected runners, unacknowledged assignments, the queue. */
  async alarm(): Promise<void> {
    const { registry } = this.#deps
    // What was due by the time this alarm was armed for is due now (alarms never fire early in production, but a
    // test may run one early). Clamp with the stored arming time, never with a deadline re-derived from the
    // current state: after a restart that state has just started a fresh grace period (recoverAfterRestart),
    // and an overdue alarm from before the restart must not end that grace the instant it starts.
    const now = Math.max(this.#deps.now(), registry.armedAlarm() ?? 0)
    for (const runner of registry.runners()) {
      if (!this.#healthy(runner) && now - this.#lastSign(runner) >= this.#deps.graceMs) {
        await this.runnerLost(runner.runner_id, runner.connected ? 'heartbeat timeout' : 'did not reconnect')
      }
    }
    for (const row of registry.unacknowledged(now - ACK_TIMEOUT_MS)) {
      if (!row.runner_id) continue
      this.#deps.send(row.runner_id, { type: 'cancel', session_id: row.session_id, reason: 'not acknowledged in time' })
      await this.#sessionLost(row, row.runner_id, 'assignment not acknowledged in time')
    }
    await this.pump()
    await this.#schedule()
  }

  /**
   * After a restart every runner's grace starts now. A runner whose socket is known gone (also one whose
   * socket closed before the edge went down: its old disconnect time would otherwise count the edge's own
   * downtime against the runner, and a slow restart would end the grace before it could reconnect) is
   * marked disconnected as of now. One whose socket may still be open (sockets live in the runners' links,
   * which may outlive this object or may have restarted with it) gets its silence clock restarted, so it
   * has a full grace period to heartbeat, or to reconnect and register again.
   */
  recoverAfterRestart(): void {
    const now = this.#deps.now()
    for (const runner of this.#deps.registry.runners()) {
      if (this.#deps.connected(runner.runner_id)) this.#deps.registry.touch(runner.runner_id, now)
      else this.#deps.registry.restartGrace(runner.runner_id, now)
    }
  }

  /** Assign queued sessions while some runner can take them. Serialized; re-runs if asked meanwhile. */
  pump(): Promise<void> {
    if (this.#pumping) {
      this.#pumpAgain = true
      return this.#pumping
    }
    this.#pumping = (async () => {
      try {
        for (let round = 0; round < MAX_PUMP_ROUNDS; round++) {
          this.#pumpAgain = false
          const assigned = await this.#dispatchRound()
          if (!assigned && !this.#pumpAgain) break
        }
        await this.#schedule()
      } finally {
        this.#pumping = null
      }
    })()
    return this.#pumping
  }

  /** Start (or extend) a pump without waiting for it. */
  #kick(): void {
    this.pump().catch((error: unknown) => logError('runner hub: dispatch failed:', error))
  }

  async #dispatchRound(): Promise<number> {
    const { registry } = this.#deps
    const queued = registry.queued(DISPATCH_BATCH)
    if (!queued.length) return 0
    const runners = registry.runners().filter((runner) => runner.connected && this.#deps.connected(runner.runner_id))
    if (!runners.length) return 0
    let assigned = 0
    for (const row of queued) {
      const able = row.ticket.route === 'runner' ? runners.filter((runner) => runner.upstream !== null) : runners
      const loads = able.map((runner) => registry.load(registry.runner(runner.runner_id) ?? runner, this.#healthy(runner)))
      const choice = pickRunner(loads)
      if (!choice) continue
      const runner = runners.find((candidate) => candidate.runner_id === choice.runner_id) as RunnerRow
      if (await this.#assign(row, runner)) assigned++
    }
    return assigned
  }

  async #assign(row: HubSession, runner: RunnerRow): Promise<boolean> {
    const { registry } = this.#deps
    const now = this.#deps.now()
    // Reserve the slot before the await so a concurrent round does not over-assign.
    registry.assign(row.session_id, runner.runner_id, now)
    registry.reserve(runner.runner_id)
    const outcome = await this.#deps
      .session(row.session_id)
      .assignRunner(runner.runner_id, runner.upstream)
      .catch((error: unknown) => ({ ok: false as const, status: null, reason: String(error) }))
    const current = registry.session(row.session_id)
    if (!current || current.runner_id !== runner.runner_id) return false
    if (!outcome.ok) {
      if (outcome.status === 'REGISTERED') registry.requeue(row.session_id)
      else registry.remove(row.session_id) // ended meanwhile (cancelled, timed out) or gone
      return false
    }
    const route = outcome.route ?? 'direct'
    const assignment = await this.#assignment(row.ticket, route)
    // Moved meanwhile (e.g. the acknowledgement deadline passed during the awaits and it was re-queued): send nothing.
    const sending = registry.session(row.session_id)
    if (sending?.runner_id !== runner.runner_id || sending.state !== 'assigned') return false
    // Sent on the runner's current connection only: a register on a later one then knows it never went there.
    const connection = registry.runner(runner.runner_id)?.connection ?? null
    if (!this.#deps.send(runner.runner_id, { type: 'assign', session: assignment }, connection)) {
      await this.#sessionLost(sending, runner.runner_id, 'runner socket closed during assignment')
      return false
    }
    // The runner's acknowledgement deadline runs from now, not from the reservation: the awaits above (the
    // session's answer on a loaded edge) are the edge's time, not the runner's.
    registry.sentAt(row.session_id, this.#deps.now(), connection)
    return true
  }

  async #assignment(ticket: DispatchTicket, route: 'runner' | 'direct'): Promise<SessionAssignment> {
    const token = await this.#deps.sessionToken(ticket.session_id, ticket.spec.timeout_seconds)
    const origin = ticket.public_url.replace(/\/+$/, '')
    const base_urls = { openai: `${origin}/v1`, anthropic: origin, google: origin }
    // Polar §8, API keys = the per-session token (never the session id).
    const env: Record<string, string> = {
      ANTHROPIC_BASE_URL: base_urls.anthropic,
      ANTHROPIC_API_KEY: token,
      OPENAI_BASE_URL: base_urls.openai,
      OPENAI_API_KEY: token,
      GOOGLE_API_URL: base_urls.google,
      GOOGLE_API_KEY: token,
      SESSION_ID: ticket.session_id,
      TASK_ID: ticket.task_id,
      SESSION_DIR: '/polar/session',
      ARTIFACTS_DIR: '/polar/session/artifacts',
      LOGS_DIR: '/polar/session/logs',
      AGENT_LOG_DIR: '/polar/session/logs/agent',
    }
    return { ...ticket.spec, token, base_urls, env, route }
  }

  async #register(
    runnerId: string,
    message: Extract<RunnerMessage, { type: 'register' }>,
    registered: boolean,
    enrolling: boolean,
    connection: string | null,
  ): Promise<boolean> {
    const { registry } = this.#deps
    if (message.protocol_version !== RUNNER_PROTOCOL_VERSION) {
      this.#deps.send(runnerId, {
        type: 'error',
        message: `protocol_version ${message.protocol_version} unsupported; this edge speaks ${RUNNER_PROTOCOL_VERSION}`,
      })
      this.#deps.close(runnerId, RUNNER_CLOSE.protocol, 'unsupported protocol version')
      return false
    }
    if (message.runner_id !== runnerId) {
      this.#deps.send(runnerId, { type: 'error', message: 'register.runner_id must match the connect URL' })
      this.#deps.close(runnerId, RUNNER_CLOSE.protocol, 'runner id mismatch')
      return false
    }
    if (registered && registry.runner(runnerId)) return this.#reregister(runnerId, message)
    // Enrolment: mint the runner's secret now that the registration is valid (sent once, below).
    const runnerSecret = enrolling ? await this.#deps.credentials.mint(runnerId, this.#deps.now()) : undefined
    registry.upsertRunner(
      runnerId,
      message.capacity,
      message.upstream,
      message.labels,
      this.#deps.now(),
      message.evaluators ?? null,
      connection,
    )
    const reported = new Map(message.sessions.map((entry) => [entry.session_id, entry.status]))
    const keep: string[] = []
    const drop: string[] = []
    for (const row of registry.sessionsOf(runnerId)) {
      const status = reported.get(row.session_id)
      reported.delete(row.session_id)
      if (status === undefined) {
        // Sent on this very connection and not acknowledged: on its way (sent after the link accepted this socket,
        // before its register reached the edge, which had not seen the old link die), not lost. Its
        // acknowledgement, or its deadline (`alarm`: cancelled and dispatched again), settles it. Sent on an
        // earlier connection: the link delivers an assignment only on the connection it was sent for, so it
        // never reached this one: lost (below). Not known (not sent yet, or an older link): waits.
        if (row.state === 'assigned' && (row.connection === null || connection === null || row.connection === connection)) continue
        // The edge thinks this runner has it; the runner does not: lost.
        await this.#sessionLost(row, runnerId, 'runner no longer holds the session after reconnecting')
        continue
      }
      keep.push(row.session_id)
      if (status !== 'ASSIGNED') await this.#status(runnerId, row.session_id, status)
      else if (row.state === 'assigned') registry.setState(row.session_id, 'acked')
    }
    for (const sessionId of reported.keys()) drop.push(sessionId)
    this.#registered(runnerId, keep, drop, runnerSecret)
    this.#event({ type: 'runner.registered', runner_id: runnerId, at: this.#iso() })
    // An admin drain holds across connections: the runner hears again that it gets nothing new.
    this.#maybeDrained(runnerId)
    await this.pump()
    return true
  }

  /**
   * A second `register` on a connection that is registered already (runners before protocol `heartbeat.upstream`
   * sent one once their engine came up): only an update of what the runner offers (capacity, engine, labels,
   * evaluators). Its session list was taken at one instant on the runner, and an assignment the edge sent on
   * this connection may still be on its way there: nothing is lost, kept or dropped by it (a session the edge
   * ended was sent a cancel), and draining, reservations and acknowledgement deadlines stay as they are.
   */
  async #reregister(runnerId: string, message: Extract<RunnerMessage, { type: 'register' }>): Promise<boolean> {
    const { registry } = this.#deps
    registry.updateRunner(runnerId, message.capacity, message.upstream, message.labels, this.#deps.now(), message.evaluators ?? null)
    const held = new Set(registry.sessionsOf(runnerId).map((row) => row.session_id))
    const keep = message.sessions.flatMap((entry) => (held.has(entry.session_id) ? [entry.session_id] : []))
    this.#registered(runnerId, keep, [])
    // It may serve a model now, or take more: queued sessions may fit.
    this.#kick()
    return true
  }

  /** The edge's answer to a `register`: which listed sessions the runner keeps and drops, and its secret once. */
  #registered(runnerId: string, keep: string[], drop: string[], runnerSecret?: string): void {
    this.#deps.send(runnerId, {
      type: 'registered',
      protocol_version: RUNNER_PROTOCOL_VERSION,
      runner_id: runnerId,
      heartbeat_interval_ms: this.#deps.heartbeatIntervalMs,
      reconnect_grace_ms: this.#deps.graceMs,
      keep,
      drop,
      ...(runnerSecret === undefined ? {} : { runner_secret: runnerSecret, confirm_secret: true }),
    })
  }

  async #ack(runnerId: string, sessionId: string, accepted: boolean, reason: string | null): Promise<void> {
    const { registry } = this.#deps
    const row = registry.session(sessionId)
    if (!row || row.runner_id !== runnerId) {
      this.#deps.send(runnerId, { type: 'cancel', session_id: sessionId, reason: 'not assigned to this runner' })
      return
    }
    if (accepted) {
      if (row.state === 'assigned') registry.setState(sessionId, 'acked')
      return
    }
    await this.#sessionLost(row, runnerId, `runner refused: ${reason ?? 'no reason'}`)
    await this.pump()
  }

  async #status(runnerId: string, sessionId: string, status: RunnerSessionStatus): Promise<void> {
    const { registry } = this.#deps
    const row = registry.session(sessionId)
    if (!row || row.runner_id !== runnerId) {
      this.#deps.send(runnerId, { type: 'cancel', session_id: sessionId, reason: 'not assigned to this runner' })
      return
    }
    const outcome = await this.#deps.session(sessionId).runnerReport(runnerId, status)
    if (outcome.ok) registry.setState(sessionId, status)
    else if (outcome.status !== status) this.#deps.send(runnerId, { type: 'cancel', session_id: sessionId, reason: outcome.reason })
  }

  async #finished(runnerId: string, message: Extract<RunnerMessage, { type: 'session.finished' }>): Promise<void> {
    const { registry } = this.#deps
    const row = registry.session(message.session_id)
    if (!row || row.runner_id !== runnerId) return
    await this.#deps.session(message.session_id).runnerFinished(runnerId, message.agent_result, message.eval_result, message.error)
    // The runner is done with it either way: the slot is free; the session concludes at the edge.
    registry.release(message.session_id)
    this.#maybeDrained(runnerId)
    await this.pump()
  }

  async #sessionLost(row: HubSession, runnerId: string, reason: string): Promise<void> {
    const { registry } = this.#deps
    const outcome = await this.#deps
      .session(row.session_id)
      .runnerLost(runnerId, reason)
      .catch((error: unknown) => ({ ok: false as const, status: null, reason: String(error) }))
    // Compare-and-set: act only if the row still belongs to this runner (another path may have moved it meanwhile).
    const current = registry.session(row.session_id)
    if (!current || current.runner_id !== runnerId) return
    if (outcome.ok && 'requeued' in outcome && outcome.requeued) registry.requeue(row.session_id)
    else if (outcome.ok) registry.release(row.session_id)
    else if (outcome.status === 'REGISTERED') registry.requeue(row.session_id)
    else registry.remove(row.session_id)
  }

  #maybeDrained(runnerId: string): void {
    const runner = this.#deps.registry.runner(runnerId)
    if ((runner?.draining || runner?.cordoned) && this.#deps.registry.occupying(runnerId) === 0)
      this.#deps.send(runnerId, { type: 'drained' })
  }

  #healthy(runner: RunnerRow): boolean {
    return (
      runner.connected &&
      this.#deps.connected(runner.runner_id) &&
      this.#deps.now() - runner.last_seen < this.#deps.heartbeatIntervalMs * HEALTH_FACTOR
    )
  }

  #lastSign(runner: RunnerRow): number {
    return runner.connected ? runner.last_seen : Math.max(runner.disconnected_at ?? runner.last_seen, runner.last_seen)
  }

  async #schedule(): Promise<void> {
    const at = this.#nextAlarmAt()
    this.#deps.registry.setArmedAlarm(at)
    await this.#deps.setAlarm(at)
  }

  /** Earliest health check (last sign of life + grace) or acknowledgement deadline. */
  #nextAlarmAt(): number | null {
    const { registry } = this.#deps
    const candidates: number[] = []
    for (const runner of registry.runners()) {
      candidates.push(this.#lastSign(runner) + Math.max(this.#deps.graceMs, this.#deps.heartbeatIntervalMs * HEALTH_FACTOR))
    }
    for (const row of registry.unacknowledged(Number.MAX_SAFE_INTEGER))
      if (row.assigned_at !== null) candidates.push(row.assigned_at + ACK_TIMEOUT_MS)
    return candidates.length ? Math.min(...candidates) : null
  }

  #event(event: RolloutEvent): void {
    this.#deps.bus.publish(event)
  }

  #iso(): string {
    return new Date(this.#deps.now()).toISOString()
  }
}
