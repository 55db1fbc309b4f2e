/**
 * @module
 * Helpers for the rollout tests inside workerd: admin calls, a scripted runner speaking the runner
 * protocol over a real WebSocket to the hub Durable Object (through the Worker's `/runners/connect`),
 * and a vLLM-shaped answer for tunnelled engine calls.
 */
import { SELF } from 'cloudflare:test'
import type { TaskStatus } from '../../src/contract/rollout.ts'
import {
  type EdgeMessage,
  edgeMessageSchema,
  RUNNER_PROTOCOL_VERSION,
  RUNNER_SECRET_HEADER,
  type RunnerMessageInput,
} from '../../src/contract/runner-protocol.ts'
import { createSessionToken } from '../../src/contract/session-token.ts'

export const EDGE = 'https://edge.test'
export const ADMIN = { authorization: 'Bearer test-admin-token', 'content-type': 'application/json' }
export const RUNNER_TOKEN = 'test-runner-token'
const WAIT_MS = 5_000
/** Per-runner secrets the edge minted at enrolment (as a runner keeps them in its state dir). */
export const runnerSecrets = new Map<string, string>()

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

export function sessionToken(sessionId: string): Promise<string> {
  return createSessionToken(sessionId, 'test-signing-key')
}

export function taskBody(taskId: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { task_id: taskId, instruction: 'create hello.txt containing hi', agent: { harness: 'qwen_code' }, ...extra }
}

export async function submit(body: Record<string, unknown>, path = '/rollout/task/submit'): Promise<Response> {
  return SELF.fetch(`${EDGE}${path}`, { method: 'POST', headers: ADMIN, body: JSON.stringify(body) })
}

export async function cancelTask(taskId: string): Promise<void> {
  await SELF.fetch(`${EDGE}/rollout/task/${taskId}`, { method: 'DELETE', headers: ADMIN })
}

/** The task's status; `results: false` leaves the results out (a wait that polls it reads no R2 object). */
export async function taskStatus(taskId: string, { results = true }: { results?: boolean } = {}): Promise<TaskStatus> {
  const res = await SELF.fetch(`${EDGE}/rollout/task/${taskId}${results ? '' : '?results=false'}`, { headers: ADMIN })
  if (res.status !== 200) throw new Error(`task status ${res.status}: ${await res.text()}`)
  return (await res.json()) as TaskStatus
}

/** Poll until `check` passes (bounded). */
export async function eventually<T>(check: () => Promise<T>, timeoutMs = WAIT_MS): Promise<T> {
  const deadline = Date.now() + timeoutMs
  let lastError: unknown = new Error('never checked')
  while (Date.now() < deadline) {
    try {
      return await check()
    } catch (error) {
      lastError = error
      await sleep(25)
    }
  }
  throw lastError
}

/** A vLLM chat completion body with token ids and aligned logprobs. */
export function engineAnswer(promptIds: number[], tokenIds: number[], content = 'done'): string {
  return JSON.stringify({
    id: 'chatcmpl-test',
    object: 'chat.completion',
    created: 1760000000,
    model: 'Qwen/Qwen3-8B',
    prompt_token_ids: promptIds,
    choices: [
      {
        index: 0,
        message: { role: 'assistant', content, reasoning: null, tool_calls: [] },
        logprobs: { content: tokenIds.map((id, i) => ({ token: `t${id}`, logprob: -(i + 1) / 8, bytes: [116], top_logprobs: [] })) },
        finish_reason: 'stop',
        stop_reason: null,
        token_ids: tokenIds,
      },
    ],
    usage: { prompt_tokens: promptIds.length, completion_tokens: tokenIds.length, total_tokens: promptIds.length + tokenIds.length },
  })
}

export interface TunnelCall {
  request_id: string
  method: string
  path: string
  headers: Record<string, string>
  body: string
}

type TunnelHandler = (call: TunnelCall) => { status: number; body: string; chunkChars?: number } | null

/** A scripted runner over a real WebSocket to the hub. */
export class TestRunner {
  readonly runnerId: string
  readonly ws: WebSocket
  readonly received: EdgeMessage[] = []
  readonly #queue: EdgeMessage[] = []
  readonly #waiters = new Set<() => void>()
  readonly #bodies = new Map<string, TunnelCall>()
  #tunnel: TunnelHandler | null = null
  closed = false
  closeCode: number | null = null

  private constructor(runnerId: string, ws: WebSocket) {
    this.runnerId = runnerId
    this.ws = ws
    // Binary frames (tunnel.binary) are left to tests that asked for them.
    ws.addEventListener('message', (event) => {
      if (typeof event.data === 'string') this.#onMessage(event.data)
    })
    ws.addEventListener('close', (event) => {
      this.closeCode = event.code
      this.closed = true
      this.#wake()
    })
  }

