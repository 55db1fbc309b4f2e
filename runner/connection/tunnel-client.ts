/**
 * @module
 * The runner's end of the inference tunnel: answers `tunnel.request` (+ `tunnel.body`) frames from the local
 * engine and streams the answer back as `tunnel.head` + `tunnel.chunk` frames (SSE forwarded as it arrives,
 * other bodies coalesced into frames of at most `TUNNEL_CHUNK_CHARS`), or `tunnel.error`. `tunnel.cancel`
 * aborts the engine call; a lost connection aborts them all.
 *
 * Backpressure both ways: a request body being received is bounded (`maxBodyChars`, beyond → `tunnel.error`),
 * and the engine's answer is read only as fast as the WebSocket drains (`flushed()` before each read), so a
 * slow edge link stalls the engine's TCP stream rather than buffering frames without bound.
 */
import { chunkText, type EdgeMessage, type RunnerMessageInput, TUNNEL_CHUNK_CHARS } from '../../src/contract/runner-protocol.ts'

export interface TunnelPort {
  send(message: RunnerMessageInput): boolean
  /** Resolves when the link can take more (below its high-water mark). */
  flushed(signal?: AbortSignal): Promise<void>
}

export interface TunnelClientOptions {
  /** Base URL of the local engine; null: this runner serves no model (every request gets `tunnel.error`). */
  upstreamUrl: string | null
  port: TunnelPort
  /** Largest request body accepted (characters), default 64 Mi. */
  maxBodyChars?: number
  log?(event: string, fields?: Record<string, unknown>): void
}

interface PendingRequest {
  method: string
  path: string
  headers: Record<string, string>
  body: string[]
  size: number
  timeoutMs: number
}

/** Hop-by-hop and length headers never forwarded (fetch sets its own). */
const DROP_HEADERS = new Set(['host', 'connection', 'content-length', 'transfer-encoding', 'keep-alive', 'upgrade', 'accept-encoding'])

export class TunnelClient {
  readonly options: TunnelClientOptions
  readonly #receiving = new Map<string, PendingRequest>()
  readonly #inflight = new Map<string, AbortController>()
  readonly stats = { requests: 0, errors: 0, cancels: 0, framesOut: 0, bytesOut: 0, maxInflight: 0 }

  constructor(options: TunnelClientOptions) {
    this.options = options
  }

  get inflight(): number {
    return this.#inflight.size
  }

  onMessage(message: Extract<EdgeMessage, { type: 'tunnel.request' | 'tunnel.body' | 'tunnel.cancel' }>): void {
    if (message.type === 'tunnel.cancel') {
      this.stats.cancels++
      this.#receiving.delete(message.request_id)
      this.#inflight.get(message.request_id)?.abort(message.reason)
      this.#inflight.delete(message.request_id)
      return
    }
    let pending = this.#receiving.get(message.request_id)
    if (message.type === 'tunnel.request') {
      pending = {
        method: message.method,
        path: message.path,
        headers: message.headers,
        body: [message.body],
        size: message.body.length,
        timeoutMs: message.timeout_ms,
      }
    } else if (pending) {
      pending.body.push(message.data)
      pending.size += message.data.length
    } else {
      return // body of a cancelled or unknown request
    }
    if (pending.size > (this.options.maxBodyChars ?? 64 * 1024 * 1024)) {
      this.#receiving.delete(message.request_id)
      this.#send({ type: 'tunnel.error', request_id: message.request_id, message: 'request body too large for this runner' })
      return
    }
    if (message.more) {
      this.#receiving.set(message.request_id, pending)
      return
    }
    this.#receiving.delete(message.request_id)
    void this.#forward(message.request_id, pending)
  }

  /** The link went away: abort every engine call (the edge fails them on its side). */
  abortAll(reason: string): void {
    this.#receiving.clear()
    for (const controller of this.#inflight.values()) controller.abort(reason)
    this.#inflight.clear()
  }

  #send(message: RunnerMessageInput): boolean {
    const sent = this.options.port.send(message)
    if (sent) {
      this.stats.framesOut++
      if (message.type === 'tunnel.chunk') this.stats.bytesOut += message.data.length
      if (message.type === 'tunnel.head') this.stats.bytesOut += (message.body ?? '').length
    }
    return sent
  }

  async #forward(requestId: string, call: PendingRequest): Promise<void> {
    this.stats.requests++
    const { upstreamUrl } = this.options
    if (!upstreamUrl) {
      this.stats.errors++
      this.#send({ type: 'tunnel.error', request_id: requestId, message: 'this runner serves no model (no --upstream)' })
      return
    }
    const controller = new AbortController()
    this.#inflight.set(requestId, controller)
    this.stats.maxInflight = Math.max(this.stats.maxInflight, this.#inflight.size)
    const headers: Record<string, string> = {}
    for (const [key, value] of Object.entries(call.headers)) if (!DROP_HEADERS.has(key.toLowerCase())) headers[key] = value
    try {
      const response = await fetch(`${upstreamUrl.replace(/\/$/, '')}${call.path}`, {
        method: call.method,
        headers,
        ...(call.method === 'GET' || call.method === 'HEAD' ? {} : { body: call.body.join('') }),
        signal: AbortSignal.any([controller.signal, AbortSignal.timeout(Math.max(1, call.timeoutMs))]),
      })
      const responseHeaders: Record<string, string> = {}
      response.headers.forEach((value, key) => {
        if (!DROP_HEADERS.has(key) && key !== 'content-encoding') responseHeaders[key] = value
      })
      const streaming = (response.headers.get('content-type') ?? '').includes('text/event-stream')
      const reader = response.body?.pipeThrough(new TextDecoderStream()).getReader()
      let headSent = false
      let pending = ''
      const emit = (text: string, more: boolean): boolean => {
        if (controller.signal.aborted) return false
        const ok = headSent
          ? this.#send({ type: 'tunnel.chunk', request_id: requestId, data: text, more })
          : this.#send({ type: 'tunnel.head', request_id: requestId, status: response.status, headers: responseHeaders, body: text, more })
        headSent = true
        if (!ok) controller.abort('link closed')
        return ok
      }
      for (;;) {
        // Read only as fast as the link drains.
        await this.options.port.flushed(controller.signal)
        if (controller.signal.aborted) return
        const { value, done } = reader ? await reader.read() : { value: undefined, done: true }
        if (done) break
        pending += value
        if (pending.length > TUNNEL_CHUNK_CHARS) {
          const parts = chunkText(pending)
          pending = parts.pop() ?? ''
          for (const part of parts) if (!emit(part, true)) return
        }
        if (streaming && pending) {
          if (!emit(pending, true)) return
          pending = ''
        }
      }
      emit(pending, false)
    } catch (error) {
      if (controller.signal.aborted) return
      this.stats.errors++
      const reason = error instanceof Error ? `${error.name === 'TimeoutError' ? 'engine timeout: ' : ''}${error.message}` : String(error)
      this.#send({ type: 'tunnel.error', request_id: requestId, message: `local engine: ${reason}` })
      this.options.log?.('tunnel.error', { request_id: requestId, error: reason })
    } finally {
      this.#inflight.delete(requestId)
    }
  }
}
