/**
 * @module
 * A scripted runner for integration tests and benchmarks: speaks the runner protocol
 * (`src/contract/runner-protocol.ts`) over a real WebSocket (`ws`) to the edge, sends heartbeats with
 * stage metrics, answers tunnelled engine calls from a local engine (streaming its body back as it
 * arrives, aborting on `tunnel.cancel`), and reconnects with bounded backoff, re-registering the
 * sessions it still holds. What it does with assignments is up to the test (`next('assign')`,
 * `report`, `finish`).
 *
 * Its tunnel speaks plain protocol v1 (JSON frames, no flow control) by default, like a runner that predates
 * `tunnel.binary` / `tunnel.credit`; `tunnel: 'credit'` asks for both and answers with the real runner's
 * `TunnelClient` instead.
 */
import WebSocket from 'ws'
import { rawFraming, sendTunnelFrame, unmaskedOk, zeroMask } from '../../runner/connection/edge-connection.ts'
import { negotiatedFeatures, TUNNEL_CLIENT_CAPABILITIES, TunnelClient, type TunnelFeatures } from '../../runner/connection/tunnel-client.ts'
import type { StageMetrics } from '../../src/contract/rollout.ts'
import {
  type EdgeMessage,
  edgeMessageSchema,
  RUNNER_PROTOCOL_VERSION,
  RUNNER_SECRET_HEADER,
  type RunnerCapacity,
  type RunnerMessageInput,
  type SessionAssignment,
  TUNNEL_CHUNK_CHARS,
} from '../../src/contract/runner-protocol.ts'
import { decodeEdgeFrame, type RunnerBodyFrame } from '../../src/contract/tunnel-frames.ts'

const WAIT_MS = 10_000
const RECONNECT_MIN_MS = 100
const RECONNECT_MAX_MS = 1_000
/** Reconnection attempts before the client gives up (bounded: ~60 s at the max delay). */
const MAX_RECONNECTS = 60

export type HeldStatus = 'ASSIGNED' | 'INITIALIZING' | 'READY' | 'RUNNING'

export interface RunnerClientOptions {
  edgeUrl: string
  token: string
  runnerId: string
  capacity?: RunnerCapacity
  /** Base URL of the local engine answering tunnelled calls; null serves no model. */
  engineUrl: string | null
  servedModel?: string
  /** Reconnect after an unexpected close (default true). */
  reconnect?: boolean
  /** The per-runner secret from an earlier enrolment (kept from `registered.runner_secret` otherwise). */
  secret?: string
  /** `v1` (default): plain JSON tunnel frames; `credit`: binary frames + credits via the runner's `TunnelClient`. */
  tunnel?: 'v1' | 'credit'
  /** Offer permessage-deflate (the `ws` default, and what runners did before; the real runner no longer does). */
  deflate?: boolean
}

export class RunnerClient {
  readonly options: RunnerClientOptions
  readonly held = new Map<string, HeldStatus>()
  readonly assignments = new Map<string, SessionAssignment>()
  /** Every message received, in order (for assertions). */
  readonly received: EdgeMessage[] = []
  readonly stats = { tunnelRequests: 0, tunnelCancels: 0, heartbeats: 0, connects: 0 }
  #ws: WebSocket | null = null
  #queue: EdgeMessage[] = []
  #waiters = new Set<() => void>()
  #heartbeat: ReturnType<typeof setInterval> | null = null
  #inflight = new Map<string, AbortController>()
  #bodies = new Map<string, { method: string; path: string; headers: Record<string, string>; body: string; timeoutMs: number }>()
  #stopped = false
  #reconnects = 0
  /** The per-runner secret: sent on every connection once the edge minted it. */
  secret: string | null
  /** The real runner's tunnel client (answers while `tunnel: 'credit'` is negotiated). */
  readonly tunnel: TunnelClient
  /** What the edge accepted; null: plain v1 (the scripted JSON path answers). */
  #features: TunnelFeatures | null = null
  #mode: 'v1' | 'credit'

