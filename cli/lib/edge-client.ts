/**
 * @module
 * A small typed client of the edge's admin and rollout API, shared by the `rollgate` commands and the
 * demo. Errors carry the edge's own message (`{error: {message}}` in OpenAI shape) and the HTTP status.
 */
import type { RolloutStatus, RunnerList, TaskRequestInput, TaskStatus, TaskSubmitResponse } from '../../src/contract/rollout.ts'

export class EdgeError extends Error {
  readonly status: number
  readonly body: unknown
  constructor(status: number, message: string, body: unknown) {
    super(message)
    this.name = 'EdgeError'
    this.status = status
    this.body = body
  }
}

export interface EdgeClientOptions {
  edge: string
  adminToken: string
  /** Per-request timeout (default 60 s). */
  timeoutMs?: number
}

/** What `GET /v1/sessions/:id/trajectory` is asked for. */
export interface ExportRequest {
  /** Absent: a rollout session's own (its task's, the one its rewards belong to), else prefix_merging. */
  builder?: string | undefined
  format: string
  config?: Record<string, unknown>
}

export interface GateStatus {
  paused: boolean
  inflight: number
  policy_version: string | number | null
  [key: string]: unknown
}

export class EdgeClient {
  readonly edge: string
  readonly #token: string
  readonly #timeoutMs: number

  constructor(options: EdgeClientOptions) {
    this.edge = options.edge.replace(/\/+$/, '')
    this.#token = options.adminToken
    this.#timeoutMs = options.timeoutMs ?? 60_000
  }

  /** Raw request with the admin bearer; throws EdgeError on a non-2xx answer. */
  async request(method: string, path: string, body?: unknown, accept = 'application/json', signal?: AbortSignal): Promise<Response> {
    let response: Response
    try {
      response = await fetch(`${this.edge}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${this.#token}`,
          accept,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        signal: signal ?? AbortSignal.timeout(this.#timeoutMs),
      })
    } catch (error) {
      const cause = (error as { cause?: { code?: string } }).cause?.code ?? (error as Error).message
      throw new EdgeError(0, `edge unreachable at ${this.edge} (${cause})`, null)
    }
    if (!response.ok) {
      const text = await response.text()
      let parsed: unknown = text
      try {
        parsed = JSON.parse(text)
      } catch {}
      const message = (parsed as { error?: { message?: string } })?.error?.message ?? (text.slice(0, 300) || response.statusText)
      throw new EdgeError(response.status, `${method} ${path} → ${response.status}: ${message}`, parsed)
    }
    return response
  }

  async json<T>(method: string, path: string, body?: unknown): Promise<T> {
    return (await (await this.request(method, path, body)).json()) as T
  }

  submitTask(task: TaskRequestInput): Promise<TaskSubmitResponse> {
    return this.json('POST', '/rollout/task/submit', task)
  }

  taskStatus(taskId: string, results = true): Promise<TaskStatus> {
    return this.json('GET', `/rollout/task/${encodeURIComponent(taskId)}${results ? '' : '?results=false'}`)
  }

  cancelTask(taskId: string): Promise<Record<string, unknown>> {
    return this.json('DELETE', `/rollout/task/${encodeURIComponent(taskId)}`)
  }

  rolloutStatus(): Promise<RolloutStatus> {
    return this.json('GET', '/rollout/status')
  }

  /** `GET /rollout/runners`: every runner id the edge knows (registered, enrolled, or drained by an admin). */
  runners(): Promise<RunnerList> {
    return this.json('GET', '/rollout/runners')
  }

  /** Admin drain (a cordon until `resumeRunner`); EdgeError 404 for an id the edge has never seen. */
  drainRunner(runnerId: string): Promise<{ runner_id: string; draining: boolean }> {
    return this.json('DELETE', `/rollout/runners/${encodeURIComponent(runnerId)}`)
  }

  /** Undo an admin drain; `draining` stays true while the runner drains itself (SIGTERM). */
  resumeRunner(runnerId: string): Promise<{ runner_id: string; draining: boolean }> {
    return this.json('POST', `/rollout/runners/${encodeURIComponent(runnerId)}/resume`)
  }

  session(sessionId: string): Promise<Record<string, unknown>> {
    return this.json('GET', `/v1/sessions/${encodeURIComponent(sessionId)}`)
  }

