/**
 * @module
 * The edge side of the inference tunnel: turns one HTTP request into framed messages on a runner's
 * WebSocket and the runner's answer frames back into a streaming `Response`. In-flight requests live
 * in memory (a Durable Object is not evicted while a request is in flight); a lost runner fails its
 * requests at once.
 *
 * Bounded: every request has a deadline; a client that goes away (abort signal) or stops reading
 * (stream cancel) sends `tunnel.cancel` so the runner aborts its engine call.
 *
 * Per connection, what the runner negotiated (`TunnelFeatures`): plain v1 (JSON text frames, bodies as
 * text, no flow control), `binary` (bodies as raw bytes in binary frames) and `credit` (flow control:
 * this side sends at most `windowBytes` of a request's body beyond what the runner acknowledged with
 * `tunnel.credit`, and acknowledges the runner's answer bytes only as this side's reader takes them, so
 * neither side buffers more than one window per request; a stalled reader holds only its own window).
 */
import type { EdgeMessage, RunnerMessage } from '../../contract/runner-protocol.ts'
import { chunkText, TUNNEL_FRAME_BYTES } from '../../contract/runner-protocol.ts'
import { chunkBytes, type EdgeBodyFrame, type Payload, payloadBytes, type RunnerBodyFrame } from '../../contract/tunnel-frames.ts'

