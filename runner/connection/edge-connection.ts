/**
 * @module
 * The runner's WebSocket to the edge (`GET /runners/connect?runner_id=`, runner protocol v1): connects with
 * the runner token (+ the per-runner secret once enrolled), sends `register` built fresh on every connection
 * (so it lists every session still held), heartbeats at the cadence the edge asks for, and reconnects with
 * jittered exponential backoff after anything but a deliberate close. Incoming frames are validated with the
 * protocol schema and handed to `onMessage`. `send` reports whether the frame was written; `flushed()` gives
 * senders backpressure (it resolves once the socket's buffer is below the high-water mark).
 * Binary tunnel frames (`tunnel.binary`, once the edge accepted it in `registered.capabilities`) are decoded
 * with `tunnel-frames.ts`; a body frame whose payload is bytes is sent as one.
 */
import type { Socket } from 'node:net'
import WebSocket from 'ws'
import { type EdgeMessage, edgeMessageSchema, RUNNER_SECRET_HEADER, type RunnerMessageInput } from '../../src/contract/runner-protocol.ts'
import { decodeEdgeFrame, type EdgeBodyFrame, type RunnerBodyFrame, tunnelFrameParts } from '../../src/contract/tunnel-frames.ts'
import { backoffDelay } from './backoff.ts'
import type { SecretStore } from './secret-store.ts'

/** Heartbeat intervals without any frame or pong from the edge after which the link is declared dead. */
export const LIVENESS_INTERVALS = 3

/**
 * Client frames are masked so that a browser script cannot make its bytes look like HTTP to a proxy in the
 * path (RFC 6455 §10.3). Over TLS (`wss:`) no intermediary sees the bytes, and on loopback there is none:
 * there the runner sends an all-zero mask, which `ws` skips applying — its JavaScript masking loop was the
 * runner's largest cost per tunnelled answer after deflate.
 */
export function unmaskedOk(url: string): boolean {
  const { protocol, hostname } = new URL(url)
  return protocol === 'wss:' || hostname === '127.0.0.1' || hostname === 'localhost' || hostname === '[::1]'
}

export function zeroMask(mask: Uint8Array): void {
  mask.fill(0)
}

/**
 * Connections whose frames carry the all-zero mask and no compression (`unmaskedOk`, `perMessageDeflate: false`):
 * their tunnel frames are written to the socket directly (`sendTunnelFrame`).
 */
const RAW_FRAMED = new WeakSet<WebSocket>()

/** Mark a connection opened with `generateMask: zeroMask` and no permessage-deflate (see `RAW_FRAMED`). */
export function rawFraming(ws: WebSocket): void {
  RAW_FRAMED.add(ws)
}

/** The header of one unfragmented binary client frame of `length` payload bytes, masked with the all-zero key. */
function zeroMaskedHeader(length: number, extra: number): Buffer {
  const ext = length >= 65_536 ? 8 : length > 125 ? 2 : 0
  const header = Buffer.allocUnsafe(2 + ext + 4 + extra)
  header[0] = 0x82 // FIN, binary
  if (ext === 0) header[1] = 0x80 | length
  else if (ext === 2) {
    header[1] = 0x80 | 126
    header.writeUInt16BE(length, 2)
  } else {
    header[1] = 0x80 | 127
    header.writeUInt32BE(Math.floor(length / 2 ** 32), 2)
    header.writeUInt32BE(length >>> 0, 6)
  }
  header.writeUInt32BE(0, 2 + ext) // the masking key: all zero, so the payload goes as it is
  return header
}

/**
 * Send a body-carrying tunnel frame as one binary WebSocket message, without joining the body into a copy
 * (the copy and its garbage were a fifth of the runner's CPU per 54 KB call). `rest`: more body bytes that
 * follow the frame's own body in the same message (an answer that arrived in several chunks goes out without
 * joining them).
 * On a `rawFraming` connection the message is one WebSocket frame written straight to the socket: the frame
 * header and the tunnel header in one buffer, then the body parts, corked into one write (ws frames nothing
 * here; its sender writes at once when it does not compress, so the order of messages holds). Elsewhere
 * (a masked connection) it goes through ws as fragments of one message — header, then each body part — all
 * in the same tick and one write. Either way the receiver sees one message, as the protocol says.
 */