  /** Every completion record of a session, page by page. */
  async *completions(sessionId: string, pageSize = 100): AsyncGenerator<Record<string, unknown>> {
    let after: number | null = null
    for (;;) {
      const query = new URLSearchParams({ limit: String(pageSize) })
      if (after !== null) query.set('after_seq', String(after))
      const page = await this.json<{ completions: Record<string, unknown>[]; next_after_seq?: number | null }>(
        'GET',
        `/v1/sessions/${encodeURIComponent(sessionId)}/completions?${query}`,
      )
      for (const record of page.completions) yield record
      if (page.next_after_seq === undefined || page.next_after_seq === null || page.completions.length === 0) return
      after = page.next_after_seq
    }
  }

  /** A trajectory or export as the edge renders it (JSON or NDJSON text), whole: small sessions. */
  async exportText(sessionId: string, options: ExportRequest): Promise<string> {
    let text = ''
    const decoder = new TextDecoder()
    for await (const chunk of this.exportStream(sessionId, options)) text += decoder.decode(chunk, { stream: true })
    return text + decoder.decode()
  }

  /**
   * A trajectory or export as the edge renders it, chunk by chunk, without the leading whitespace the edge
   * sends before the build (its first byte at once). A long session's export is hundreds of MB, past what
   * one string holds, and takes longer than one request's timeout: the timeout bounds the wait for the
   * answer and then for each next chunk, not the whole transfer.
   */
  async *exportStream(sessionId: string, options: ExportRequest, onHeaders?: (headers: Headers) => void): AsyncGenerator<Uint8Array> {
    const query = new URLSearchParams({ ...(options.builder ? { builder: options.builder } : {}), format: options.format })
    if (options.config) query.set('config', JSON.stringify(options.config))
    yield* this.#chunks(`/v1/sessions/${encodeURIComponent(sessionId)}/trajectory?${query}`, '*/*', true, onHeaders)
  }

  /**
   * A task's `TaskStatus` with its results (every session's `SessionResult`, tens of MB each for long
   * sessions) as the edge streams it, chunk by chunk (the timeout as in `exportStream`).
   */
  taskResultStream(taskId: string): AsyncGenerator<Uint8Array> {
    return this.#chunks(`/rollout/task/${encodeURIComponent(taskId)}`, 'application/json', false)
  }

  /** The body of `GET path` chunk by chunk; the timeout bounds the wait for the answer, then for each chunk. */
  async *#chunks(
    path: string,
    accept: string,
    skipLeadingSpace: boolean,
    onHeaders?: (headers: Headers) => void,
  ): AsyncGenerator<Uint8Array> {
    const controller = new AbortController()
    let timer = setTimeout(() => controller.abort(), this.#timeoutMs)
    try {
      const response = await this.request('GET', path, undefined, accept, controller.signal)
      onHeaders?.(response.headers)
      const reader = (response.body as ReadableStream<Uint8Array>).getReader()
      let leading = skipLeadingSpace
      for (;;) {
        clearTimeout(timer)
        timer = setTimeout(() => controller.abort(), this.#timeoutMs)
        let next: ReadableStreamReadResult<Uint8Array>
        try {
          next = await reader.read()
        } catch (error) {
          const why = controller.signal.aborted ? `no data for ${this.#timeoutMs} ms` : (error as Error).message
          throw new EdgeError(0, `GET ${path}: the answer stopped (${why})`, null)
        }
        if (next.done) return
        let chunk = next.value
        if (leading) {
          let start = 0
          while (start < chunk.length && (chunk[start] === 0x20 || chunk[start] === 0x0a || chunk[start] === 0x0d || chunk[start] === 0x09))
            start++
          chunk = chunk.subarray(start)
          leading = chunk.length === 0
        }
        if (chunk.length > 0) yield chunk
      }
    } finally {
      clearTimeout(timer)
    }
  }

  gateStatus(): Promise<GateStatus> {
    return this.json('GET', '/admin/inference/status')
  }

  pause(timeoutSeconds: number, policyVersion?: string | number): Promise<GateStatus> {
    return this.json(
      'POST',
      `/admin/inference/pause?timeout_seconds=${timeoutSeconds}`,
      policyVersion === undefined ? {} : { policy_version: policyVersion },
    )
  }

  resume(policyVersion?: string | number): Promise<GateStatus> {
    return this.json('POST', '/admin/inference/resume', policyVersion === undefined ? {} : { policy_version: policyVersion })
  }
}
