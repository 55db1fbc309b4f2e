/**
 * @module
 * The runner hub Durable Object (one per deployment): runners' WebSockets (hibernation API), the
 * dispatch table, the inference tunnel and the event stream. A thin shell: registry and dispatch
 * logic live in `HubCoordinator` / `RunnerRegistry`, the tunnel in `TunnelRequests`, events in
 * `EventBus`.
 *
 * Internal routes (reached through `stub.fetch` from the Worker, which authenticates first):
 * `GET /connect?runner_id=` (WebSocket upgrade), `ANY /tunnel/<runner_id>/<engine path>`, `GET /events`.
 *
 * Runner identity (`runner-credentials.ts`): the Worker checks the shared runner token; this object
 * checks the per-runner secret before accepting a socket or touching a live one. An enrolled id
 * without the right secret → 401 (the live connection stays); an id connected but not enrolled yet →
 * 409; an id with no credential → accepted, and its registration mints the secret.
 */
import { logError } from '../../contract/log.ts'
import { DurableObject } from 'cloudflare:workers'
import type { RolloutEvent, RolloutStatus } from '../../contract/rollout.ts'
import {
  type EdgeMessage,
  RUNNER_CLOSE,
  RUNNER_SECRET_HEADER,
  type RunnerMessage,
  runnerMessageSchema,
} from '../../contract/runner-protocol.ts'
import type { TaskStatusValue } from '../../contract/trajectory.ts'
import { exceedsJsonDepth, jsonDepthMessage } from '../../normalize/json-depth.ts'
import { createSessionToken } from '../../contract/session-token.ts'
import { Sql } from '../session/sql.ts'
import type { DispatchTicket } from './dispatch-types.ts'
import { DEFAULT_STREAM_MS, EventBus, MAX_STREAM_MS } from './event-bus.ts'
import { EventLog } from './event-log.ts'
import { HEALTH_FACTOR, HubCoordinator, type SessionHubPort } from './hub-coordinator.ts'
import { RunnerCredentials } from './runner-credentials.ts'
import { RunnerRegistry } from './runner-registry.ts'
import { TUNNEL_TIMEOUT_HEADER, TunnelRequests } from './tunnel.ts'

/** Polar's default heartbeat is 30 s; runners here are expected to be chattier. */
export const DEFAULT_RUNNER_HEARTBEAT_MS = 10_000
/** Default deadline of a tunnelled request (Polar's inference read timeout). */
export const DEFAULT_TUNNEL_TIMEOUT_MS = 900_000
/** A rollout session token outlives its session budget by this much (seconds). */
const ROLLOUT_TOKEN_MARGIN_S = 600
const RUNNER_ID = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$/

interface Attachment {
  runner_id: string
  registered: boolean
  /** Accepted without a secret (the id had none): the registration mints one. */
  enrolling?: boolean
}

