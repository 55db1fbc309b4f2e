/**
 * @module
 * The runner hub Durable Object (one per deployment): the runner registry, the dispatch table, runner
 * credentials and the event stream. A thin shell: registry and dispatch logic live in
 * `HubCoordinator` / `RunnerRegistry`, events in `EventBus`. Runners' sockets and the inference tunnel
 * are not here: each runner has its own `RunnerLink` (`runner-link.ts`), which forwards the runner's
 * control messages by RPC (`linkMessage`, `linkClosed`) and receives the hub's through `LinkOutbox`.
 *
 * Internal route (reached through `stub.fetch` from the Worker, which authenticates first): `GET /events`.
 *
 * Runner identity (`runner-credentials.ts`): the link asks `checkCredential` before accepting a socket.
 */
import { DurableObject } from 'cloudflare:workers'
import type { RolloutEvent, RolloutStatus, RunnerList } from '../../contract/rollout.ts'
import type { EdgeMessage, RunnerMessage } from '../../contract/runner-protocol.ts'
import type { TaskStatusValue } from '../../contract/trajectory.ts'
import { createSessionToken } from '../../contract/session-token.ts'
import { Sql } from '../session/sql.ts'
import type { DispatchTicket } from './dispatch-types.ts'
import { DEFAULT_STREAM_MS, EventBus, MAX_STREAM_MS } from './event-bus.ts'
import { EventLog } from './event-log.ts'
import { HEALTH_FACTOR, HubCoordinator, type SessionHubPort } from './hub-coordinator.ts'
import { LinkOutbox, type LinkPort } from './link-outbox.ts'
import { type CredentialCheck, RunnerCredentials } from './runner-credentials.ts'
import { RunnerRegistry } from './runner-registry.ts'

/** Polar's default heartbeat is 30 s; runners here are expected to be chattier. */
export const DEFAULT_RUNNER_HEARTBEAT_MS = 10_000
/** A rollout session token outlives its session budget by this much (seconds). */
const ROLLOUT_TOKEN_MARGIN_S = 600

export interface RunnerHubRpc {
  enqueue(ticket: DispatchTicket): Promise<{ queued: boolean }>
  sessionEnded(sessionId: string, status: string): Promise<void>
  publish(event: RolloutEvent): Promise<void>
  taskState(taskId: string, status: TaskStatusValue): Promise<void>
  status(): Promise<RolloutStatus>
  runners(): Promise<RunnerList>
  drain(runnerId: string): Promise<boolean>
  resume(runnerId: string): Promise<{ draining: boolean } | null>
  forgetCredential(runnerId: string): Promise<boolean>
  fetch(request: Request): Promise<Response>
}

/** What a runner's `RunnerLink` calls. */
export interface RunnerHubLinkRpc {
  checkCredential(runnerId: string, secret: string | null): Promise<CredentialCheck>
  linkOpened(runnerId: string, connection: string): Promise<void>
  linkMessage(
    runnerId: string,
    message: RunnerMessage,
    registered: boolean,
    enrolling: boolean,
    connection?: string | null,
  ): Promise<{ registered: boolean }>
  linkClosed(runnerId: string, registered: boolean, final: boolean, reason: string): Promise<void>
  linkDown(runnerId: string): Promise<void>
}

function positiveInt(value: string | undefined, fallback: number): number {
  const parsed = value ? Number(value) : Number.NaN
  return Number.isInteger(parsed) && parsed > 0 ? parsed : fallback
}

function jsonError(status: number, message: string): Response {
  return Response.json({ error: { message, type: 'runner_hub_error', code: status } }, { status })
}