export function sendTunnelFrame(ws: WebSocket, frame: RunnerBodyFrame, rest: readonly Uint8Array[] = []): void {
  const [head, body] = tunnelFrameParts(frame)
  const parts = [body, ...rest].filter((part) => part.byteLength > 0)
  // `_socket` is ws's underlying net.Socket (not typed; absent before the connection opened).
  const socket = (ws as unknown as { _socket?: Socket })._socket
  if (socket && RAW_FRAMED.has(ws) && ws.readyState === WebSocket.OPEN) {
    let length = head.byteLength
    for (const part of parts) length += part.byteLength
    const first = zeroMaskedHeader(length, head.byteLength)
    first.set(head, first.byteLength - head.byteLength)
    if (parts.length === 0) {
      socket.write(first)
      return
    }
    socket.cork()
    socket.write(first)
    for (const part of parts) socket.write(part)
    socket.uncork()
    return
  }
  if (parts.length === 0) {
    ws.send(head, { binary: true })
    return
  }
  // Corked: the fragments leave in one write (one wake-up of the edge, not several).
  socket?.cork()
  try {
    ws.send(head, { binary: true, fin: false })
    for (let i = 0; i < parts.length; i++) ws.send(parts[i] as Uint8Array, { binary: true, fin: i === parts.length - 1 })
  } finally {
    socket?.uncork()
  }
}

/** Bytes queued in the socket above which senders wait (tunnel responses). */
export const HIGH_WATER_BYTES = 4 * 1024 * 1024

/**
 * An answer at connect that no later try can get past without someone acting, so the connection stops (the
 * CLI prints `summary (message); fix` and exits 3): the runner token refused (401/403); the runner link asking
 * for this id's per-runner secret (a stale one sent, or none: its file lost; only an admin's
 * `DELETE /rollout/runners/<id>/credential` or another `--runner-id` gets past it); or an answer that is not a
 * Rollgate edge's (404, a 2xx/3xx or other 4xx instead of the WebSocket upgrade: `--edge` points at the engine
 * or another server). Network errors, 5xx, 408, 409, 425 and 429 are retried (an edge deploying or restarting).
 */
export class ConnectRefusedError extends Error {
  readonly status: number
  /** What happened, in words (`the edge refused this runner`). */
  readonly summary: string
  /** What the operator should do. */
  readonly fix: string
  constructor(status: number, message: string, summary = 'the edge refused this runner', fix = TOKEN_FIX) {
    super(message)
    this.name = 'ConnectRefusedError'
    this.status = status
    this.summary = summary
    this.fix = fix
  }
}

const TOKEN_FIX = "check --token / ROLLGATE_RUNNER_TOKEN against the edge's ROLLGATE_RUNNER_TOKEN"

/** Statuses at connect a later try can get past with nobody acting: a server error, a timeout, a race, a rate limit. */
export function transientConnectStatus(status: number): boolean {
  return status >= 500 || status === 408 || status === 409 || status === 425 || status === 429
}

/** A 401 from the runner's own link object (its per-runner secret was wrong), not from the token check. */
function secretRefusal(body: string): boolean {
  try {
    return (JSON.parse(body) as { error?: { type?: unknown } }).error?.type === 'runner_hub_error'
  } catch {
    return false
  }
}

/**
 * How the answer `status` / `body` to the upgrade ends this try: an `Error` (retried) or a
 * `ConnectRefusedError` (stops). `secretPath`: the per-runner secret file, `secretHeld`: whether one was sent.
 */