export interface RunnerHubRpc {
  enqueue(ticket: DispatchTicket): Promise<{ queued: boolean }>
  sessionEnded(sessionId: string, status: string): Promise<void>
  publish(event: RolloutEvent): Promise<void>
  taskState(taskId: string, status: TaskStatusValue): Promise<void>
  status(): Promise<RolloutStatus>
  drain(runnerId: string): Promise<boolean>
  forgetCredential(runnerId: string): Promise<boolean>
  fetch(request: Request): Promise<Response>
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
  readonly #tunnel: TunnelRequests
  /** Control messages of one runner are handled in order (tunnel frames bypass this). */
  readonly #chains = new Map<string, Promise<void>>()

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env)
    const heartbeatIntervalMs = positiveInt(env.ROLLGATE_RUNNER_HEARTBEAT_MS, DEFAULT_RUNNER_HEARTBEAT_MS)
    const signingKey = env.ROLLGATE_SIGNING_KEY || env.ROLLGATE_ADMIN_TOKEN || ''
    this.#tunnel = new TunnelRequests((runnerId, message) => this.#send(runnerId, message))
    const sql = new Sql(ctx.storage.sql)
    const registry = new RunnerRegistry(sql)
    this.#bus = new EventBus({ store: new EventLog(sql) })
    this.#credentials = new RunnerCredentials(sql)
    this.#coordinator = new HubCoordinator({
      registry,
      credentials: this.#credentials,
      bus: this.#bus,
      session: (sessionId) => env.SESSIONS.get(env.SESSIONS.idFromName(sessionId)) as unknown as SessionHubPort,
      send: (runnerId, message) => this.#send(runnerId, message),
      close: (runnerId, code, reason) => this.#close(runnerId, code, reason),
      connected: (runnerId) => this.#sockets(runnerId).length > 0,
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

  drain(runnerId: string): Promise<boolean> {
    return this.#coordinator.drain(runnerId)
  }

  /** Admin: forget a runner's credential so the id can enrol again (false: it had none). */
  forgetCredential(runnerId: string): boolean {
    return this.#credentials.forget(runnerId)
  }

  async alarm(): Promise<void> {
    await this.#coordinator.alarm()
  }

  // --- HTTP (from the Worker) ---

  async fetch(request: Request): Promise<Response> {
    const url = new URL(request.url)
    if (url.pathname === '/connect') return this.#connect(request, url)
    if (url.pathname.startsWith('/tunnel/')) return this.#tunnelRequest(request, url)
    if (url.pathname === '/events') return this.#events(request, url)
    return jsonError(404, `no hub route ${url.pathname}`)
  }

  async #connect(request: Request, url: URL): Promise<Response> {
    if (request.headers.get('upgrade')?.toLowerCase() !== 'websocket') return jsonError(426, 'expected a WebSocket upgrade')
    const runnerId = url.searchParams.get('runner_id') ?? ''
    if (!RUNNER_ID.test(runnerId)) return jsonError(400, 'runner_id must match ^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$')
    // Identity first: nothing below (closing a live socket) may happen for a caller that is not this runner.
    const verdict = await this.#credentials.check(runnerId, request.headers.get(RUNNER_SECRET_HEADER))
    if (verdict === 'invalid') {
      return jsonError(401, `runner ${runnerId} is enrolled: send its per-runner secret in the ${RUNNER_SECRET_HEADER} header`)
    }
    const live = this.#sockets(runnerId)
    if (verdict === 'none' && live.length) {
      return jsonError(409, `runner ${runnerId} is connected but not enrolled yet: retry once that connection has registered or closed`)
    }
    // A new connection replaces an old one of the same runner (reconnect after a network blip).
    for (const old of live) {
      try {
        old.close(RUNNER_CLOSE.replaced, 'replaced by a new connection')
      } catch {
        // already closing
      }
    }
    const pair = new WebSocketPair()
    const [client, server] = [pair[0], pair[1]]
    this.ctx.acceptWebSocket(server, [runnerId])
    server.serializeAttachment({ runner_id: runnerId, registered: false, enrolling: verdict === 'none' } satisfies Attachment)
    return new Response(null, { status: 101, webSocket: client })
  }

  async #tunnelRequest(request: Request, url: URL): Promise<Response> {
    const rest = url.pathname.slice('/tunnel/'.length)
    const slash = rest.indexOf('/')
    if (slash <= 0) return jsonError(400, 'expected /tunnel/<runner_id>/<path>')
    const runnerId = decodeURIComponent(rest.slice(0, slash))
    const timeoutMs = positiveInt(request.headers.get(TUNNEL_TIMEOUT_HEADER) ?? undefined, DEFAULT_TUNNEL_TIMEOUT_MS)
    const body = request.method === 'GET' || request.method === 'HEAD' ? '' : await request.text()
    try {
      return await this.#tunnel.open(runnerId, {
        method: request.method,
        path: `${rest.slice(slash)}${url.search}`,
        headers: request.headers,
        body,
        timeoutMs,
        signal: request.signal,
      })
    } catch (error) {
      const message = (error as Error).message
      return jsonError(/within \d+ ms/.test(message) ? 504 : 502, message)
    }
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

  // --- WebSocket (hibernation API) ---

  async webSocketMessage(ws: WebSocket, data: string | ArrayBuffer): Promise<void> {
    const attachment = ws.deserializeAttachment() as Attachment | null
    if (!attachment) return
    const runnerId = attachment.runner_id
    let message: RunnerMessage
    try {
      if (typeof data !== 'string') throw new Error('binary frames are not part of protocol v1')
      const raw: unknown = JSON.parse(data)
      if (exceedsJsonDepth(raw)) throw new Error(jsonDepthMessage())
      const parsed = runnerMessageSchema.safeParse(raw)
      if (!parsed.success)
        throw new Error(
          `invalid message: ${parsed.error.issues[0]?.message ?? 'unknown'} at ${parsed.error.issues[0]?.path.join('.') ?? ''}`,
        )
      message = parsed.data
    } catch (error) {
      this.#sendTo(ws, { type: 'error', message: (error as Error).message })
      return
    }
    if (message.type === 'tunnel.head' || message.type === 'tunnel.chunk' || message.type === 'tunnel.error') {
      this.#tunnel.onMessage(runnerId, message)
      return
    }
    await this.#inOrder(runnerId, `message ${message.type}`, async () => {
      const current = (ws.deserializeAttachment() as Attachment | null) ?? attachment
      const enrolling = current.enrolling === true
      const { registered } = await this.#coordinator.onMessage(runnerId, message, current.registered, enrolling)
      // A registration that enrolled the id consumed the enrolment (the secret was minted and sent once).
      const stillEnrolling = enrolling && !(message.type === 'register' && registered)
      if (registered !== current.registered || stillEnrolling !== enrolling) {
        try {
          ws.serializeAttachment({ runner_id: runnerId, registered, enrolling: stillEnrolling } satisfies Attachment)
        } catch {
          // socket closed meanwhile
        }
      }
    })
  }

  /** Run `work` after everything already queued for this runner (messages, then its disconnect). */
  async #inOrder(runnerId: string, label: string, work: () => Promise<void>): Promise<void> {
    const previous = this.#chains.get(runnerId) ?? Promise.resolve()
    const settled = previous.then(work).catch((error) => logError('runner hub:', runnerId, label, error))
    this.#chains.set(runnerId, settled)
    await settled
    if (this.#chains.get(runnerId) === settled) this.#chains.delete(runnerId)
  }

  async webSocketClose(ws: WebSocket, code: number, reason: string, _wasClean: boolean): Promise<void> {
    // 1005 / 1006 are not valid codes to send back (workerd throws); answer with 1000.
    try {
      ws.close(code === 1005 || code === 1006 ? RUNNER_CLOSE.normal : code, 'closed')
    } catch {
      // already closed
    }
    await this.#disconnected(ws, code, reason)
  }

  async webSocketError(ws: WebSocket, error: unknown): Promise<void> {
    await this.#disconnected(ws, 1006, `socket error: ${String(error)}`)
  }

  async #disconnected(ws: WebSocket, code: number, reason: string): Promise<void> {
    const attachment = ws.deserializeAttachment() as Attachment | null
    if (!attachment) return
    const runnerId = attachment.runner_id
    // Replaced by a newer connection: that one carries on.
    if (this.#sockets(runnerId).some((other) => other !== ws)) return
    this.#tunnel.failRunner(runnerId, `socket closed (${code})`)
    // A runner that says goodbye (1000 "shutdown" / "drained") is gone for good; anything else may reconnect.
    const final = code === RUNNER_CLOSE.normal && (reason === 'shutdown' || reason === 'drained')
    await this.#inOrder(runnerId, 'disconnect', async () => {
      const current = (ws.deserializeAttachment() as Attachment | null) ?? attachment
      if (!current.registered) return
      await this.#coordinator.onDisconnect(runnerId, final, final ? `runner closed (${reason})` : `connection lost (${code})`)
    })
  }

  #sockets(runnerId: string): WebSocket[] {
    return this.ctx.getWebSockets(runnerId).filter((ws) => ws.readyState === WebSocket.OPEN)
  }

  #send(runnerId: string, message: EdgeMessage): boolean {
    const ws = this.#sockets(runnerId)[0]
    return ws ? this.#sendTo(ws, message) : false
  }

  #sendTo(ws: WebSocket, message: EdgeMessage): boolean {
    try {
      ws.send(JSON.stringify(message))
      return true
    } catch {
      return false
    }
  }

  #close(runnerId: string, code: number, reason: string): void {
    for (const ws of this.#sockets(runnerId)) {
      try {
        ws.close(code, reason)
      } catch {
        // already closed
      }
    }
  }
}