export class RunnerHub extends DurableObject<Env> {
  readonly #coordinator: HubCoordinator
  readonly #credentials: RunnerCredentials
  readonly #bus: EventBus
  readonly #outbox: LinkOutbox
  readonly #registry: RunnerRegistry
  /**
   * Runners whose socket just ended, before their link's ordered close (`linkClosed`) got here: no
   * dispatch to them meanwhile. In memory only: after a restart the registry alone decides.
   */
  readonly #down = new Set<string>()

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env)
    const heartbeatIntervalMs = positiveInt(env.ROLLGATE_RUNNER_HEARTBEAT_MS, DEFAULT_RUNNER_HEARTBEAT_MS)
    const signingKey = env.ROLLGATE_SIGNING_KEY || env.ROLLGATE_ADMIN_TOKEN || ''
    this.#outbox = new LinkOutbox((runnerId) => env.RUNNER_LINKS.get(env.RUNNER_LINKS.idFromName(runnerId)) as unknown as LinkPort)
    const sql = new Sql(ctx.storage.sql)
    const registry = new RunnerRegistry(sql)
    this.#registry = registry
    this.#bus = new EventBus({ store: new EventLog(sql) })
    this.#credentials = new RunnerCredentials(sql)
    this.#coordinator = new HubCoordinator({
      registry,
      credentials: this.#credentials,
      bus: this.#bus,
      session: (sessionId) => env.SESSIONS.get(env.SESSIONS.idFromName(sessionId)) as unknown as SessionHubPort,
      send: (runnerId, message, connection) => this.#send(runnerId, message, connection),
      close: (runnerId, code, reason) => this.#outbox.post(runnerId, { close: { code, reason } }),
      // The sockets live in the runners' links and survive this object's restarts (hibernation): the
      // registry's row (set by a registration, cleared by the link's close) is the truth.
      connected: (runnerId) => this.#connected(runnerId),
      // A rollout token lives as long as its session may (the session budget, plus a margin), and is refused once it ended.
      sessionToken: (sessionId, timeoutSeconds) =>
        createSessionToken(sessionId, signingKey, { expiresAt: Date.now() + (timeoutSeconds + ROLLOUT_TOKEN_MARGIN_S) * 1000 }),
      heartbeatIntervalMs,
      graceMs: positiveInt(env.ROLLGATE_RUNNER_GRACE_MS, Math.round(heartbeatIntervalMs * HEALTH_FACTOR)),
      now: () => Date.now(),
      setAlarm: async (at) => {
        if (at === null) await ctx.storage.deleteAlarm()
        else await ctx.storage.setAlarm(at)
      },
    })
    this.#coordinator.recoverAfterRestart()
  }

  // --- RPC ---

  enqueue(ticket: DispatchTicket): Promise<{ queued: boolean }> {
    return this.#coordinator.enqueue(ticket)
  }

  sessionEnded(sessionId: string, status: string): Promise<void> {
    return this.#coordinator.sessionEnded(sessionId, status)
  }

  publish(event: RolloutEvent): void {
    this.#coordinator.publish(event)
  }

  taskState(taskId: string, status: TaskStatusValue): void {
    this.#coordinator.taskState(taskId, status)
  }

  status(): RolloutStatus {
    return this.#coordinator.status()
  }

  /** Admin: the registry, cordons and credentials (`GET /rollout/runners`). */
  runners(): RunnerList {
    return this.#coordinator.runners()
  }

  drain(runnerId: string): Promise<boolean> {
    return this.#coordinator.drain(runnerId)
  }

  /** Admin: undo a drain (null: the id is neither registered nor drained). */
  resume(runnerId: string): Promise<{ draining: boolean } | null> {
    return this.#coordinator.resume(runnerId)
  }

  /** Admin: forget a runner's credential so the id can enrol again (false: it had none). */
  forgetCredential(runnerId: string): boolean {
    return this.#credentials.forget(runnerId)
  }

  // --- RPC (from runners' links) ---

  /** Before a link accepts a socket: is `secret` this runner's (`none`: the id has no credential yet)? */
  checkCredential(runnerId: string, secret: string | null): Promise<CredentialCheck> {
    return this.#credentials.check(runnerId, secret)
  }

  /** A runner's link accepted a new socket (`connection`: its id for it); assignments from now on go there. */
  linkOpened(runnerId: string, connection: string): void {
    this.#coordinator.linkOpened(runnerId, connection)
  }

  /** One control message of a runner's connection (`connection`: the link's id for it), in the order its link received them. */
  linkMessage(
    runnerId: string,
    message: RunnerMessage,
    registered: boolean,
    enrolling: boolean,
    connection: string | null = null,
  ): Promise<{ registered: boolean }> {
    if (message.type === 'register') this.#down.delete(runnerId)
    return this.#coordinator.onMessage(runnerId, message, registered, enrolling, connection)
  }

  /** Sent by a link the moment its socket ends, ahead of its queued messages: stop dispatching there. */
  linkDown(runnerId: string): void {
    this.#down.add(runnerId)
  }

  /** The runner's socket ended (`registered`: it had registered); `final`: the runner said goodbye. */
  async linkClosed(runnerId: string, registered: boolean, final: boolean, reason: string): Promise<void> {
    if (!registered) return
    await this.#coordinator.onDisconnect(runnerId, final, reason)
    this.#down.delete(runnerId)
  }

  async alarm(): Promise<void> {
    await this.#coordinator.alarm()
  }

  // --- HTTP (from the Worker) ---

  async fetch(request: Request): Promise<Response> {
    const url = new URL(request.url)
    if (url.pathname === '/events') return this.#events(request, url)
    return jsonError(404, `no hub route ${url.pathname}`)
  }

  #events(request: Request, url: URL): Response {
    const seconds = Number(url.searchParams.get('timeout_seconds') ?? Number.NaN)
    const durationMs = Number.isFinite(seconds) && seconds > 0 ? Math.min(seconds * 1000, MAX_STREAM_MS) : DEFAULT_STREAM_MS
    const types = (url.searchParams.get('types') ?? '').split(',').filter(Boolean)
    return this.#bus.subscribe({
      taskId: url.searchParams.get('task_id'),
      types,
      lastEventId: request.headers.get('last-event-id') ?? url.searchParams.get('last_event_id'),
      durationMs,
      signal: request.signal,
    })
  }

  /** Queue a message for a runner's link; true when the runner is connected (as far as the registry knows). */
  #send(runnerId: string, message: EdgeMessage, connection?: string | null): boolean {
    this.#outbox.post(runnerId, connection ? { message, connection } : { message })
    return this.#connected(runnerId)
  }

  #connected(runnerId: string): boolean {
    return !this.#down.has(runnerId) && this.#registry.runner(runnerId)?.connected === true
  }
}
