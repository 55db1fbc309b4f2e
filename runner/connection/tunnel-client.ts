/**
 * @module
 * The runner's end of the inference tunnel: answers `tunnel.request` (+ `tunnel.body`) frames from the local
 * engine and streams the answer back as `tunnel.head` + `tunnel.chunk` frames (SSE forwarded as it arrives,
 * other bodies coalesced into frames), or `tunnel.error`. `tunnel.cancel` aborts the engine call; a lost
 * connection aborts them all.
 *
 * What the connection negotiated (`TunnelPort.features`, from `registered.capabilities`) decides the framing:
 * plain v1 (JSON text frames of at most `TUNNEL_CHUNK_CHARS`), `tunnel.binary` (bodies as raw bytes in binary
 * frames of at most `TUNNEL_FRAME_BYTES`) and `tunnel.credit` (per-request windows both ways):
 * - request bodies: a body in several frames streams into the engine call as it arrives, and this side grants
 *   the edge credit only as the engine takes the bytes, so at most one window of it is ever buffered here;
 * - answers: at most `windowBytes` of one answer are sent and not yet acknowledged by the edge (which grants as
 *   its reader consumes); a request out of credit waits alone, the others keep flowing.
 * Without credits (a v1 edge) the request body is buffered whole (bounded by `maxBodyChars`) and the engine's
 * answer is read only as fast as the WebSocket drains (`flushed()` before each read).
 *
 * The engine is called with undici's `dispatch` over a keep-alive pool: no `fetch` (its WHATWG streams and
 * their garbage cost this side about twice the CPU per call) and no `node:http` (its parser copies every
 * body chunk, and its request/response objects cost more per call; `npm run bench:tunnel-runner`).
 * Flow control is `src/contract/tunnel-credit.ts`, the same code the edge runs.
 */
import type { Readable } from 'node:stream'
import { type Dispatcher, Pool } from 'undici'
import {
  type EdgeMessage,
  type RunnerMessageInput,
  TUNNEL_CAPABILITY,
  TUNNEL_CHUNK_CHARS,
  TUNNEL_FRAME_BYTES,
  TUNNEL_WINDOW_BYTES,
} from '../../src/contract/runner-protocol.ts'
import { CreditedQueue, CreditWindow } from '../../src/contract/tunnel-credit.ts'
import type { EdgeBodyFrame, Payload, RunnerBodyFrame } from '../../src/contract/tunnel-frames.ts'

/** What this runner's tunnel speaks (sent in `register.capabilities`). */
export const TUNNEL_CLIENT_CAPABILITIES: string[] = [TUNNEL_CAPABILITY.binary, TUNNEL_CAPABILITY.credit]

/** What the edge accepted on this connection (null / absent: plain v1). */
export interface TunnelFeatures {
  binary: boolean
  credit: boolean
  windowBytes: number
}

export interface TunnelPort {
  /** A body frame whose payload is bytes goes out as a binary frame (only sent when `binary` was negotiated). */
  send(message: RunnerMessageInput | RunnerBodyFrame): boolean
  /** Resolves when the link can take more (below its high-water mark). */
  flushed(signal?: AbortSignal): Promise<void>
  /** Whether the link is above its high-water mark now; absent: `flushed` is awaited before every read. */
  saturated?(): boolean
  /**
   * A binary body frame whose body continues with `rest`, sent as one message without joining the parts;
   * absent: the parts are joined first.
   */
  sendParts?(frame: RunnerBodyFrame, rest: readonly Uint8Array[]): boolean
  /** The features negotiated on the current connection; absent or null: plain v1. */
  features?(): TunnelFeatures | null
}

export interface TunnelClientOptions {
  /** Base URL of the local engine; null: this runner serves no model (every request gets `tunnel.error`). */
  upstreamUrl: string | null
  port: TunnelPort
  /** Largest request body accepted (characters, or bytes on a binary link), default 64 Mi. */
  maxBodyChars?: number
  log?(event: string, fields?: Record<string, unknown>): void
  /** An engine call failed without an answer (refused, reset, timed out): the engine may be restarting. */
  onEngineError?(): void
}

type IncomingFrame = EdgeBodyFrame | Extract<EdgeMessage, { type: 'tunnel.cancel' | 'tunnel.credit' }>

interface Call {
  method: string
  path: string
  headers: Record<string, string>
  timeoutMs: number
}

/** A request body still arriving (no credits: buffered whole). */
interface Buffered extends Call {
  kind: 'buffered'
  parts: Payload[]
  size: number
}

