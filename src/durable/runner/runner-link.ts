/**
 * @module
 * One runner's link Durable Object (one per runner id, named by it): the runner's WebSocket
 * (hibernation API) and the inference tunnel over it. Tunnelled calls come straight from the Worker
 * to this object, so inference traffic of different runners never shares an object; the runner hub
 * keeps only the registry, dispatch and events. A thin shell over `TunnelRequests` and the hub's RPC.
 *
 * Control messages (register, heartbeat, ack, status, finished, drain) are forwarded to the hub in
 * order (`RunnerHub.linkMessage`), and so is the socket's end (`linkClosed`); the hub's messages to the
 * runner (registered, assign, cancel, drained, closes) come back through `deliver`. Tunnel frames never
 * leave this object.
 *
 * Internal routes (reached through `stub.fetch` from the Worker, which checks the shared runner token
 * first): `GET /connect?runner_id=` (WebSocket upgrade) and `ANY /tunnel/<runner_id>/<engine path>` (a
 * one-frame answer comes back whole, a longer one streamed; a tunnel failure is a JSON answer whose
 * `error.code` names it).
 * Runner identity (`runner-credentials.ts`, kept by the hub): the per-runner secret is checked before a
 * socket is accepted or a live one touched. Enrolled id without the right secret → 401 (the live
 * connection stays); connected but not enrolled yet → 409; no credential, or one minted but never
 * presented (pending) and no secret sent → accepted, and its registration mints the secret.
 */
import { DurableObject } from 'cloudflare:workers'
import { logError } from '../../contract/log.ts'
import {
  type EdgeMessage,
  RUNNER_CLOSE,
  RUNNER_SECRET_HEADER,
  type RunnerMessage,
  runnerMessageSchema,
  TUNNEL_CAPABILITY,
  TUNNEL_WINDOW_BYTES,
} from '../../contract/runner-protocol.ts'
import { decodeRunnerFrame, type EdgeBodyFrame, encodeTunnelFrame } from '../../contract/tunnel-frames.ts'
import { exceedsJsonDepth, jsonDepthMessage } from '../../normalize/json-depth.ts'
import type { LinkDelivery } from './link-outbox.ts'
import { RUNNER_HUB_NAME, RUNNER_ID, RUNNER_ID_MESSAGE } from './names.ts'
import type { RunnerHubLinkRpc } from './runner-hub.ts'
import { TUNNEL_TIMEOUT_HEADER, type TunnelAnswer, type TunnelFeatures, TunnelRequests, type TunnelStats, tunnelError } from './tunnel.ts'

/** Default deadline of a tunnelled request (Polar's inference read timeout). */
export const DEFAULT_TUNNEL_TIMEOUT_MS = 900_000

interface Attachment {
  runner_id: string
  registered: boolean
  /** Accepted without a secret (the id had none, or only a pending one): the registration mints one. */
  enrolling?: boolean
  /** This link's id for the socket (a new one per accepted connection); the hub addresses assignments with it. */
  connection?: string
  /** Optional tunnel features accepted from the runner's last `register` (absent: plain v1). */
  capabilities?: string[]
}

/** The optional tunnel features this edge speaks, from a runner's `register.capabilities`. */
export function acceptCapabilities(asked: readonly string[] | undefined): string[] {
  const binary = asked?.includes(TUNNEL_CAPABILITY.binary) === true
  // Credits count binary frames' body bytes: accepted only together with binary frames.
  const credit = binary && asked?.includes(TUNNEL_CAPABILITY.credit) === true
  return [...(binary ? [TUNNEL_CAPABILITY.binary] : []), ...(credit ? [TUNNEL_CAPABILITY.credit] : [])]
}

function featuresOf(capabilities: readonly string[] | undefined): TunnelFeatures {
  return {
    binary: capabilities?.includes(TUNNEL_CAPABILITY.binary) === true,
    credit: capabilities?.includes(TUNNEL_CAPABILITY.credit) === true,
    windowBytes: TUNNEL_WINDOW_BYTES,
  }
}

