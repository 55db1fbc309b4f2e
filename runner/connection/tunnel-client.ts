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
 */
import {
  type EdgeMessage,
  type RunnerMessageInput,
  TUNNEL_CAPABILITY,
  TUNNEL_CHUNK_CHARS,
  TUNNEL_FRAME_BYTES,
  TUNNEL_WINDOW_BYTES,
} from '../../src/contract/runner-protocol.ts'
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
  body: RequestBodyStream
}

/** Hop-by-hop and length headers never forwarded (fetch sets its own). */
const DROP_HEADERS = new Set(['host', 'connection', 'content-length', 'transfer-encoding', 'keep-alive', 'upgrade', 'accept-encoding'])
const PLAIN_V1: TunnelFeatures = { binary: false, credit: false, windowBytes: TUNNEL_WINDOW_BYTES }

/** Credit the edge granted for one answer: senders wait here when it runs out. */
class CreditGate {
  allowance: number
  #wake: (() => void) | null = null

  constructor(windowBytes: number) {
    this.allowance = windowBytes
  }

  grant(bytes: number): void {
    this.allowance += bytes
    this.#wake?.()
  }

  /** Resolves once some credit is there (or the call was aborted). */
  async available(signal: AbortSignal): Promise<void> {
    while (this.allowance <= 0 && !signal.aborted) {
      await new Promise<void>((resolve) => {
        const done = () => {
          signal.removeEventListener('abort', done)
          this.#wake = null
          resolve()
        }
        this.#wake = done
        signal.addEventListener('abort', done)
      })
    }
  }
}

/**
 * A request body arriving in frames, as the engine call's body stream: frames queue until the engine
 * (fetch) pulls them; each pull grants the edge credit (in batches of half a window).
 */
class RequestBodyStream {
  readonly stream: ReadableStream<Uint8Array>
  readonly #queue: Uint8Array[] = []
  queued = 0
  #ended = false
  #taken = 0
  #wake: (() => void) | null = null
  #controller: ReadableStreamDefaultController<Uint8Array> | null = null
  readonly #windowBytes: number
  readonly #grant: (bytes: number) => void