/** Header the Worker sets to bound a tunnelled request (milliseconds). */
export const TUNNEL_TIMEOUT_HEADER = 'x-rollgate-timeout-ms'
/** Upper bound on concurrent tunnelled requests per runner link (each holds a stream and a timer). */
export const MAX_PENDING_REQUESTS = 4_096
/** Headers that describe the hop, not the request; never forwarded. */
const HOP_HEADERS = new Set(['connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'host', 'content-length', 'cf-connecting-ip'])

/** What a runner's connection negotiated (`register.capabilities` → `registered.capabilities`). */
export interface TunnelFeatures {
  binary: boolean
  credit: boolean
  /** Per-request window (bytes) when `credit`. */
  windowBytes: number
}

export interface TunnelPort {
  /** The runner's negotiated features; null when it has no open connection. */
  features(runnerId: string): TunnelFeatures | null
  /** Send a message; a body frame whose payload is bytes goes as a binary frame. False when not sent. */
  send(runnerId: string, message: EdgeMessage | EdgeBodyFrame): boolean
}

export interface TunnelRequest {
  method: string
  path: string
  headers: Headers
  /** Bytes for a `binary` connection, text otherwise (what `bodyKind` says to read). */
  body: Payload
  timeoutMs: number
  signal: AbortSignal
}

/** Flow-control counters (tests assert the bounds on them). */
export interface TunnelStats {
  /** Largest count of one request's body bytes sent to the runner and not yet acknowledged. */
  max_upload_unacked_bytes: number
  /** Largest count of one answer's bytes received from the runner and not yet taken by the reader. */
  max_answer_queued_bytes: number
  credits_sent: number
  credits_received: number
  /** Answers failed because the runner sent beyond its window. */
  window_violations: number
}

type AnswerFrame = RunnerBodyFrame | Extract<RunnerMessage, { type: 'tunnel.error' | 'tunnel.credit' }>

interface Upload {
  body: Uint8Array
  /** Bytes sent so far. */
  offset: number
  /** Bytes the runner still lets this side send. */
  allowance: number
  /** Sent and not yet acknowledged. */
  unacked: number
}

interface Pending {
  runnerId: string
  credit: boolean
  windowBytes: number
  head: { resolve(response: Response): void; reject(error: Error): void } | null
  answer: AnswerBody | null
  /** Answer bytes received and not yet acknowledged (at most `windowBytes` under `credit`). */
  received: number
  upload: Upload | null
  timer: ReturnType<typeof setTimeout>
  detach: () => void
}

function errorResponse(status: number, message: string): Response {
  return Response.json({ error: { message, type: 'tunnel_error', code: status } }, { status })
}

/** Statuses whose responses carry no body (the Response constructor refuses one). */
const NULL_BODY_STATUSES = new Set([204, 205, 304])

function payloadLength(payload: Payload): number {
  return typeof payload === 'string' ? payload.length : payload.byteLength
}

/** Why a runner's `tunnel.head` cannot become a Response (null when it can); fills `headers` on the way. */
function invalidHead(message: Extract<AnswerFrame, { type: 'tunnel.head' }>, headers: Headers): string | null {
  if (message.status < 200 || message.status > 599) return `status ${message.status} is not a final HTTP status`
  if (NULL_BODY_STATUSES.has(message.status) && (payloadLength(message.body) || message.more)) {
    return `status ${message.status} cannot have a body`
  }
  for (const [key, value] of Object.entries(message.headers)) {
    if (HOP_HEADERS.has(key.toLowerCase())) continue
    try {
      headers.set(key, value)
    } catch {
      return `invalid header ${JSON.stringify(key.slice(0, 64))}`
    }
  }
  return null
}

/**
 * One streamed answer body: frames queue here until the reader pulls them (`highWaterMark` 0: a pull
 * means a read is waiting). `onTaken` reports the bytes the reader took (the credit to grant back).
 */
class AnswerBody {
  readonly stream: ReadableStream<Uint8Array>
  readonly #queue: Uint8Array[] = []
  #queued = 0
  #ended = false
  #controller: ReadableStreamDefaultController<Uint8Array> | null = null
  #waiting: (() => void) | null = null
  readonly #onTaken: (bytes: number) => void

  constructor(onTaken: (bytes: number) => void, onCancel: () => void) {
    this.#onTaken = onTaken
    this.stream = new ReadableStream<Uint8Array>(
      {
        start: (controller) => {
          this.#controller = controller
        },
        pull: (controller) => {
          if (this.#deliver(controller)) return
          return new Promise<void>((resolve) => {
            this.#waiting = resolve
          })
        },
        cancel: () => onCancel(),
      },
      { highWaterMark: 0 },
    )
  }

  /** Bytes received and not yet taken by the reader. */
  get queued(): number {
    return this.#queued
  }

  push(bytes: Uint8Array, end: boolean): void {
    if (bytes.byteLength) {
      this.#queue.push(bytes)
      this.#queued += bytes.byteLength
    }
    if (end) this.#ended = true
    const wake = this.#waiting
    if (wake && this.#controller && this.#deliver(this.#controller)) {
      this.#waiting = null
      wake()
    }
  }

  error(error: Error): void {
    try {
      this.#controller?.error(error)
    } catch {
      // already closed
    }
    this.#waiting?.()
    this.#waiting = null
  }

  /** Hand the reader the next chunk (or the end); false when there is nothing yet. */
  #deliver(controller: ReadableStreamDefaultController<Uint8Array>): boolean {
    const next = this.#queue.shift()
    if (next) {
      this.#queued -= next.byteLength
      controller.enqueue(next)
      this.#onTaken(next.byteLength)
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

export class TunnelRequests {
  readonly #port: TunnelPort
  readonly #pending = new Map<string, Pending>()
  readonly #encoder = new TextEncoder()
  readonly stats: TunnelStats = {
    max_upload_unacked_bytes: 0,
    max_answer_queued_bytes: 0,
    credits_sent: 0,
    credits_received: 0,
    window_violations: 0,
  }

  constructor(port: TunnelPort) {
    this.#port = port
  }

  get size(): number {
    return this.#pending.size
  }

  /** How the body of a request to this runner is best read: bytes for a binary connection, else text. */
  bodyKind(runnerId: string): 'bytes' | 'text' {
    return this.#port.features(runnerId)?.binary ? 'bytes' : 'text'
  }

  /** Send a request to a runner; resolves with the runner's response (head first, body streamed). */
  open(runnerId: string, request: TunnelRequest): Promise<Response> {
    if (this.#pending.size >= MAX_PENDING_REQUESTS) return Promise.resolve(errorResponse(503, 'tunnel saturated'))
    if (request.signal.aborted) return Promise.resolve(errorResponse(499, 'client disconnected'))
    const features = this.#port.features(runnerId)
    if (!features) return Promise.resolve(errorResponse(503, `runner ${runnerId} is not connected`))
    const requestId = crypto.randomUUID()
    const headers: Record<string, string> = {}
    request.headers.forEach((value, key) => {
      if (!HOP_HEADERS.has(key.toLowerCase())) headers[key] = value
    })
    const credit = features.binary && features.credit
    const bytes = features.binary ? payloadBytes(request.body) : null
    // Under credit the first frame carries at most one window; the rest goes out as credit comes back.
    const chunks: Payload[] = bytes
      ? credit
        ? [bytes.subarray(0, Math.min(TUNNEL_FRAME_BYTES, features.windowBytes))]
        : chunkBytes(bytes, TUNNEL_FRAME_BYTES)
      : chunkText(typeof request.body === 'string' ? request.body : new TextDecoder().decode(request.body))
    return new Promise<Response>((resolve, reject) => {
      const onAbort = () => this.#cancel(requestId, 'client disconnected', new Error('client disconnected'))
      const first = chunks[0] ?? ''
      const pending: Pending = {
        runnerId,
        credit,
        windowBytes: features.windowBytes,
        head: { resolve, reject },
        answer: null,
        received: 0,
        upload:
          credit && bytes
            ? {
                body: bytes,
                offset: payloadLength(first),
                allowance: features.windowBytes - payloadLength(first),
                unacked: payloadLength(first),
              }
            : null,
        timer: setTimeout(
          () => this.#cancel(requestId, 'timeout', new Error(`runner did not answer within ${request.timeoutMs} ms`)),
          request.timeoutMs,
        ),
        detach: () => request.signal.removeEventListener('abort', onAbort),
      }
      this.#pending.set(requestId, pending)
      request.signal.addEventListener('abort', onAbort)
      const sent = this.#port.send(runnerId, {
        type: 'tunnel.request',
        request_id: requestId,
        method: request.method,
        path: request.path,
        headers,
        body: first,
        more: bytes && credit ? bytes.byteLength > payloadLength(first) : chunks.length > 1,
        timeout_ms: request.timeoutMs,
      })
      if (!sent) {
        this.#finish(requestId)
        resolve(errorResponse(503, `runner ${runnerId} is not connected`))
        return
      }
      if (pending.upload) {
        this.#noteUnacked(pending.upload)
        this.#pump(requestId, pending.upload)
        return
      }
      for (let i = 1; i < chunks.length; i++) {
        this.#port.send(runnerId, { type: 'tunnel.body', request_id: requestId, data: chunks[i] as Payload, more: i < chunks.length - 1 })
      }
    })
  }

  /** A frame from the runner. Returns false when the request is unknown (finished or cancelled). */
  onMessage(runnerId: string, message: AnswerFrame): boolean {
    const pending = this.#pending.get(message.request_id)
    if (!pending || pending.runnerId !== runnerId) return false
    switch (message.type) {
      case 'tunnel.head':
        return this.#onHead(pending, message)
      case 'tunnel.chunk': {
        const answer = pending.answer
        if (!answer) return false
        this.#receive(message.request_id, pending, message.data, !message.more)
        return true
      }
      case 'tunnel.credit': {
        const upload = pending.upload
        if (!upload) return false
        this.stats.credits_received++
        upload.allowance += message.bytes
        upload.unacked = Math.max(0, upload.unacked - message.bytes)
        this.#pump(message.request_id, upload)
        return true
      }
      case 'tunnel.error': {
        this.#fail(message.request_id, new Error(`runner: ${message.message}`))
        return true
      }
    }
  }

  /** The runner is gone: fail everything it was answering. */
  failRunner(runnerId: string, reason: string): void {
    for (const [requestId, pending] of this.#pending) {
      if (pending.runnerId === runnerId) this.#fail(requestId, new Error(`runner ${runnerId} lost: ${reason}`))
    }
  }

  #onHead(pending: Pending, message: Extract<AnswerFrame, { type: 'tunnel.head' }>): boolean {
    const head = pending.head
    if (!head) return false
    pending.head = null
    const { runnerId } = pending
    const requestId = message.request_id
    const headers = new Headers()
    const invalid = invalidHead(message, headers)
    if (invalid) {
      // A head no HTTP response can have: the call is answered at once (a provider-shaped 502 at the Worker).
      this.#port.send(runnerId, { type: 'tunnel.cancel', request_id: requestId, reason: `invalid tunnel.head: ${invalid}` })
      this.#finish(requestId)
      head.resolve(errorResponse(502, `runner ${runnerId} sent an invalid response head: ${invalid}`))
      return true
    }
    if (!message.more) {
      // The whole answer in one frame (the common non-streaming case): no stream needed.
      this.#finish(requestId)
      head.resolve(new Response(message.body, { status: message.status, headers }))
      return true
    }
    // The request body is no longer needed once the runner answers.
    pending.upload = null
    let taken = 0
    const answer = new AnswerBody(
      (bytes) => {
        if (!pending.credit) return
        // Acknowledge in batches of half a window (fewer messages, the sender never stalls on a full window).
        taken += bytes
        if (taken >= pending.windowBytes / 2 && this.#pending.get(requestId) === pending) {
          this.stats.credits_sent++
          this.#port.send(runnerId, { type: 'tunnel.credit', request_id: requestId, bytes: taken })
          pending.received -= taken
          taken = 0
        }
      },
      () => {
        // The consumer stopped reading: the runner can stop too.
        if (this.#pending.has(requestId)) {
          this.#port.send(runnerId, { type: 'tunnel.cancel', request_id: requestId, reason: 'consumer cancelled' })
          this.#finish(requestId)
        }
      },
    )
    pending.answer = answer
    head.resolve(new Response(answer.stream, { status: message.status, headers }))
    this.#receive(requestId, pending, message.body, false)
    return true
  }

  #receive(requestId: string, pending: Pending, payload: Payload, end: boolean): void {
    const answer = pending.answer
    if (!answer) return
    const bytes = typeof payload === 'string' ? this.#encoder.encode(payload) : payload
    if (pending.credit) {
      pending.received += bytes.byteLength
      if (pending.received > pending.windowBytes) {
        this.stats.window_violations++
        this.#cancel(requestId, 'credit window exceeded', new Error(`runner ${pending.runnerId} sent beyond its credit window`))
        return
      }
    }
    answer.push(bytes, end)
    this.stats.max_answer_queued_bytes = Math.max(this.stats.max_answer_queued_bytes, answer.queued)
    if (end) this.#finish(requestId)
  }

  /** Send the request body frames the runner's credit allows. */
  #pump(requestId: string, upload: Upload): void {
    const pending = this.#pending.get(requestId)
    if (!pending || pending.upload !== upload) return
    const total = upload.body.byteLength
    while (upload.offset < total && upload.allowance > 0) {
      const size = Math.min(TUNNEL_FRAME_BYTES, upload.allowance, total - upload.offset)
      const frame = upload.body.subarray(upload.offset, upload.offset + size)
      upload.offset += size
      upload.allowance -= size
      upload.unacked += size
      const more = upload.offset < total
      if (!this.#port.send(pending.runnerId, { type: 'tunnel.body', request_id: requestId, data: frame, more })) return
      this.#noteUnacked(upload)
    }
  }

  #noteUnacked(upload: Upload): void {
    this.stats.max_upload_unacked_bytes = Math.max(this.stats.max_upload_unacked_bytes, upload.unacked)
  }

  #cancel(requestId: string, reason: string, error: Error): void {
    const pending = this.#pending.get(requestId)
    if (!pending) return
    this.#port.send(pending.runnerId, { type: 'tunnel.cancel', request_id: requestId, reason })
    this.#fail(requestId, error)
  }

  #fail(requestId: string, error: Error): void {
    const pending = this.#pending.get(requestId)
    if (!pending) return
    this.#finish(requestId)
    if (pending.head) pending.head.reject(error)
    else pending.answer?.error(error)
  }

  #finish(requestId: string): void {
    const pending = this.#pending.get(requestId)
    if (!pending) return
    clearTimeout(pending.timer)
    pending.detach()
    pending.upload = null
    this.#pending.delete(requestId)
  }
}