export function connectFailure(
  status: number,
  body: string,
  context: { edgeUrl: string; runnerId: string; secretPath: string; secretHeld: boolean },
): Error {
  const message = `HTTP ${status}: ${body.slice(0, 500)}`
  if (status === 401 && secretRefusal(body)) {
    const reset = `an admin can DELETE /rollout/runners/${context.runnerId}/credential on the edge, then restart the runner to enrol again`
    return context.secretHeld
      ? new ConnectRefusedError(
          status,
          message,
          `the edge rejected the per-runner secret in ${context.secretPath}`,
          `another host may have enrolled runner id ${context.runnerId}: use another --runner-id, or ${reset}`,
        )
      : new ConnectRefusedError(
          status,
          message,
          `runner id ${context.runnerId} is enrolled but no per-runner secret is at ${context.secretPath}`,
          `restore that file (or --state-dir), use another --runner-id, or ${reset}`,
        )
  }
  if (status === 401 || status === 403) return new ConnectRefusedError(status, message)
  if (transientConnectStatus(status)) return new Error(message)
  return new ConnectRefusedError(
    status,
    message,
    `${context.edgeUrl} is not a Rollgate edge (no WebSocket upgrade at /runners/connect)`,
    "--edge / ROLLGATE_EDGE_URL must be the Rollgate edge's base URL (the Worker: http://127.0.0.1:8787 under npm run dev, or its https://… deployment), not the engine or another server",
  )
}

export interface EdgeConnectionOptions {
  edgeUrl: string
  token: string
  runnerId: string
  secrets: SecretStore
  /** The `register` frame for this connection (called on every connect). */
  register(): RunnerMessageInput
  /** Stage metrics for heartbeats. */
  heartbeat(): RunnerMessageInput
  onMessage(message: EdgeMessage | EdgeBodyFrame): void
  /** After `registered` was processed (keep/drop applied by onMessage first). */
  onRegistered?(): void
  onDisconnected?(reason: string): void
  /** The edge refused the credentials (`ConnectRefusedError`): the connection has stopped for good. */
  onRefused?(error: ConnectRefusedError): void
  log(event: string, fields?: Record<string, unknown>): void
  backoff?: { baseMs: number; maxMs: number }
}

export class EdgeConnection {
  readonly options: EdgeConnectionOptions
  #ws: WebSocket | null = null
  #registered = false
  #closing = false
  #attempt = 0
  #heartbeat: ReturnType<typeof setInterval> | null = null
  #retryTimer: ReturnType<typeof setTimeout> | null = null
  #retryWake: (() => void) | null = null
  #registeredWaiters: (() => void)[] = []
  /** Last sign of life from the edge (a frame or a pong). */
  #lastHeard = 0
  /** The edge's reconnect grace (from `registered`): retries come at least every third of it. */
  #graceMs: number | null = null
  readonly stats = { connects: 0, failedConnects: 0, heartbeats: 0, framesIn: 0, framesOut: 0 }

  constructor(options: EdgeConnectionOptions) {
    this.options = options
  }

  get registered(): boolean {
    return this.#registered && this.#ws?.readyState === WebSocket.OPEN
  }

  get bufferedAmount(): number {
    return this.#ws?.bufferedAmount ?? 0
  }

  /** Connect in the background, forever (until `close`). */
  start(): void {
    void this.#loop()
  }