  constructor(options: RunnerClientOptions) {
    this.options = options
    this.secret = options.secret ?? null
    this.#mode = options.tunnel ?? 'v1'
    this.tunnel = new TunnelClient({
      upstreamUrl: options.engineUrl,
      port: {
        send: (message) => this.#sendFrame(message),
        flushed: async () => {},
        saturated: () => false,
        sendParts: (frame, rest) => {
          const ws = this.#ws
          if (ws?.readyState !== WebSocket.OPEN) return false
          sendTunnelFrame(ws, frame, rest)
          return true
        },
        features: () => this.#features,
      },
    })
  }

  /** Switch the tunnel mode on the live connection (registers again); resolves once the edge answered. */
  async retune(mode: 'v1' | 'credit'): Promise<void> {
    this.#mode = mode
    this.send(this.#register())
    await this.next('registered')
  }

  #sendFrame(message: RunnerMessageInput | RunnerBodyFrame): boolean {
    const ws = this.#ws
    if (ws?.readyState !== WebSocket.OPEN) return false
    const binary =
      (message.type === 'tunnel.head' && message.body instanceof Uint8Array) ||
      (message.type === 'tunnel.chunk' && message.data instanceof Uint8Array)
    if (binary) sendTunnelFrame(ws, message as RunnerBodyFrame)
    else ws.send(JSON.stringify(message))
    return true
  }

  /** Connect and register; resolves once the edge answered `registered`. */
  async start(): Promise<EdgeMessage & { type: 'registered' }> {
    await this.#open()
    return this.next('registered')
  }

  get connected(): boolean {
    return this.#ws?.readyState === WebSocket.OPEN
  }

  /** Stage metrics derived from what the runner holds. */
  metrics(): StageMetrics {
    const count = (status: HeldStatus) => [...this.held.values()].filter((value) => value === status).length
    return {
      init_queue_depth: count('ASSIGNED'),
      init_inflight: count('INITIALIZING'),
      ready_depth: count('READY'),
      run_inflight: count('RUNNING'),
      postrun_queue_depth: 0,
      postrun_inflight: 0,
    }
  }

