/**
 * @module
 * The edge side of the inference tunnel: turns one engine call (`TunnelCall`, from the Worker's request)
 * into framed messages on a runner's WebSocket and the runner's answer frames back into a `TunnelAnswer`
 * (the whole body when it came in one frame, the common case; else a stream). In-flight requests live in
 * memory (a Durable Object is not evicted while a request is in flight); a lost runner fails its requests
 * at once. Failures are answers too, never exceptions: a JSON error body whose `error.code` (and the head
 * of its message) names what happened (`TUNNEL_ERROR`), relayed by the Worker in the caller's own format.
 *
 * Per connection, what the runner negotiated (`TunnelFeatures`): plain v1 (JSON text frames, bodies as
 * text, no flow control), `binary` (bodies as raw bytes in binary frames) and `credit` (flow control,
 * `src/contract/tunnel-credit.ts`: this side sends at most `windowBytes` of a request's body beyond what
 * the runner acknowledged, and acknowledges the runner's answer bytes only as this side's reader takes
 * them; a stalled reader holds only its own window).
 *
 * Memory bounds, per runner link (each is tested):
 * - at most `MAX_PENDING_REQUESTS` calls in flight (`tunnel_saturated`, 503);
 * - one answer holds at most one credit window of unread bytes (`tunnel_window_exceeded`, 502: the runner
 *   overran the credit it was given); a v1 runner has no window, its answer is held to `V1_ANSWER_QUEUE_BYTES`
 *   of unread bytes instead (`tunnel_answer_overflow`, 502);
 * - all calls together hold at most `LINK_BUFFER_BYTES`: request bodies until all of each is sent plus
 *   answer bytes not yet read (`tunnel_buffer_full`, 503: a call that would go beyond is refused before
 *   anything is sent, an answer frame that would go beyond fails its call).
 * Deadlines: every call has one (`tunnel_timeout`, 504), kept by a single timer for the whole link (armed for
 * the earliest deadline, cleared when no call is in flight, so it never keeps an idle object awake).
 */
import type { EdgeMessage, RunnerMessage } from '../../contract/runner-protocol.ts'
import { chunkText, TUNNEL_FRAME_BYTES } from '../../contract/runner-protocol.ts'
import { CreditedQueue, CreditWindow } from '../../contract/tunnel-credit.ts'
import { chunkBytes, type EdgeBodyFrame, type Payload, payloadBytes, type RunnerBodyFrame } from '../../contract/tunnel-frames.ts'