  /** Open a runner connection; sends the runner's stored secret (`secret` overrides; null sends none). */
  static async connect(runnerId: string, token = RUNNER_TOKEN, secret: string | null | undefined = undefined): Promise<TestRunner> {
    const presented = secret === undefined ? runnerSecrets.get(runnerId) : secret
    const res = await SELF.fetch(`${EDGE}/runners/connect?runner_id=${runnerId}`, {
      headers: {
        upgrade: 'websocket',
        authorization: `Bearer ${token}`,
        ...(presented ? { [RUNNER_SECRET_HEADER]: presented } : {}),
      },
    })
    const ws = res.webSocket
    if (res.status !== 101 || !ws) throw new Error(`connect ${res.status}: ${await res.text()}`)
    ws.accept()
    return new TestRunner(runnerId, ws)
  }

  /** Connect and register with the given capacity (defaults: 4/2/4, serves Qwen/Qwen3-8B). */
  static async start(runnerId: string, options: Partial<Extract<RunnerMessageInput, { type: 'register' }>> = {}): Promise<TestRunner> {
    const runner = await TestRunner.connect(runnerId)
    runner.send({
      type: 'register',
      protocol_version: RUNNER_PROTOCOL_VERSION,
      runner_id: runnerId,
      capacity: { max_init_workers: 4, max_run_workers: 2, max_postrun_workers: 4 },
      upstream: { model: 'Qwen/Qwen3-8B', kind: 'vllm' },
      ...options,
    })
    await runner.next('registered')
    return runner
  }

  send(message: RunnerMessageInput): void {
    this.ws.send(JSON.stringify(message))
  }

  /** Answer tunnelled engine calls with `handler` (null → no answer). */
  serveTunnel(handler: TunnelHandler): void {
    this.#tunnel = handler
  }

  /** The next message of this type (and matching `where`), waiting up to `timeoutMs`. */
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
      if (left <= 0 || this.closed)
        throw new Error(`runner ${this.runnerId}: no ${type} within ${timeoutMs} ms (got ${this.received.map((m) => m.type).join(',')})`)
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, left)
        function done() {
          clearTimeout(timer)
          resolve()
        }
        this.#waiters.add(done)
      })
    }
  }

  /** Acknowledge the next assignment of `taskId` and walk it to RUNNING (or through `statuses`). */
  async takeAssignment(taskId: string, statuses: ('INITIALIZING' | 'READY' | 'RUNNING')[] = ['INITIALIZING', 'READY', 'RUNNING']) {
    const { session } = await this.next('assign', (message) => message.session.task_id === taskId)
    this.send({ type: 'ack', session_id: session.session_id, accepted: true })
    for (const status of statuses) this.send({ type: 'session.status', session_id: session.session_id, status })
    return session
  }

  close(code = 1000, reason = 'shutdown'): void {
    try {
      this.ws.close(code, reason)
    } catch {
      // closed
    }
  }

  #onMessage(text: string): void {
    const message = edgeMessageSchema.parse(JSON.parse(text))
    this.received.push(message)
    if (message.type === 'registered' && message.runner_secret) runnerSecrets.set(this.runnerId, message.runner_secret)
    if (message.type === 'tunnel.request' || message.type === 'tunnel.body') {
      this.#onTunnel(message)
      return
    }
    this.#queue.push(message)
    this.#wake()
  }

  #onTunnel(message: Extract<EdgeMessage, { type: 'tunnel.request' | 'tunnel.body' }>): void {
    const call =
      message.type === 'tunnel.request'
        ? { request_id: message.request_id, method: message.method, path: message.path, headers: message.headers, body: message.body }
        : this.#bodies.get(message.request_id)
    if (!call) return
    if (message.type === 'tunnel.body') call.body += message.data
    if (message.more) {
      this.#bodies.set(call.request_id, call)
      return
    }
    this.#bodies.delete(call.request_id)
    const answer = this.#tunnel?.(call)
    if (!answer) return
    const size = answer.chunkChars ?? answer.body.length
    const parts: string[] = []
    for (let offset = 0; offset < answer.body.length; offset += Math.max(1, size)) parts.push(answer.body.slice(offset, offset + size))
    this.send({
      type: 'tunnel.head',
      request_id: call.request_id,
      status: answer.status,
      headers: { 'content-type': 'application/json' },
      body: parts[0] ?? '',
      more: parts.length > 1,
    })
    for (let i = 1; i < parts.length; i++) {
      this.send({ type: 'tunnel.chunk', request_id: call.request_id, data: parts[i] as string, more: i < parts.length - 1 })
    }
  }

  #wake(): void {
    for (const wake of [...this.#waiters]) {
      this.#waiters.delete(wake)
      wake()
    }
  }
}