  /** Resolves once registered (now or after the next successful connection). */
  whenRegistered(): Promise<void> {
    if (this.registered) return Promise.resolve()
    return new Promise((resolve) => this.#registeredWaiters.push(resolve))
  }

  /** Send a frame if the socket is open; false otherwise (the caller keeps what must not be lost). */
  send(message: RunnerMessageInput | RunnerBodyFrame): boolean {
    const ws = this.#ws
    if (!ws || ws.readyState !== WebSocket.OPEN) return false
    try {
      const binary =
        (message.type === 'tunnel.head' && message.body instanceof Uint8Array) ||
        (message.type === 'tunnel.chunk' && message.data instanceof Uint8Array)
      if (binary) sendTunnelFrame(ws, message as RunnerBodyFrame)
      else ws.send(JSON.stringify(message))
      this.stats.framesOut++
      return true
    } catch {
      return false
    }
  }

  /** A binary body frame whose body continues with `rest` (sent as one message, not joined). */
  sendParts(frame: RunnerBodyFrame, rest: readonly Uint8Array[]): boolean {
    const ws = this.#ws
    if (!ws || ws.readyState !== WebSocket.OPEN) return false
    try {
      sendTunnelFrame(ws, frame, rest)
      this.stats.framesOut++
      return true
    } catch {
      return false
    }
  }

  /** Send and resolve once the frame has been written to the socket (false if it could not be). */
  sendWritten(message: RunnerMessageInput): Promise<boolean> {
    const ws = this.#ws
    if (!ws || ws.readyState !== WebSocket.OPEN) return Promise.resolve(false)
    return new Promise((resolve) => {
      try {
        ws.send(JSON.stringify(message), (error) => resolve(!error))
        this.stats.framesOut++
      } catch {
        resolve(false)
      }
    })
  }

  /** Whether the socket holds more than `HIGH_WATER_BYTES` unsent. */
  saturated(): boolean {
    const ws = this.#ws
    return ws?.readyState === WebSocket.OPEN && ws.bufferedAmount > HIGH_WATER_BYTES
  }

  /** Backpressure: wait while the socket holds more than `HIGH_WATER_BYTES` unsent (or until it closes). */
  async flushed(signal?: AbortSignal): Promise<void> {
    while (this.#ws?.readyState === WebSocket.OPEN && this.#ws.bufferedAmount > HIGH_WATER_BYTES && !signal?.aborted) {
      await new Promise((resolve) => setTimeout(resolve, 5))
    }
  }

  /** Deliberate close (`shutdown` or `drained`: the edge treats it as final). No reconnect afterwards. */
  async close(reason: 'shutdown' | 'drained'): Promise<void> {
    this.#closing = true
    this.#stopHeartbeat()
    if (this.#retryTimer) clearTimeout(this.#retryTimer)
    this.#retryWake?.()
    const ws = this.#ws
    if (!ws || ws.readyState === WebSocket.CLOSED) return
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        ws.terminate()
        resolve()
      }, 3_000)
      ws.once('close', () => {
        clearTimeout(timer)
        resolve()
      })
      if (ws.readyState === WebSocket.CONNECTING) ws.terminate()
      else ws.close(1000, reason)
    })
  }

  async #loop(): Promise<void> {
    while (!this.#closing) {
      let closed: Promise<string>
      try {
        ;({ closed } = await this.#open())
        this.#attempt = 0
      } catch (error) {
        this.stats.failedConnects++
        if (error instanceof ConnectRefusedError) {
          this.#closing = true
          this.options.log('edge.refused', { status: error.status, error: error.message })
          this.options.onRefused?.(error)
          return
        }
        this.options.log('edge.connect_failed', { error: (error as Error).message, attempt: this.#attempt })
        await this.#sleep(this.#retryDelay())
        continue
      }
      const reason = await closed
      this.#registered = false
      this.#stopHeartbeat()
      this.options.onDisconnected?.(reason)
      if (this.#closing) return
      this.options.log('edge.disconnected', { reason })
      await this.#sleep(this.#retryDelay())
    }
  }

  /**
   * Jittered exponential backoff, capped at a third of the edge's grace once the edge has told it: a live
   * runner then tries at least three times within any grace period, however long the edge took to restart
   * (the edge counts the grace from its restart), so it never loses its sessions to the backoff.
   */
  #retryDelay(): number {
    const { baseMs, maxMs } = this.options.backoff ?? { baseMs: 250, maxMs: 15_000 }
    const cap = this.#graceMs === null ? maxMs : Math.max(1, Math.min(maxMs, Math.floor(this.#graceMs / 3)))
    return backoffDelay(this.#attempt++, { baseMs: Math.min(baseMs, cap), maxMs: cap })
  }

  #sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      this.#retryWake = () => resolve()
      this.#retryTimer = setTimeout(resolve, ms)
    })
  }

  /** Open one connection; resolves (with a promise of its close reason) once the socket is open. */
  #open(): Promise<{ closed: Promise<string> }> {
    const { edgeUrl, runnerId, token, secrets } = this.options
    const url = `${edgeUrl.replace(/^http/, 'ws').replace(/\/$/, '')}/runners/connect?runner_id=${encodeURIComponent(runnerId)}`
    const secret = secrets.read()
    const ws = new WebSocket(url, {
      headers: { authorization: `Bearer ${token}`, ...(secret ? { [RUNNER_SECRET_HEADER]: secret } : {}) },
      handshakeTimeout: 15_000,
      maxPayload: 8 * 1024 * 1024,
      // No permessage-deflate: compressing every tunnel frame cost more CPU on both ends (and latency) than
      // the whole rest of the tunnel (bench:tunnel: ~6 ms per 54 KB request on this side alone).
      perMessageDeflate: false,
      ...(unmaskedOk(url) ? { generateMask: zeroMask } : {}),
    })
    if (unmaskedOk(url)) rawFraming(ws)
    this.#ws = ws
    return new Promise((resolve, reject) => {
      ws.once('unexpected-response', (request, response) => {
        let body = ''
        response.on('data', (chunk: Buffer) => {
          if (body.length < 2_000) body += chunk.toString()
        })
        response.on('end', () => {
          request.destroy()
          const status = response.statusCode ?? 0
          reject(connectFailure(status, body, { edgeUrl, runnerId, secretPath: secrets.path, secretHeld: secret !== null }))
        })
      })
      ws.once('error', (error) => reject(error))
      ws.once('open', () => {
        this.stats.connects++
        const closed = new Promise<string>((resolveClose) => {
          ws.on('close', (code, reason) => resolveClose(`${code} ${reason.toString()}`.trim()))
        })
        ws.on('error', (error) => this.options.log('edge.socket_error', { error: error.message }))
        this.#lastHeard = Date.now()
        ws.on('pong', () => {
          this.#lastHeard = Date.now()
        })
        ws.on('message', (data, isBinary) => {
          this.#lastHeard = Date.now()
          if (isBinary) this.#onBinary(data as Buffer)
          else this.#onFrame(String(data))
        })
        this.send(this.options.register())
        resolve({ closed })
      })
    })
  }

  #onBinary(data: Buffer): void {
    this.stats.framesIn++
    let frame: EdgeBodyFrame
    try {
      frame = decodeEdgeFrame(data)
    } catch (error) {
      this.options.log('edge.bad_frame', { error: (error as Error).message, bytes: data.length })
      return
    }
    this.options.onMessage(frame)
  }

  #onFrame(text: string): void {
    this.stats.framesIn++
    let message: EdgeMessage
    try {
      message = edgeMessageSchema.parse(JSON.parse(text))
    } catch (error) {
      this.options.log('edge.bad_frame', { error: (error as Error).message, frame: text.slice(0, 200) })
      return
    }
    if (message.type === 'registered') {
      if (message.runner_secret) {
        this.options.secrets.write(message.runner_secret)
        this.options.log('edge.enrolled', { secret_file: this.options.secrets.path })
        // Kept durably (the write fsyncs): confirm it on this connection, closing the window in which the
        // shared token alone could enrol this id again.
        if (message.confirm_secret) this.send({ type: 'secret.kept', runner_secret: message.runner_secret })
      }
      this.#registered = true
      if (message.reconnect_grace_ms !== undefined) this.#graceMs = message.reconnect_grace_ms
      this.#startHeartbeat(message.heartbeat_interval_ms)
    }
    this.options.onMessage(message)
    if (message.type === 'registered') {
      this.options.onRegistered?.()
      const waiters = this.#registeredWaiters
      this.#registeredWaiters = []
      for (const wake of waiters) wake()
    }
  }

  /** Send a heartbeat now (e.g. right after a stage change, so dispatch sees fresh metrics). */
  beat(): void {
    if (!this.registered) return
    this.stats.heartbeats++
    this.send(this.options.heartbeat())
  }

  #startHeartbeat(intervalMs: number): void {
    this.#stopHeartbeat()
    this.beat()
    const every = Math.max(100, intervalMs)
    this.#heartbeat = setInterval(() => {
      // A half-open link (no FIN, no RST) would otherwise look alive forever: ping, and give up on silence.
      const ws = this.#ws
      if (ws && ws.readyState === WebSocket.OPEN && Date.now() - this.#lastHeard > LIVENESS_INTERVALS * every) {
        this.options.log('edge.silent', { silent_ms: Date.now() - this.#lastHeard })
        ws.terminate()
        return
      }
      ws?.ping()
      this.beat()
    }, every)
  }

  #stopHeartbeat(): void {
    if (this.#heartbeat) clearInterval(this.#heartbeat)
    this.#heartbeat = null
  }
}