/** Header the Worker sets to bound a tunnelled request (milliseconds). */
export const TUNNEL_TIMEOUT_HEADER = 'x-rollgate-timeout-ms'
/** Upper bound on concurrent tunnelled calls per runner link. */
export const MAX_PENDING_REQUESTS = 1_024
/** Upper bound on the bytes one link holds for its calls: unsent request bodies + unread answer bytes. */
export const LINK_BUFFER_BYTES = 64 * 1024 * 1024
/** Unread answer bytes one call may hold from a v1 runner (no credit window to hold it to). */
export const V1_ANSWER_QUEUE_BYTES = 8 * 1024 * 1024
/** Headers that describe the hop, not the request; never forwarded. */
const HOP_HEADERS = new Set(['connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'host', 'content-length', 'cf-connecting-ip'])

/** The named errors a tunnelled call can end with (`error.code` of the answer, and its HTTP status). */
export const TUNNEL_ERROR = {
  tunnel_saturated: 503,
  tunnel_buffer_full: 503,
  runner_not_connected: 503,
  tunnel_timeout: 504,
  runner_lost: 502,
  runner_error: 502,
  runner_invalid_head: 502,
  tunnel_window_exceeded: 502,
  tunnel_answer_overflow: 502,
  client_disconnected: 499,
} as const
export type TunnelErrorCode = keyof typeof TUNNEL_ERROR

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

/** One engine call through the tunnel. */
export interface TunnelCall {
  /** Unique per link (`cancel` names the call by it). */
  request_id: string
  method: string
  /** Path and query on the runner's engine. */
  path: string
  headers: Record<string, string>
  body: Payload | null
  timeout_ms: number
}

/** The engine's answer: the whole body when it came in one frame, else a stream of it. */
export interface TunnelAnswer {
  status: number
  headers: Record<string, string>
  body: Uint8Array | ReadableStream<Uint8Array> | null
}

/** Flow-control counters (tests assert the bounds on them). */
export interface TunnelStats {
  /** Largest count of one request's body bytes sent to the runner and not yet acknowledged. */
  max_upload_unacked_bytes: number
  /** Largest count of one answer's bytes received from the runner and not yet taken by the reader. */
  max_answer_queued_bytes: number
  /** Largest count of bytes the link held at once (unsent request bodies + unread answers). */
  max_buffered_bytes: number
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
  window: CreditWindow
  /** Bytes counted as held by the link for it (the whole body, until all of it is sent). */
  held: number
}

interface Pending {
  runnerId: string
  credit: boolean
  windowBytes: number
  deadline: number
  timeoutMs: number
  /** Resolves the call's answer (null once resolved). */
  head: ((answer: TunnelAnswer) => void) | null
  answer: CreditedQueue | null
  upload: Upload | null
}

const encoder = new TextEncoder()

/** An answer naming what went wrong: JSON in the shape engines use, `error.code` the name. */
export function tunnelError(code: TunnelErrorCode, detail: string): TunnelAnswer {
  const body = { error: { message: `${code}: ${detail}`, type: 'tunnel_error', code } }
  return { status: TUNNEL_ERROR[code], headers: { 'content-type': 'application/json' }, body: encoder.encode(JSON.stringify(body)) }
}

/** An error whose message starts with its code (what a failed answer stream carries). */
function namedError(code: TunnelErrorCode, detail: string): Error {
  return new Error(`${code}: ${detail}`)
}

/** Statuses whose responses carry no body (the Response constructor refuses one). */
const NULL_BODY_STATUSES = new Set([204, 205, 304])

function payloadLength(payload: Payload): number {
  return typeof payload === 'string' ? payload.length : payload.byteLength
}

/** Why a runner's `tunnel.head` cannot become a Response (null when it can); fills `headers` on the way. */
function invalidHead(message: Extract<AnswerFrame, { type: 'tunnel.head' }>, headers: Record<string, string>): string | null {
  if (message.status < 200 || message.status > 599) return `status ${message.status} is not a final HTTP status`
  if (NULL_BODY_STATUSES.has(message.status) && (payloadLength(message.body) || message.more)) {
    return `status ${message.status} cannot have a body`
  }
  for (const [key, value] of Object.entries(message.headers)) {
    const name = key.toLowerCase()
    if (HOP_HEADERS.has(name)) continue
    // The names and values a Response's Headers would refuse (RFC 9110 token; no CR, LF or NUL).
    if (!/^[!#$%&'*+.^_`|~0-9a-z-]+$/.test(name) || /[\r\n\0]/.test(value)) return `invalid header ${JSON.stringify(key.slice(0, 64))}`
    headers[name] = value
  }
  return null
}

/** The bounds of one link (defaults: the constants above; tests pass small ones). */
export interface TunnelBounds {
  maxPending: number
  linkBufferBytes: number
  v1AnswerQueueBytes: number
}

export class TunnelRequests {
  readonly #port: TunnelPort
  readonly #bounds: TunnelBounds
  readonly #pending = new Map<string, Pending>()
  /** Bytes held for all calls: unsent request bodies + unread answer bytes (≤ `LINK_BUFFER_BYTES`). */
  #buffered = 0
  #timer: ReturnType<typeof setTimeout> | null = null
  #timerAt = Number.POSITIVE_INFINITY
  readonly stats: TunnelStats = {
    max_upload_unacked_bytes: 0,
    max_answer_queued_bytes: 0,
    max_buffered_bytes: 0,
    credits_sent: 0,
    credits_received: 0,
    window_violations: 0,
  }

  constructor(port: TunnelPort, bounds: Partial<TunnelBounds> = {}) {
    this.#port = port
    this.#bounds = {
      maxPending: bounds.maxPending ?? MAX_PENDING_REQUESTS,
      linkBufferBytes: bounds.linkBufferBytes ?? LINK_BUFFER_BYTES,
      v1AnswerQueueBytes: bounds.v1AnswerQueueBytes ?? V1_ANSWER_QUEUE_BYTES,
    }
  }

  get size(): number {
    return this.#pending.size
  }

  /** Bytes the link holds now (unsent request bodies + unread answer bytes). */
  get buffered(): number {
    return this.#buffered
  }

  /** Send a call to a runner; resolves with its answer (or a named error, `TUNNEL_ERROR`). */
  open(runnerId: string, call: TunnelCall): Promise<TunnelAnswer> {
    const { maxPending, linkBufferBytes } = this.#bounds
    if (this.#pending.size >= maxPending) {
      return Promise.resolve(tunnelError('tunnel_saturated', `runner ${runnerId} has ${maxPending} calls in flight (bound); retry later`))
    }
    const features = this.#port.features(runnerId)
    if (!features) return Promise.resolve(tunnelError('runner_not_connected', `runner ${runnerId} is not connected`))
    if (this.#pending.has(call.request_id)) return Promise.resolve(tunnelError('runner_error', `request id ${call.request_id} is in use`))
    const requestId = call.request_id
    const headers: Record<string, string> = {}
    for (const [key, value] of Object.entries(call.headers)) if (!HOP_HEADERS.has(key.toLowerCase())) headers[key] = value
    const credit = features.binary && features.credit
    const source = call.body ?? ''
    const bytes = features.binary ? payloadBytes(source) : null
    if (bytes && credit && this.#buffered + bytes.byteLength > linkBufferBytes) {
      return Promise.resolve(
        tunnelError(
          'tunnel_buffer_full',
          `runner ${runnerId}'s link holds ${this.#buffered} bytes (bound ${linkBufferBytes}); retry later`,
        ),
      )
    }
    // Under credit the first frame carries at most one window; the rest goes out as credit comes back.
    const chunks: Payload[] = bytes
      ? credit
        ? [bytes.subarray(0, Math.min(TUNNEL_FRAME_BYTES, features.windowBytes))]
        : chunkBytes(bytes, TUNNEL_FRAME_BYTES)
      : chunkText(typeof source === 'string' ? source : new TextDecoder().decode(source))
    const first = chunks[0] ?? ''
    return new Promise<TunnelAnswer>((resolve) => {
      const now = Date.now()
      const pending: Pending = {
        runnerId,
        credit,
        windowBytes: features.windowBytes,
        deadline: now + call.timeout_ms,
        timeoutMs: call.timeout_ms,
        head: resolve,
        answer: null,
        upload: null,
      }
      if (credit && bytes) {
        const window = new CreditWindow(features.windowBytes)
        window.spend(payloadLength(first))
        // The body is held until all of it is sent.
        pending.upload = { body: bytes, offset: payloadLength(first), window, held: bytes.byteLength }
        this.#hold(bytes.byteLength)
      }
      this.#pending.set(requestId, pending)
      this.#arm(pending.deadline)
      const sent = this.#port.send(runnerId, {
        type: 'tunnel.request',
        request_id: requestId,
        method: call.method,
        path: call.path,
        headers,
        body: first,
        more: pending.upload ? pending.upload.offset < pending.upload.body.byteLength : chunks.length > 1,
        timeout_ms: call.timeout_ms,
      })
      if (!sent) {
        this.#finish(requestId)
        resolve(tunnelError('runner_not_connected', `runner ${runnerId} is not connected`))
        return
      }
      if (pending.upload) {
        this.#noteUnacked(pending.upload)
        if (pending.upload.offset >= pending.upload.body.byteLength) this.#releaseUpload(pending.upload)
        else this.#pump(requestId, pending.upload)
        return
      }
      for (let i = 1; i < chunks.length; i++) {
        this.#port.send(runnerId, { type: 'tunnel.body', request_id: requestId, data: chunks[i] as Payload, more: i < chunks.length - 1 })
      }
    })
  }

  /** The caller gave up on a call (client gone): the runner aborts its engine call. */
  cancel(requestId: string, reason: string): void {
    this.#cancel(requestId, reason, 'client_disconnected', reason)
  }

  /** A frame from the runner. Returns false when the request is unknown (finished or cancelled). */
  onMessage(runnerId: string, message: AnswerFrame): boolean {
    const pending = this.#pending.get(message.request_id)
    if (!pending || pending.runnerId !== runnerId) return false
    switch (message.type) {
      case 'tunnel.head':
        return this.#onHead(pending, message)
      case 'tunnel.chunk': {
        if (!pending.answer) return false
        this.#receive(message.request_id, pending, message.data, !message.more)
        return true
      }
      case 'tunnel.credit': {
        const upload = pending.upload
        if (!upload) return false
        this.stats.credits_received++
        upload.window.grant(message.bytes)
        this.#pump(message.request_id, upload)
        return true
      }
      case 'tunnel.error': {
        this.#fail(message.request_id, 'runner_error', `runner: ${message.message}`)
        return true
      }
    }
  }

  /** The runner is gone: fail everything it was answering. */
  failRunner(runnerId: string, reason: string): void {
    for (const [requestId, pending] of this.#pending) {
      if (pending.runnerId === runnerId) this.#fail(requestId, 'runner_lost', `runner ${runnerId} lost: ${reason}`)
    }
  }

  #onHead(pending: Pending, message: Extract<AnswerFrame, { type: 'tunnel.head' }>): boolean {
    const resolve = pending.head
    if (!resolve) return false
    pending.head = null
    const { runnerId } = pending
    const requestId = message.request_id
    const headers: Record<string, string> = {}
    const invalid = invalidHead(message, headers)
    if (invalid) {
      // A head no HTTP response can have: the call is answered at once (a provider-shaped 502 at the Worker).
      this.#port.send(runnerId, { type: 'tunnel.cancel', request_id: requestId, reason: `invalid tunnel.head: ${invalid}` })
      this.#finish(requestId)
      resolve(tunnelError('runner_invalid_head', `runner ${runnerId} sent an invalid response head: ${invalid}`))
      return true
    }
    const body = typeof message.body === 'string' ? encoder.encode(message.body) : message.body
    if (message.more && this.#buffered + body.byteLength > this.#bounds.linkBufferBytes) {
      this.#port.send(runnerId, { type: 'tunnel.cancel', request_id: requestId, reason: 'link buffer full' })
      this.#finish(requestId)
      resolve(
        tunnelError(
          'tunnel_buffer_full',
          `runner ${runnerId}'s link holds ${this.#buffered} bytes (bound ${this.#bounds.linkBufferBytes})`,
        ),
      )
      return true
    }
    if (!message.more) {
      // The whole answer in one frame (the common non-streaming case): no stream needed.
      this.#finish(requestId)
      resolve({ status: message.status, headers, body: NULL_BODY_STATUSES.has(message.status) ? null : body })
      return true
    }
    // The request body is no longer needed once the runner answers.
    this.#dropUpload(pending)
    pending.answer = new CreditedQueue({
      windowBytes: pending.credit ? pending.windowBytes : null,
      capBytes: this.#bounds.v1AnswerQueueBytes,
      taken: (bytes) => this.#release(bytes),
      dropped: (bytes) => this.#release(bytes),
      grant: (bytes) => {
        if (this.#pending.get(requestId) !== pending) return
        this.stats.credits_sent++
        this.#port.send(runnerId, { type: 'tunnel.credit', request_id: requestId, bytes })
      },
      // The consumer stopped reading: the runner can stop too.
      cancel: () => this.#cancel(requestId, 'consumer cancelled', 'client_disconnected', 'the reader cancelled the answer'),
    })
    resolve({ status: message.status, headers, body: pending.answer.stream })
    this.#receive(requestId, pending, body, false)
    return true
  }

  #receive(requestId: string, pending: Pending, payload: Payload, end: boolean): void {
    const answer = pending.answer
    if (!answer) return
    const bytes = typeof payload === 'string' ? encoder.encode(payload) : payload
    const { linkBufferBytes, v1AnswerQueueBytes } = this.#bounds
    if (this.#buffered + bytes.byteLength > linkBufferBytes) {
      this.#cancel(
        requestId,
        'link buffer full',
        'tunnel_buffer_full',
        `runner ${pending.runnerId}'s link holds ${this.#buffered} bytes (bound ${linkBufferBytes})`,
      )
      return
    }
    // Held from here; bytes handed straight to a waiting reader are released at once (`taken`).
    this.#hold(bytes.byteLength)
    const refused = answer.push(bytes, end)
    if (refused) this.#release(bytes.byteLength)
    if (refused === 'window') {
      this.stats.window_violations++
      this.#cancel(
        requestId,
        'credit window exceeded',
        'tunnel_window_exceeded',
        `runner ${pending.runnerId} sent beyond its credit window`,
      )
      return
    }
    if (refused === 'cap') {
      this.#cancel(
        requestId,
        'answer queue full',
        'tunnel_answer_overflow',
        `runner ${pending.runnerId} (no credit) sent more than ${v1AnswerQueueBytes} bytes ahead of the reader`,
      )
      return
    }
    this.stats.max_answer_queued_bytes = Math.max(this.stats.max_answer_queued_bytes, answer.maxQueued)
    if (end) this.#finish(requestId)
  }

  /** Send the request body frames the runner's credit allows. */
  #pump(requestId: string, upload: Upload): void {
    const pending = this.#pending.get(requestId)
    if (!pending || pending.upload !== upload) return
    const total = upload.body.byteLength
    while (upload.offset < total && upload.window.allowance > 0) {
      const size = Math.min(TUNNEL_FRAME_BYTES, upload.window.allowance, total - upload.offset)
      const frame = upload.body.subarray(upload.offset, upload.offset + size)
      upload.offset += size
      upload.window.spend(size)
      const more = upload.offset < total
      if (!more) this.#releaseUpload(upload)
      if (!this.#port.send(pending.runnerId, { type: 'tunnel.body', request_id: requestId, data: frame, more })) return
      this.#noteUnacked(upload)
    }
  }

  #noteUnacked(upload: Upload): void {
    this.stats.max_upload_unacked_bytes = Math.max(this.stats.max_upload_unacked_bytes, upload.window.maxUnacked)
  }

  #hold(bytes: number): void {
    this.#buffered += bytes
    if (this.#buffered > this.stats.max_buffered_bytes) this.stats.max_buffered_bytes = this.#buffered
  }

  #release(bytes: number): void {
    this.#buffered -= bytes
  }

  #releaseUpload(upload: Upload): void {
    this.#release(upload.held)
    upload.held = 0
  }

  #dropUpload(pending: Pending): void {
    if (!pending.upload) return
    this.#releaseUpload(pending.upload)
    pending.upload = null
  }

  /** Arm the link's one deadline timer for `deadline` unless it fires earlier already. */
  #arm(deadline: number): void {
    if (deadline >= this.#timerAt) return
    if (this.#timer) clearTimeout(this.#timer)
    this.#timerAt = deadline
    this.#timer = setTimeout(() => this.#expire(), Math.max(0, deadline - Date.now()))
  }

  #expire(): void {
    this.#timer = null
    this.#timerAt = Number.POSITIVE_INFINITY
    const now = Date.now()
    let next = Number.POSITIVE_INFINITY
    for (const [requestId, pending] of this.#pending) {
      if (pending.deadline <= now) {
        this.#cancel(requestId, 'timeout', 'tunnel_timeout', `runner did not answer within ${pending.timeoutMs} ms`)
      } else next = Math.min(next, pending.deadline)
    }
    if (next < Number.POSITIVE_INFINITY) this.#arm(next)
  }

  #cancel(requestId: string, reason: string, code: TunnelErrorCode, detail: string): void {
    const pending = this.#pending.get(requestId)
    if (!pending) return
    this.#port.send(pending.runnerId, { type: 'tunnel.cancel', request_id: requestId, reason })
    this.#fail(requestId, code, detail)
  }

  #fail(requestId: string, code: TunnelErrorCode, detail: string): void {
    const pending = this.#pending.get(requestId)
    if (!pending) return
    this.#finish(requestId)
    if (pending.head) pending.head(tunnelError(code, detail))
    else pending.answer?.fail(namedError(code, detail))
  }

  #finish(requestId: string): void {
    const pending = this.#pending.get(requestId)
    if (!pending) return
    this.#dropUpload(pending)
    // An answer's unread bytes stay held until its reader takes them (`taken`) or they are dropped (`dropped`).
    this.#pending.delete(requestId)
    if (this.#pending.size === 0 && this.#timer) {
      clearTimeout(this.#timer)
      this.#timer = null
      this.#timerAt = Number.POSITIVE_INFINITY
    }
  }
}