  send(message: RunnerMessageInput): void {
    if (this.#ws?.readyState === WebSocket.OPEN) this.#ws.send(JSON.stringify(message))
  }

  /** Acknowledge an assignment. */
  ack(sessionId: string, accepted = true, reason: string | null = null): void {
    this.send({ type: 'ack', session_id: sessionId, accepted, reason })
    if (!accepted) this.held.delete(sessionId)
  }

  report(sessionId: string, status: 'INITIALIZING' | 'READY' | 'RUNNING'): void {
    this.held.set(sessionId, status)
    this.send({ type: 'session.status', session_id: sessionId, status })
  }

  finish(
    sessionId: string,
    agentResult: { status: 'completed' | 'failed' | 'timeout'; return_code?: number | null; error?: string | null },
  ): void {
    this.held.delete(sessionId)
    this.send({ type: 'session.finished', session_id: sessionId, agent_result: agentResult })
  }

  /** The next message of this type (matching `where`), waiting up to `timeoutMs`. */
  async next<T extends EdgeMessage['type']>(
    type: T,
    where: (message: Extract<EdgeMessage, { type: T }>) => boolean = () => true,
    timeoutMs = WAIT_MS,
  ): Promise<Extract<EdgeMessage, { type: T }>> {
    const deadline = Date.now() + timeoutMs
    for (;;) {
      const index = this.#queue.findIndex((message) => message.type === type && where(message as Extract<EdgeMessage, { type: T }>))
      if (index >= 0) return this.#queue.splice(index, 1)[0] as Extract<EdgeMessage, { type: T }>
      const left = deadline - Date.now()
      if (left <= 0) throw new Error(`runner ${this.options.runnerId}: no ${type} within ${timeoutMs} ms`)
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, Math.min(left, 250))
        const waiters = this.#waiters
        function done() {
          clearTimeout(timer)
          waiters.delete(done)
          resolve()
        }
        waiters.add(done)
      })
    }
  }

  /** Take the next assignment of `taskId`, acknowledge it and walk it through `statuses`. */
  async take(
    taskId: string,
    statuses: ('INITIALIZING' | 'READY' | 'RUNNING')[] = ['INITIALIZING', 'READY', 'RUNNING'],
  ): Promise<SessionAssignment> {
    const { session } = await this.next('assign', (message) => message.session.task_id === taskId)
    this.ack(session.session_id)
    for (const status of statuses) this.report(session.session_id, status)
    return session
  }

  /** Simulate a crash: drop the TCP connection without a close frame, and do not come back. */
  crash(): void {
    this.#stopped = true
    this.#stopHeartbeat()
    this.#ws?.terminate()
  }

  /** Leave for good (clean close, "shutdown"): the edge re-dispatches or ends what this runner held. */
  async shutdown(): Promise<void> {
    this.#stopped = true
    this.#stopHeartbeat()
    for (const controller of this.#inflight.values()) controller.abort()
    const ws = this.#ws
    if (!ws || ws.readyState === WebSocket.CLOSED) return
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        ws.terminate()
        resolve()
      }, 2_000)
      ws.once('close', () => {
        clearTimeout(timer)
        resolve()
      })
      ws.close(1000, 'shutdown')
    })
  }

  async #open(): Promise<void> {
    const url = `${this.options.edgeUrl.replace(/^http/, 'ws')}/runners/connect?runner_id=${encodeURIComponent(this.options.runnerId)}`
    const ws = new WebSocket(url, {
      headers: { authorization: `Bearer ${this.options.token}`, ...(this.secret ? { [RUNNER_SECRET_HEADER]: this.secret } : {}) },
      perMessageDeflate: this.options.deflate ?? true,
      // As the real runner does (no deflate = a current runner): no masking work where no intermediary can see the bytes.
      ...(this.options.deflate === false && unmaskedOk(url) ? { generateMask: zeroMask } : {}),
    })
    if (this.options.deflate === false && unmaskedOk(url)) rawFraming(ws)
    this.#ws = ws
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve())
      ws.once('error', reject)
      ws.once('unexpected-response', (request, response) => {
        let body = ''
        response.on('data', (chunk: Buffer) => {
          body += chunk.toString()
        })
        response.on('end', () => {
          request.destroy()
          reject(Object.assign(new Error(`connect: HTTP ${response.statusCode} ${body}`), { status: response.statusCode }))
        })
      })
    })
    this.stats.connects++
    ws.on('message', (data, isBinary) => {
      if (isBinary) {
        const frame = decodeEdgeFrame(data as Buffer)
        if (frame.type === 'tunnel.request') this.stats.tunnelRequests++
        this.tunnel.onMessage(frame)
      } else this.#onMessage(String(data))
    })
    ws.on('close', () => this.#onClose(ws))
    ws.on('error', () => {})
    this.send(this.#register())
  }

  #register(): RunnerMessageInput {
    return {
      type: 'register',
      protocol_version: RUNNER_PROTOCOL_VERSION,
      runner_id: this.options.runnerId,
      capacity: this.options.capacity ?? { max_init_workers: 4, max_run_workers: 4, max_postrun_workers: 4 },
      upstream: this.options.engineUrl ? { model: this.options.servedModel ?? 'Qwen/Qwen3-8B', kind: 'vllm' } : null,
      sessions: [...this.held].map(([session_id, status]) => ({ session_id, status })),
      ...(this.#mode === 'credit' ? { capabilities: TUNNEL_CLIENT_CAPABILITIES } : {}),
    }
  }

  #onClose(ws: WebSocket): void {
    if (this.#ws !== ws) return
    this.#features = null
    this.tunnel.abortAll('connection closed')
    this.#stopHeartbeat()
    for (const controller of this.#inflight.values()) controller.abort()
    this.#inflight.clear()
    if (this.#stopped || this.options.reconnect === false) return
    void this.#reconnect()
  }

  async #reconnect(): Promise<void> {
    while (!this.#stopped && this.#reconnects < MAX_RECONNECTS) {
      this.#reconnects++
      await new Promise((resolve) => setTimeout(resolve, Math.min(RECONNECT_MIN_MS * 2 ** Math.min(this.#reconnects, 4), RECONNECT_MAX_MS)))
      try {
        await this.#open()
        this.#reconnects = 0
        return
      } catch {
        // edge not back yet
      }
    }
  }

  #onMessage(text: string): void {
    const message = edgeMessageSchema.parse(JSON.parse(text))
    this.received.push(message)
    switch (message.type) {
      case 'registered':
        this.#features = this.#mode === 'credit' ? negotiatedFeatures(message) : null
        if (message.runner_secret) this.secret = message.runner_secret
        for (const sessionId of message.drop) this.held.delete(sessionId)
        this.#startHeartbeat(message.heartbeat_interval_ms)
        break
      case 'assign':
        this.held.set(message.session.session_id, 'ASSIGNED')
        this.assignments.set(message.session.session_id, message.session)
        break
      case 'cancel':
        this.held.delete(message.session_id)
        break
      case 'tunnel.request':
      case 'tunnel.body':
        if (!this.#features) {
          this.#onTunnel(message)
          return
        }
        if (message.type === 'tunnel.request') this.stats.tunnelRequests++
        this.tunnel.onMessage(message)
        return
      case 'tunnel.credit':
        this.tunnel.onMessage(message)
        return
      case 'tunnel.cancel':
        this.stats.tunnelCancels++
        this.tunnel.onMessage(message)
        this.#inflight.get(message.request_id)?.abort()
        this.#inflight.delete(message.request_id)
        return
      default:
        break
    }
    this.#queue.push(message)
    for (const wake of [...this.#waiters]) wake()
  }

  #startHeartbeat(intervalMs: number): void {
    this.#stopHeartbeat()
    const beat = () => {
      this.stats.heartbeats++
      this.send({ type: 'heartbeat', metrics: this.metrics() })
    }
    beat()
    this.#heartbeat = setInterval(beat, intervalMs)
  }

  #stopHeartbeat(): void {
    if (this.#heartbeat) clearInterval(this.#heartbeat)
    this.#heartbeat = null
  }

  #onTunnel(message: Extract<EdgeMessage, { type: 'tunnel.request' | 'tunnel.body' }>): void {
    let call = this.#bodies.get(message.request_id)
    if (message.type === 'tunnel.request') {
      call = { method: message.method, path: message.path, headers: message.headers, body: message.body, timeoutMs: message.timeout_ms }
    } else if (call) {
      call.body += message.data
    }
    if (!call) return
    if (message.more) {
      this.#bodies.set(message.request_id, call)
      return
    }
    this.#bodies.delete(message.request_id)
    void this.#forward(message.request_id, call)
  }

  /** Answer one tunnelled request from the local engine, streaming its body back frame by frame. */
  async #forward(
    requestId: string,
    call: { method: string; path: string; headers: Record<string, string>; body: string; timeoutMs: number },
  ): Promise<void> {
    this.stats.tunnelRequests++
    if (!this.options.engineUrl) {
      this.send({ type: 'tunnel.error', request_id: requestId, message: 'this runner serves no model' })
      return
    }
    const controller = new AbortController()
    this.#inflight.set(requestId, controller)
    try {
      const response = await fetch(`${this.options.engineUrl}${call.path}`, {
        method: call.method,
        headers: call.headers,
        ...(call.method === 'GET' || call.method === 'HEAD' ? {} : { body: call.body }),
        signal: AbortSignal.any([controller.signal, AbortSignal.timeout(call.timeoutMs)]),
      })
      const headers: Record<string, string> = {}
      response.headers.forEach((value, key) => {
        headers[key] = value
      })
      const reader = response.body?.pipeThrough(new TextDecoderStream()).getReader()
      // SSE goes out as it arrives; anything else is coalesced into frames as large as allowed.
      const streaming = (response.headers.get('content-type') ?? '').includes('text/event-stream')
      let pending = ''
      let headSent = false
      const flush = (more: boolean) => {
        if (!headSent) {
          this.send({ type: 'tunnel.head', request_id: requestId, status: response.status, headers, body: pending, more })
          headSent = true
        } else {
          this.send({ type: 'tunnel.chunk', request_id: requestId, data: pending, more })
        }
        pending = ''
      }
      for (;;) {
        const { value, done } = reader ? await reader.read() : { value: undefined, done: true }
        if (done) break
        pending += value
        while (pending.length > TUNNEL_CHUNK_CHARS) {
          const rest = pending.slice(TUNNEL_CHUNK_CHARS)
          pending = pending.slice(0, TUNNEL_CHUNK_CHARS)
          flush(true)
          pending = rest
        }
        if (streaming && pending) flush(true)
      }
      flush(false)
    } catch (error) {
      if (!controller.signal.aborted) this.send({ type: 'tunnel.error', request_id: requestId, message: (error as Error).message })
    } finally {
      this.#inflight.delete(requestId)
    }
  }
}