/** What one link served (the 8-runner test checks no link serves two runners). */
export interface LinkStats {
  object_id: string
  /** Runner ids whose tunnelled calls this object carried, with their counts. */
  tunnelled: Record<string, number>
  /** Flow-control counters of the tunnel. */
  tunnel: TunnelStats
}

export interface RunnerLinkRpc {
  deliver(items: LinkDelivery[]): Promise<boolean>
  stats(): Promise<LinkStats>
  fetch(request: Request): Promise<Response>
}

function positiveInt(value: string | undefined | null, fallback: number): number {
  const parsed = value ? Number(value) : Number.NaN
  return Number.isInteger(parsed) && parsed > 0 ? parsed : fallback
}

function answerResponse(answer: TunnelAnswer): Response {
  return new Response(answer.body, { status: answer.status, headers: answer.headers })
}

function jsonError(status: number, message: string): Response {
  return Response.json({ error: { message, type: 'runner_hub_error', code: status } }, { status })
}

export class RunnerLink extends DurableObject<Env> {
  readonly #tunnel: TunnelRequests
  readonly #tunnelled = new Map<string, number>()
  readonly #attachments = new WeakMap<WebSocket, Attachment>()
  /** The open socket (cached: every tunnel frame needs it; after hibernation it is looked up again). */
  #socket: WebSocket | null = null
  /** Control messages and the disconnect reach the hub in order (tunnel frames bypass this). */
  #chain: Promise<void> = Promise.resolve()

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env)
    this.#tunnel = new TunnelRequests({
      features: (runnerId) => this.#tunnelFeatures(runnerId),
      send: (runnerId, message) => this.#send(runnerId, message),
    })
  }

  #hub(): RunnerHubLinkRpc {
    return this.env.RUNNERS.get(this.env.RUNNERS.idFromName(RUNNER_HUB_NAME)) as unknown as RunnerHubLinkRpc
  }

  // --- RPC (from the hub) ---

  /** The hub's messages and closes for this runner, in order; false when no socket is open. */
  deliver(items: LinkDelivery[]): boolean {
    let delivered = true
    for (const item of items) {
      if ('message' in item) {
        // Addressed to one connection (an assignment): never delivered on another, so a register on a later
        // connection that does not list it knows it was lost (`HubCoordinator#register`).
        const ws =
          item.connection === undefined
            ? this.#sockets()[0]
            : this.#sockets().find((socket) => this.#attachment(socket)?.connection === item.connection)
        delivered = ws ? this.#sendTo(ws, this.#negotiated(ws, item.message)) && delivered : false
      } else {
        for (const ws of this.#sockets()) {
          try {
            ws.close(item.close.code, item.close.reason)
          } catch {
            // already closing
          }
        }
      }
    }
    return delivered
  }

  stats(): LinkStats {
    return { object_id: this.ctx.id.toString(), tunnelled: Object.fromEntries(this.#tunnelled), tunnel: { ...this.#tunnel.stats } }
  }

  // --- HTTP (from the Worker) ---

  async fetch(request: Request): Promise<Response> {
    const url = new URL(request.url)
    if (url.pathname === '/connect') return this.#connect(request, url)
    if (url.pathname.startsWith('/tunnel/')) return this.#tunnelRequest(request, url)
    return jsonError(404, `no runner link route ${url.pathname}`)
  }

  async #connect(request: Request, url: URL): Promise<Response> {
    if (request.headers.get('upgrade')?.toLowerCase() !== 'websocket') return jsonError(426, 'expected a WebSocket upgrade')
    const runnerId = url.searchParams.get('runner_id') ?? ''
    if (!RUNNER_ID.test(runnerId)) return jsonError(400, RUNNER_ID_MESSAGE)
    // Identity first: nothing below (closing a live socket) may happen for a caller that is not this runner.
    const verdict = await this.#hub().checkCredential(runnerId, request.headers.get(RUNNER_SECRET_HEADER))
    if (verdict === 'invalid') {
      return jsonError(401, `runner ${runnerId} is enrolled: send its per-runner secret in the ${RUNNER_SECRET_HEADER} header`)
    }
    // `pending`: minted but never presented (the link dropped, or the runner died, before it kept it): enrol again.
    const enrolling = verdict === 'none' || verdict === 'pending'
    const live = this.#sockets()
    if (enrolling && live.length) {
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
    this.#socket = server
    const connection = crypto.randomUUID()
    this.#setAttachment(server, { runner_id: runnerId, registered: false, enrolling, connection })
    // Before the runner can send anything on it: the hub sends assignments to this connection from now on.
    await this.#inOrder(runnerId, 'open', () => this.#hub().linkOpened(runnerId, connection))
    return new Response(null, { status: 101, webSocket: client })
  }

  async #tunnelRequest(request: Request, url: URL): Promise<Response> {
    const rest = url.pathname.slice('/tunnel/'.length)
    const slash = rest.indexOf('/')
    if (slash <= 0) return jsonError(400, 'expected /tunnel/<runner_id>/<path>')
    const runnerId = decodeURIComponent(rest.slice(0, slash))
    const features = this.#tunnelFeatures(runnerId)
    const bodyless = request.method === 'GET' || request.method === 'HEAD'
    const body = bodyless ? null : features?.binary ? new Uint8Array(await request.arrayBuffer()) : await request.text()
    const headers: Record<string, string> = {}
    request.headers.forEach((value, key) => {
      if (key !== TUNNEL_TIMEOUT_HEADER) headers[key] = value
    })
    const requestId = crypto.randomUUID()
    const signal = request.signal
    if (signal.aborted) return answerResponse(tunnelError('client_disconnected', 'client disconnected'))
    const onAbort = () => this.#tunnel.cancel(requestId, 'client disconnected')
    signal.addEventListener('abort', onAbort)
    this.#tunnelled.set(runnerId, (this.#tunnelled.get(runnerId) ?? 0) + 1)
    const answer = await this.#tunnel.open(runnerId, {
      request_id: requestId,
      method: request.method,
      path: `${rest.slice(slash)}${url.search}`,
      headers,
      body,
      timeout_ms: positiveInt(request.headers.get(TUNNEL_TIMEOUT_HEADER), DEFAULT_TUNNEL_TIMEOUT_MS),
    })
    // A streamed answer keeps the abort wired (the cancel ends the stream); a whole one is done.
    if (!(answer.body instanceof ReadableStream)) signal.removeEventListener('abort', onAbort)
    return answerResponse(answer)
  }

  // --- WebSocket (hibernation API) ---

  async webSocketMessage(ws: WebSocket, data: string | ArrayBuffer): Promise<void> {
    const attachment = this.#attachment(ws)
    if (!attachment) return
    const runnerId = attachment.runner_id
    let message: RunnerMessage
    try {
      if (typeof data !== 'string') {
        if (!featuresOf(attachment.capabilities).binary) throw new Error(`binary frames need the ${TUNNEL_CAPABILITY.binary} capability`)
        this.#tunnel.onMessage(runnerId, decodeRunnerFrame(new Uint8Array(data)))
        return
      }
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
    if (
      message.type === 'tunnel.head' ||
      message.type === 'tunnel.chunk' ||
      message.type === 'tunnel.error' ||
      message.type === 'tunnel.credit'
    ) {
      this.#tunnel.onMessage(runnerId, message)
      return
    }
    if (message.type === 'register') {
      // What the tunnel speaks on this connection is settled before the hub answers `registered`.
      this.#setAttachment(ws, { ...attachment, capabilities: acceptCapabilities(message.capabilities) })
    }
    await this.#inOrder(runnerId, `message ${message.type}`, async () => {
      const current = this.#attachment(ws) ?? attachment
      const enrolling = current.enrolling === true
      const { registered } = await this.#hub().linkMessage(runnerId, message, current.registered, enrolling, current.connection ?? null)
      // A registration that enrolled the id consumed the enrolment (the secret was minted and sent once).
      const stillEnrolling = enrolling && !(message.type === 'register' && registered)
      if (registered !== current.registered || stillEnrolling !== enrolling) {
        this.#setAttachment(ws, { ...current, registered, enrolling: stillEnrolling })
      }
    })
  }

  /** Run `work` after everything already queued for the hub (messages, then the disconnect). */
  async #inOrder(runnerId: string, label: string, work: () => Promise<void>): Promise<void> {
    const settled = this.#chain.then(work).catch((error) => logError('runner link:', runnerId, label, error))
    this.#chain = settled
    await settled
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
    const attachment = this.#attachment(ws)
    if (!attachment) return
    const runnerId = attachment.runner_id
    // Replaced by a newer connection: that one carries on.
    if (this.#sockets().some((other) => other !== ws)) return
    this.#tunnel.failRunner(runnerId, `socket closed (${code})`)
    // At once (the ordered close below waits behind the runner's queued messages): no new work meanwhile.
    if (attachment.registered)
      void this.#hub()
        .linkDown(runnerId)
        .catch((error) => logError('runner link:', runnerId, 'down', error))
    // A runner that says goodbye (1000 "shutdown" / "drained") is gone for good; anything else may reconnect.
    const final = code === RUNNER_CLOSE.normal && (reason === 'shutdown' || reason === 'drained')
    await this.#inOrder(runnerId, 'disconnect', async () => {
      const current = this.#attachment(ws) ?? attachment
      await this.#hub().linkClosed(runnerId, current.registered, final, final ? `runner closed (${reason})` : `connection lost (${code})`)
    })
  }

  #sockets(): WebSocket[] {
    return this.ctx.getWebSockets().filter((ws) => ws.readyState === WebSocket.OPEN)
  }

  /** The open socket of this runner, if any. */
  #tunnelFeatures(runnerId: string): TunnelFeatures | null {
    const ws = this.#socketOf(runnerId)
    return ws ? featuresOf(this.#attachment(ws)?.capabilities) : null
  }

  #socketOf(runnerId: string): WebSocket | null {
    let ws = this.#socket
    if (ws?.readyState !== WebSocket.OPEN) {
      ws = this.#sockets()[0] ?? null
      this.#socket = ws
    }
    return ws && this.#attachment(ws)?.runner_id === runnerId ? ws : null
  }

  /** The socket's attachment (cached: it is read for every tunnel frame; the cache dies with hibernation). */
  #attachment(ws: WebSocket): Attachment | null {
    let attachment = this.#attachments.get(ws)
    if (!attachment) {
      attachment = (ws.deserializeAttachment() as Attachment | null) ?? undefined
      if (attachment) this.#attachments.set(ws, attachment)
    }
    return attachment ?? null
  }

  #setAttachment(ws: WebSocket, attachment: Attachment): void {
    try {
      ws.serializeAttachment(attachment satisfies Attachment)
      this.#attachments.set(ws, attachment)
    } catch {
      // socket closed meanwhile
    }
  }

  /** `registered` tells the runner which tunnel features this connection accepted. */
  #negotiated(ws: WebSocket, message: EdgeMessage): EdgeMessage {
    if (message.type !== 'registered') return message
    const capabilities = this.#attachment(ws)?.capabilities ?? []
    if (capabilities.length === 0) return message
    return {
      ...message,
      capabilities,
      ...(capabilities.includes(TUNNEL_CAPABILITY.credit) ? { tunnel_window_bytes: TUNNEL_WINDOW_BYTES } : {}),
    }
  }

  #send(runnerId: string, message: EdgeMessage | EdgeBodyFrame): boolean {
    const ws = this.#socketOf(runnerId)
    if (!ws) return false
    if (
      (message.type === 'tunnel.request' && typeof message.body !== 'string') ||
      (message.type === 'tunnel.body' && typeof message.data !== 'string')
    ) {
      try {
        ws.send(encodeTunnelFrame(message))
        return true
      } catch {
        return false
      }
    }
    return this.#sendTo(ws, message as EdgeMessage)
  }

  #sendTo(ws: WebSocket, message: EdgeMessage): boolean {
    try {
      ws.send(JSON.stringify(message))
      return true
    } catch {
      return false
    }
  }
}