  constructor(windowBytes: number, grant: (bytes: number) => void) {
    this.#windowBytes = windowBytes
    this.#grant = grant
    this.stream = new ReadableStream<Uint8Array>(
      {
        start: (controller) => {
          this.#controller = controller
        },
        pull: (controller) => {
          if (this.#deliver(controller)) return
          return new Promise<void>((resolve) => {
            this.#wake = resolve
          })
        },
      },
      { highWaterMark: 0 },
    )
  }

  push(bytes: Uint8Array, end: boolean): void {
    if (bytes.byteLength) {
      this.#queue.push(bytes)
      this.queued += bytes.byteLength
    }
    if (end) this.#ended = true
    const wake = this.#wake
    if (wake && this.#controller && this.#deliver(this.#controller)) {
      this.#wake = null
      wake()
    }
  }

  error(reason: string): void {
    try {
      this.#controller?.error(new Error(reason))
    } catch {
      // already closed
    }
    this.#wake?.()
    this.#wake = null
  }

  #deliver(controller: ReadableStreamDefaultController<Uint8Array>): boolean {
    const next = this.#queue.shift()
    if (next) {
      this.queued -= next.byteLength
      controller.enqueue(next)
      this.#taken += next.byteLength
      if (!this.#ended && this.#taken >= this.#windowBytes / 2) {
        this.#grant(this.#taken)
        this.#taken = 0
      }
      if (this.#ended && this.#queue.length === 0) controller.close()
      return true
    }
    if (this.#ended) {
      controller.close()
      return true
    }
    return false
  }
}

function concat(parts: Uint8Array[], total: number): Uint8Array {
  if (parts.length === 1) return parts[0] as Uint8Array
  const out = new Uint8Array(total)
  let offset = 0
  for (const part of parts) {
    out.set(part, offset)
    offset += part.byteLength
  }
  return out
}

export class TunnelClient {
  readonly options: TunnelClientOptions
  readonly #receiving = new Map<string, Buffered | Streamed>()
  readonly #inflight = new Map<string, { controller: AbortController; credit: CreditGate | null }>()
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
        if (receiving?.kind === 'streamed') receiving.body.error(message.reason)
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
    for (const receiving of this.#receiving.values()) if (receiving.kind === 'streamed') receiving.body.error(reason)
    this.#receiving.clear()
    for (const { controller } of this.#inflight.values()) controller.abort(reason)
    this.#inflight.clear()
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
      const body = new RequestBodyStream(features.windowBytes, (bytes) => {
        this.stats.creditsSent++
        this.#send({ type: 'tunnel.credit', request_id: requestId, bytes })
      })
      this.#receiving.set(requestId, { kind: 'streamed', body })
      this.#pushBody(requestId, body, message.body, false)
      void this.#forward(requestId, call, body.stream)
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
      : concat(
          parts.map((part) => (typeof part === 'string' ? new TextEncoder().encode(part) : part)),
          size,
        )
    void this.#forward(message.request_id, receiving, body)
  }

  #pushBody(requestId: string, body: RequestBodyStream, bytes: Uint8Array, end: boolean): void {
    body.push(bytes, end)
    this.stats.maxBodyQueuedBytes = Math.max(this.stats.maxBodyQueuedBytes, body.queued)
    if (body.queued > this.#features().windowBytes) {
      // The edge sent beyond the credit it was given: refuse rather than buffer without bound.
      this.#receiving.delete(requestId)
      body.error('credit window exceeded')
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

  async #forward(requestId: string, call: Call, body: Payload | ReadableStream<Uint8Array>): Promise<void> {
    this.stats.requests++
    const { upstreamUrl } = this.options
    if (!upstreamUrl) {
      this.stats.errors++
      if (body instanceof ReadableStream) this.#receiving.delete(requestId)
      this.#send({ type: 'tunnel.error', request_id: requestId, message: 'this runner serves no model (no --upstream)' })
      return
    }
    const features = this.#features()
    const controller = new AbortController()
    const credit = features.credit ? new CreditGate(features.windowBytes) : null
    this.#inflight.set(requestId, { controller, credit })
    this.stats.maxInflight = Math.max(this.stats.maxInflight, this.#inflight.size)
    const headers: Record<string, string> = {}
    for (const [key, value] of Object.entries(call.headers)) if (!DROP_HEADERS.has(key.toLowerCase())) headers[key] = value
    const bodyless = call.method === 'GET' || call.method === 'HEAD'
    try {
      const response = await fetch(`${upstreamUrl.replace(/\/$/, '')}${call.path}`, {
        method: call.method,
        headers,
        ...(bodyless ? {} : { body: body as BodyInit, duplex: 'half' }),
        signal: AbortSignal.any([controller.signal, AbortSignal.timeout(Math.max(1, call.timeoutMs))]),
      } as RequestInit)
      const responseHeaders: Record<string, string> = {}
      response.headers.forEach((value, key) => {
        if (!DROP_HEADERS.has(key) && key !== 'content-encoding') responseHeaders[key] = value
      })
      const streaming = (response.headers.get('content-type') ?? '').includes('text/event-stream')
      const reader = response.body?.getReader()
      const frameBytes = features.binary ? Math.min(TUNNEL_FRAME_BYTES, features.windowBytes) : TUNNEL_CHUNK_CHARS
      const decoder = features.binary ? null : new TextDecoder()
      let headSent = false
      let unacked = 0
      /** Send `bytes` as one or more frames, within the credit the edge gave. False when the call is over. */
      const emit = async (bytes: Uint8Array, more: boolean): Promise<boolean> => {
        let offset = 0
        do {
          let size = Math.min(bytes.byteLength - offset, frameBytes)
          if (credit && size > 0) {
            if (credit.allowance <= 0) this.stats.creditWaits++
            await credit.available(controller.signal)
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
                status: response.status,
                headers: responseHeaders,
                body: payload,
                more: !last,
              })
          headSent = true
          if (!ok) {
            controller.abort('link closed')
            return false
          }
          if (credit) {
            credit.allowance -= size
            unacked = features.windowBytes - credit.allowance
            this.stats.maxUnackedBytes = Math.max(this.stats.maxUnackedBytes, unacked)
          }
        } while (offset < bytes.byteLength)
        return true
      }
      const parts: Uint8Array[] = []
      let pending = 0
      for (;;) {
        // Read only as fast as the link drains.
        await this.options.port.flushed(controller.signal)
        if (controller.signal.aborted) return
        const { value, done } = reader ? await reader.read() : { value: undefined, done: true }
        if (done || !value) break
        if (streaming) {
          if (!(await emit(value, true))) return
          continue
        }
        parts.push(value)
        pending += value.byteLength
        if (pending >= frameBytes) {
          // Whole frames go out now; the remainder waits for more.
          const joined = concat(parts.splice(0), pending)
          const whole = pending - (pending % frameBytes)
          if (!(await emit(joined.subarray(0, whole), true))) return
          pending -= whole
          if (pending) parts.push(joined.subarray(whole))
        }
      }
      await emit(concat(parts, pending), false)
    } catch (error) {
      if (controller.signal.aborted) return
      this.stats.errors++
      const reason = error instanceof Error ? `${error.name === 'TimeoutError' ? 'engine timeout: ' : ''}${error.message}` : String(error)
      this.#send({ type: 'tunnel.error', request_id: requestId, message: `local engine: ${reason}` })
      this.options.log?.('tunnel.error', { request_id: requestId, error: reason })
    } finally {
      this.#inflight.delete(requestId)
      // An engine that answered before reading the whole body: the rest of it is not wanted any more.
      if (this.#receiving.get(requestId)?.kind === 'streamed') this.#receiving.delete(requestId)
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