/** A request body still arriving (credits): streamed into the engine call. */
interface Streamed {
  kind: 'streamed'
  body: CreditedQueue
}

/**
 * Hop-by-hop and length headers never forwarded (each hop sets its own); the engine is asked for identity
 * encoding. `expect` is a hop's business too (and the HTTP client refuses it).
 */
const DROP_HEADERS = new Set([
  'host',
  'connection',
  'content-length',
  'transfer-encoding',
  'keep-alive',
  'upgrade',
  'accept-encoding',
  'expect',
])
const PLAIN_V1: TunnelFeatures = { binary: false, credit: false, windowBytes: TUNNEL_WINDOW_BYTES }
/** Unread answer bytes held here before the engine connection is paused (the link drains slower than the engine sends). */
const ANSWER_READ_AHEAD_BYTES = 64 * 1024

/** One header value per name (a repeated header, e.g. set-cookie, joined as HTTP allows). */
function flatHeaders(headers: Record<string, string | string[] | undefined>): Record<string, string> {
  const out: Record<string, string> = {}
  for (const key in headers) {
    const value = headers[key]
    if (value === undefined || DROP_HEADERS.has(key)) continue
    out[key] = Array.isArray(value) ? value.join(', ') : value
  }
  return out
}

/** The engine's answer to one call, as undici's dispatch delivers it: its head, then its body read chunk by chunk. */
class EngineAnswer implements Dispatcher.DispatchHandler {
  status = 0
  headers: Record<string, string> = {}
  /** Resolves with the head (status and headers); rejects when the call fails first. */
  readonly head: Promise<void>
  #started: (() => void) | null = null
  #failed: ((error: Error) => void) | null = null
  #controller: Dispatcher.DispatchController | null = null
  #abortReason: Error | null = null
  readonly #chunks: Buffer[] = []
  #queued = 0
  #ended = false
  #error: Error | null = null
  #waiter: (() => void) | null = null

  constructor() {
    this.head = new Promise<void>((resolve, reject) => {
      this.#started = resolve
      this.#failed = reject
    })
    // Errors after the head surface through `read` (or are moot once the call is over).
    this.head.catch(() => {})
  }

  /** The engine's answer ended (whole, or failed): nothing left to abort. */
  get done(): boolean {
    return this.#ended || this.#error !== null
  }

