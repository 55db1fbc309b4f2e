/**
 * @module
 * The edge side of the inference tunnel: turns one HTTP request into framed messages on a runner's
 * WebSocket and the runner's answer frames back into a streaming `Response`. In-flight requests live
 * in memory (a Durable Object is not evicted while a request is in flight); a lost runner fails its
 * requests at once.
 *
 * Bounded: every request has a deadline; a client that goes away (abort signal) or stops reading
 * (stream cancel) sends `tunnel.cancel` so the runner aborts its engine call.
 */
import { chunkText, type EdgeMessage, type RunnerMessage } from '../../contract/runner-protocol.ts'

/** Header the Worker sets to bound a tunnelled request (milliseconds). */
export const TUNNEL_TIMEOUT_HEADER = 'x-rollgate-timeout-ms'
/** Upper bound on concurrent tunnelled requests per runner link (each holds a stream and a timer). */
export const MAX_PENDING_REQUESTS = 4_096
/** Headers that describe the hop, not the request; never forwarded. */
const HOP_HEADERS = new Set(['connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'host', 'content-length', 'cf-connecting-ip'])

export interface TunnelRequest {
  method: string
  path: string
  headers: Headers
  body: string
  timeoutMs: number
  signal: AbortSignal
}

interface Pending {
  runnerId: string
  head: { resolve(response: Response): void; reject(error: Error): void } | null
  controller: ReadableStreamDefaultController<Uint8Array> | null
  timer: ReturnType<typeof setTimeout>
  detach: () => void
}

function errorResponse(status: number, message: string): Response {
  return Response.json({ error: { message, type: 'tunnel_error', code: status } }, { status })
}

/** Statuses whose responses carry no body (the Response constructor refuses one). */
const NULL_BODY_STATUSES = new Set([204, 205, 304])

/** Why a runner's `tunnel.head` cannot become a Response (null when it can); fills `headers` on the way. */
function invalidHead(message: Extract<RunnerMessage, { type: 'tunnel.head' }>, headers: Headers): string | null {
  if (message.status < 200 || message.status > 599) return `status ${message.status} is not a final HTTP status`
  if (NULL_BODY_STATUSES.has(message.status) && (message.body || message.more)) return `status ${message.status} cannot have a body`
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

export class TunnelRequests {
  readonly #send: (runnerId: string, message: EdgeMessage) => boolean
  readonly #pending = new Map<string, Pending>()
  readonly #encoder = new TextEncoder()

  constructor(send: (runnerId: string, message: EdgeMessage) => boolean) {
    this.#send = send
  }

  get size(): number {
    return this.#pending.size
  }

  /** Send a request to a runner; resolves with the runner's response (head first, body streamed). */
  open(runnerId: string, request: TunnelRequest): Promise<Response> {
    if (this.#pending.size >= MAX_PENDING_REQUESTS) return Promise.resolve(errorResponse(503, 'tunnel saturated'))
    if (request.signal.aborted) return Promise.resolve(errorResponse(499, 'client disconnected'))
    const requestId = crypto.randomUUID()
    const headers: Record<string, string> = {}
    request.headers.forEach((value, key) => {
      if (!HOP_HEADERS.has(key.toLowerCase())) headers[key] = value
    })
    const chunks = chunkText(request.body)
    return new Promise<Response>((resolve, reject) => {
      const onAbort = () => this.#cancel(requestId, 'client disconnected', new Error('client disconnected'))
      const pending: Pending = {
        runnerId,
        head: { resolve, reject },
        controller: null,
        timer: setTimeout(
          () => this.#cancel(requestId, 'timeout', new Error(`runner did not answer within ${request.timeoutMs} ms`)),
          request.timeoutMs,
        ),
        detach: () => request.signal.removeEventListener('abort', onAbort),
      }
      this.#pending.set(requestId, pending)
      request.signal.addEventListener('abort', onAbort)
      const first = this.#send(runnerId, {
        type: 'tunnel.request',
        request_id: requestId,
        method: request.method,
        path: request.path,
        headers,
        body: chunks[0] ?? '',
        more: chunks.length > 1,
        timeout_ms: request.timeoutMs,
      })
      if (!first) {
        this.#finish(requestId)
        resolve(errorResponse(503, `runner ${runnerId} is not connected`))
        return
      }
      for (let i = 1; i < chunks.length; i++) {
        this.#send(runnerId, { type: 'tunnel.body', request_id: requestId, data: chunks[i] as string, more: i < chunks.length - 1 })
      }
    })
  }

  /** A frame from the runner. Returns false when the request is unknown (finished or cancelled). */
  onMessage(runnerId: string, message: Extract<RunnerMessage, { type: 'tunnel.head' | 'tunnel.chunk' | 'tunnel.error' }>): boolean {
    const pending = this.#pending.get(message.request_id)
    if (!pending || pending.runnerId !== runnerId) return false
    switch (message.type) {
      case 'tunnel.head': {
        const head = pending.head
        if (!head) return false
        pending.head = null
        const requestId = message.request_id
        const headers = new Headers()
        const invalid = invalidHead(message, headers)
        if (invalid) {
          // A head no HTTP response can have: the call is answered at once (a provider-shaped 502 at the Worker).
          this.#send(runnerId, { type: 'tunnel.cancel', request_id: requestId, reason: `invalid tunnel.head: ${invalid}` })
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
        const body = new ReadableStream<Uint8Array>({
          start: (controller) => {
            pending.controller = controller
            if (message.body) controller.enqueue(this.#encoder.encode(message.body))
          },
          cancel: () => {
            // The consumer stopped reading: the runner can stop too.
            if (this.#pending.has(requestId)) {
              this.#send(runnerId, { type: 'tunnel.cancel', request_id: requestId, reason: 'consumer cancelled' })
              this.#finish(requestId)
            }
          },
        })
        head.resolve(new Response(body, { status: message.status, headers }))
        return true
      }
      case 'tunnel.chunk': {
        const controller = pending.controller
        if (!controller) return false
        if (message.data) controller.enqueue(this.#encoder.encode(message.data))
        if (!message.more) {
          controller.close()
          this.#finish(message.request_id)
        }
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

  #cancel(requestId: string, reason: string, error: Error): void {
    const pending = this.#pending.get(requestId)
    if (!pending) return
    this.#send(pending.runnerId, { type: 'tunnel.cancel', request_id: requestId, reason })
    this.#fail(requestId, error)
  }

  #fail(requestId: string, error: Error): void {
    const pending = this.#pending.get(requestId)
    if (!pending) return
    this.#finish(requestId)
    if (pending.head) pending.head.reject(error)
    else if (pending.controller) {
      try {
        pending.controller.error(error)
      } catch {
        // already closed
      }
    }
  }

  #finish(requestId: string): void {
    const pending = this.#pending.get(requestId)
    if (!pending) return
    clearTimeout(pending.timer)
    pending.detach()
    this.#pending.delete(requestId)
  }
}