  /** End the call from this side (cancel, timeout, link gone). */
  abort(reason: Error): void {
    this.#abortReason = reason
    if (this.#controller && !this.#controller.aborted) this.#controller.abort(reason)
  }

  /** The next body chunk, or null at the end; rejects once the call failed. */
  async read(): Promise<Buffer | null> {
    for (;;) {
      const chunk = this.#chunks.shift()
      if (chunk) {
        this.#queued -= chunk.byteLength
        if (this.#controller?.paused && this.#queued < ANSWER_READ_AHEAD_BYTES) this.#controller.resume()
        return chunk
      }
      if (this.#error) throw this.#error
      if (this.#ended) return null
      await new Promise<void>((resolve) => {
        this.#waiter = resolve
      })
    }
  }

  #wake(): void {
    const waiter = this.#waiter
    this.#waiter = null
    waiter?.()
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.#controller = controller
    if (this.#abortReason) controller.abort(this.#abortReason)
  }

  onResponseStart(
    _controller: Dispatcher.DispatchController,
    statusCode: number,
    headers: Record<string, string | string[] | undefined>,
  ): void {
    if (statusCode < 200) return // informational (1xx): the final head follows
    this.status = statusCode
    this.headers = flatHeaders(headers)
    this.#started?.()
    this.#started = null
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    this.#chunks.push(chunk)
    this.#queued += chunk.byteLength
    if (this.#queued >= ANSWER_READ_AHEAD_BYTES) controller.pause()
    this.#wake()
  }

  onResponseEnd(): void {
    this.#ended = true
    this.#wake()
  }

  onResponseError(_controller: Dispatcher.DispatchController | null, error: Error): void {
    this.#error = error
    this.#failed?.(error)
    this.#started = null
    this.#wake()
  }
}

/** A request body arriving in frames, as the iterable the engine call streams from. */
async function* bodyChunks(body: CreditedQueue): AsyncGenerator<Uint8Array> {
  for (;;) {
    const chunk = await body.read()
    if (!chunk) return
    yield chunk
  }
}

export class TunnelClient {
  readonly options: TunnelClientOptions
  readonly #receiving = new Map<string, Buffered | Streamed>()
  readonly #inflight = new Map<string, { controller: AbortController; credit: CreditWindow | null }>()
  readonly #target: URL | null
  /** Keep-alive connections to the engine (none without an engine). */
  readonly #pool: Pool | null
  /** The engine URL's path, prefixed to every call's path. */
  readonly #basePath: string
  readonly stats = {
    requests: 0,
    errors: 0,
    cancels: 0,
    framesOut: 0,
    bytesOut: 0,
    maxInflight: 0,
    /** Largest count of one answer's bytes sent and not yet acknowledged by the edge (≤ the window). */
    maxUnackedBytes: 0,
    /** Largest count of one request body's bytes received and not yet taken by the engine (≤ the window). */
    maxBodyQueuedBytes: 0,
    creditsSent: 0,
    creditsReceived: 0,
    /** Times an answer waited for the edge's credit. */
    creditWaits: 0,
  }

  constructor(options: TunnelClientOptions) {
    this.options = options
    this.#target = options.upstreamUrl ? new URL(options.upstreamUrl) : null
    this.#basePath = this.#target ? this.#target.pathname.replace(/\/$/, '') : ''
    // As many keep-alive connections as calls in flight; no timeouts of undici's own (each call has its deadline).
    this.#pool = this.#target ? new Pool(this.#target.origin, { connections: null, headersTimeout: 0, bodyTimeout: 0 }) : null
  }

  get inflight(): number {
    return this.#inflight.size
  }

  #features(): TunnelFeatures {
    return this.options.port.features?.() ?? PLAIN_V1
  }

  onMessage(message: IncomingFrame): void {
    switch (message.type) {
      case 'tunnel.cancel': {
        this.stats.cancels++
        const receiving = this.#receiving.get(message.request_id)
        if (receiving?.kind === 'streamed') receiving.body.fail(new Error(message.reason))
        this.#receiving.delete(message.request_id)
        this.#inflight.get(message.request_id)?.controller.abort(message.reason)
        this.#inflight.delete(message.request_id)
        return
      }
      case 'tunnel.credit': {
        this.stats.creditsReceived++
        this.#inflight.get(message.request_id)?.credit?.grant(message.bytes)
        return
      }
      case 'tunnel.request':
        this.#onRequest(message)
        return
      case 'tunnel.body':
        this.#onBody(message)
        return
    }
  }

  /** The link went away: abort every engine call (the edge fails them on its side). */
  abortAll(reason: string): void {
    for (const receiving of this.#receiving.values()) if (receiving.kind === 'streamed') receiving.body.fail(new Error(reason))
    this.#receiving.clear()
    for (const { controller } of this.#inflight.values()) controller.abort(reason)
    this.#inflight.clear()
  }

  /** Close idle keep-alive sockets to the engine (the runner is stopping). */
  close(): void {
    void this.#pool?.destroy().catch(() => {})
  }

  #maxBody(): number {
    return this.options.maxBodyChars ?? 64 * 1024 * 1024
  }

  #onRequest(message: Extract<IncomingFrame, { type: 'tunnel.request' }>): void {
    const call: Call = { method: message.method, path: message.path, headers: message.headers, timeoutMs: message.timeout_ms }
    const size = typeof message.body === 'string' ? message.body.length : message.body.byteLength
    if (size > this.#maxBody()) {
      this.#send({ type: 'tunnel.error', request_id: message.request_id, message: 'request body too large for this runner' })
      return
    }
    if (!message.more) {
      void this.#forward(message.request_id, call, message.body)
      return
    }
    const features = this.#features()
    if (features.credit && typeof message.body !== 'string') {
      // Stream the body into the engine call as it arrives; credit goes back as the engine takes it.
      const requestId = message.request_id
      const body = new CreditedQueue({
        windowBytes: features.windowBytes,
        grant: (bytes) => {
          this.stats.creditsSent++
          this.#send({ type: 'tunnel.credit', request_id: requestId, bytes })
        },
      })
      this.#receiving.set(requestId, { kind: 'streamed', body })
      this.#pushBody(requestId, body, message.body, false)
      void this.#forward(requestId, call, body)
      return
    }
    this.#receiving.set(message.request_id, { kind: 'buffered', ...call, parts: [message.body], size })
  }

  #onBody(message: Extract<IncomingFrame, { type: 'tunnel.body' }>): void {
    const receiving = this.#receiving.get(message.request_id)
    if (!receiving) return // body of a cancelled or unknown request
    if (receiving.kind === 'streamed') {
      if (typeof message.data === 'string') return
      this.#pushBody(message.request_id, receiving.body, message.data, !message.more)
      if (!message.more) this.#receiving.delete(message.request_id)
      return
    }
    receiving.parts.push(message.data)
    receiving.size += typeof message.data === 'string' ? message.data.length : message.data.byteLength
    if (receiving.size > this.#maxBody()) {
      this.#receiving.delete(message.request_id)
      this.#send({ type: 'tunnel.error', request_id: message.request_id, message: 'request body too large for this runner' })
      return
    }
    if (message.more) return
    this.#receiving.delete(message.request_id)
    const { parts, size } = receiving
    const body = parts.every((part) => typeof part === 'string')
      ? parts.join('')
      : Buffer.concat(
          parts.map((part) => (typeof part === 'string' ? Buffer.from(part) : part)),
          size,
        )
    void this.#forward(message.request_id, receiving, body)
  }

  #pushBody(requestId: string, body: CreditedQueue, bytes: Uint8Array, end: boolean): void {
    const refused = body.push(bytes, end)
    this.stats.maxBodyQueuedBytes = Math.max(this.stats.maxBodyQueuedBytes, body.maxQueued)
    if (refused) {
      // The edge sent beyond the credit it was given: refuse rather than buffer without bound.
      this.#receiving.delete(requestId)
      body.fail(new Error('credit window exceeded'))
      this.#inflight.get(requestId)?.controller.abort('credit window exceeded')
      this.#send({ type: 'tunnel.error', request_id: requestId, message: 'request body sent beyond the credit window' })
    }
  }

  #send(message: RunnerMessageInput | RunnerBodyFrame): boolean {
    const sent = this.options.port.send(message)
    if (sent) {
      this.stats.framesOut++
      if (message.type === 'tunnel.chunk') this.stats.bytesOut += message.data.length
      if (message.type === 'tunnel.head') this.stats.bytesOut += (message.body ?? '').length
    }
    return sent
  }

  async #forward(requestId: string, call: Call, body: Payload | CreditedQueue): Promise<void> {
    this.stats.requests++
    const target = this.#target
    const pool = this.#pool
    if (!target || !pool) {
      this.stats.errors++
      if (body instanceof CreditedQueue) this.#receiving.delete(requestId)
      this.#send({ type: 'tunnel.error', request_id: requestId, message: 'this runner serves no model (no --upstream)' })
      return
    }
    const features = this.#features()
    const controller = new AbortController()
    const credit = features.credit ? new CreditWindow(features.windowBytes) : null
    this.#inflight.set(requestId, { controller, credit })
    this.stats.maxInflight = Math.max(this.stats.maxInflight, this.#inflight.size)
    const headers: Record<string, string> = { 'accept-encoding': 'identity' }
    for (const key in call.headers) if (!DROP_HEADERS.has(key.toLowerCase())) headers[key] = call.headers[key] as string
    const bodyless = call.method === 'GET' || call.method === 'HEAD'
    let timedOut = false
    const answer = new EngineAnswer()
    // The engine call goes out first; its deadline and abort wiring are set up while the engine works (same
    // tick: nothing can abort it before they are in place).
    try {
      pool.dispatch(
        {
          path: `${this.#basePath}${call.path}`,
          method: call.method as Dispatcher.HttpMethod,
          headers,
          // undici streams an async iterable body (its types name only Readable).
          body: bodyless ? null : body instanceof CreditedQueue ? (bodyChunks(body) as unknown as Readable) : body,
        },
        answer,
      )
    } catch (error) {
      answer.onResponseError(null, error as Error)
    }
    const onAbort = () => answer.abort(new Error(String(controller.signal.reason ?? 'aborted')))
    controller.signal.addEventListener('abort', onAbort)
    const timer = setTimeout(
      () => {
        timedOut = true
        answer.abort(new Error(`no answer within ${call.timeoutMs} ms`))
      },
      Math.max(1, call.timeoutMs),
    )
    try {
      await answer.head
      const streaming = (answer.headers['content-type'] ?? '').includes('text/event-stream')
      const frameBytes = features.binary ? Math.min(TUNNEL_FRAME_BYTES, features.windowBytes) : TUNNEL_CHUNK_CHARS
      const decoder = features.binary ? null : new TextDecoder()
      let headSent = false
      /** Send `bytes` as one or more frames, within the credit the edge gave. False when the call is over. */
      const emit = async (bytes: Uint8Array, more: boolean): Promise<boolean> => {
        let offset = 0
        do {
          let size = Math.min(bytes.byteLength - offset, frameBytes)
          if (credit && size > 0) {
            if (credit.allowance <= 0) {
              this.stats.creditWaits++
              await credit.available(controller.signal)
            }
            size = Math.min(size, credit.allowance)
          }
          if (controller.signal.aborted) return false
          const piece = bytes.subarray(offset, offset + size)
          offset += size
          const last = !more && offset >= bytes.byteLength
          const payload: Payload = decoder ? decoder.decode(piece, { stream: !last }) : piece
          const ok = headSent
            ? this.#send({ type: 'tunnel.chunk', request_id: requestId, data: payload, more: !last })
            : this.#send({
                type: 'tunnel.head',
                request_id: requestId,
                status: answer.status,
                headers: answer.headers,
                body: payload,
                more: !last,
              })
          headSent = true
          if (!ok) {
            controller.abort('link closed')
            return false
          }
          if (credit) {
            credit.spend(size)
            this.stats.maxUnackedBytes = Math.max(this.stats.maxUnackedBytes, credit.maxUnacked)
          }
        } while (offset < bytes.byteLength)
        return true
      }
      const parts: Buffer[] = []
      let pending = 0
      const { port } = this.options
      for (;;) {
        // Read only as fast as the link drains.
        if (port.saturated?.() !== false) await port.flushed(controller.signal)
        if (controller.signal.aborted) return
        const value = await answer.read()
        if (!value) break
        if (streaming) {
          if (!(await emit(value, true))) return
          continue
        }
        parts.push(value)
        pending += value.byteLength
        if (pending >= frameBytes) {
          // Whole frames go out now; the remainder waits for more.
          const joined = Buffer.concat(parts.splice(0), pending)
          const whole = pending - (pending % frameBytes)
          if (!(await emit(joined.subarray(0, whole), true))) return
          pending -= whole
          if (pending) parts.push(joined.subarray(whole))
        }
      }
      const first = parts[0]
      if (
        parts.length > 1 &&
        first &&
        port.sendParts &&
        features.binary &&
        pending <= frameBytes &&
        (!credit || credit.allowance >= pending) &&
        !controller.signal.aborted
      ) {
        // The whole answer in one frame, as it arrived: no joined copy (a third of this side's garbage per call).
        const head = { type: 'tunnel.head' as const, request_id: requestId, status: answer.status, headers: answer.headers, more: false }
        const sent = headSent
          ? port.sendParts({ type: 'tunnel.chunk', request_id: requestId, data: first, more: false }, parts.slice(1))
          : port.sendParts({ ...head, body: first }, parts.slice(1))
        if (!sent) {
          controller.abort('link closed')
          return
        }
        this.stats.framesOut++
        this.stats.bytesOut += pending
        if (credit) {
          credit.spend(pending)
          this.stats.maxUnackedBytes = Math.max(this.stats.maxUnackedBytes, credit.maxUnacked)
        }
        return
      }
      await emit(parts.length === 1 ? (parts[0] as Buffer) : Buffer.concat(parts, pending), false)
    } catch (error) {
      if (controller.signal.aborted) return
      this.stats.errors++
      const reason = `${timedOut ? 'engine timeout: ' : ''}${(error as Error).message}`
      this.#send({ type: 'tunnel.error', request_id: requestId, message: `local engine: ${reason}` })
      this.options.log?.('tunnel.error', { request_id: requestId, error: reason })
      this.options.onEngineError?.()
    } finally {
      clearTimeout(timer)
      controller.signal.removeEventListener('abort', onAbort)
      // Over on this side (failed, cancelled): the engine call ends too if it has not.
      if (!answer.done) answer.abort(new Error('tunnel call over'))
      this.#inflight.delete(requestId)
      // An engine that answered before reading the whole body: the rest of it is not wanted any more.
      const receiving = this.#receiving.get(requestId)
      if (receiving?.kind === 'streamed') {
        this.#receiving.delete(requestId)
        receiving.body.fail(new Error('engine call over'))
      }
    }
  }
}

/** Features from the edge's `registered` message (absent capabilities: plain v1). */
export function negotiatedFeatures(message: Extract<EdgeMessage, { type: 'registered' }>): TunnelFeatures {
  const capabilities = message.capabilities ?? []
  const binary = capabilities.includes(TUNNEL_CAPABILITY.binary)
  return {
    binary,
    credit: binary && capabilities.includes(TUNNEL_CAPABILITY.credit),
    windowBytes: message.tunnel_window_bytes ?? TUNNEL_WINDOW_BYTES,
  }
}
