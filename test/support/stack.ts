/**
 * @module
 * A real stack for integration tests: the stand-in engine (in process) and the edge under
 * `wrangler dev` (real workerd, Durable Objects with SQLite, R2) with persistence in a temp dir.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type EngineHandle, type EngineOptions, startEngine } from '../../engine/server.ts'
import { type EdgeProcess, startEdge } from '../../scripts/lib/processes.ts'

export const ADMIN_TOKEN = 'itest-admin-token'

export interface Stack {
  engine: EngineHandle
  edge: EdgeProcess
  persistTo: string
  restartEdge(): Promise<void>
  createSession(body?: Record<string, unknown>): Promise<{ session_id: string; token: string; base_urls: Record<string, string> }>
  completions(sessionId: string): Promise<CompletionRecordJson[]>
  stop(): Promise<void>
}

export interface CompletionRecordJson {
  completion_id: string
  seq: number
  status: string
  trainable: boolean
  stream: boolean
  agent: string
  api: string
  prompt_token_ids: number[]
  /** The delta base the session stored this prompt against (null: stored whole). */
  prompt_delta: { parent_seq: number; shared_prefix_len: number } | null
  response_token_ids: number[]
  response_logprobs: number[] | null
  finish_reason: string | null
  request: { messages: unknown[]; tools?: unknown[]; [key: string]: unknown }
  original_request: unknown
  response_message: {
    content: string | null
    tool_calls?: { id: string; function: { name: string; arguments: string } }[]
    reasoning_content?: string
  }
  error: string | null
  provenance: { sampling_params: Record<string, unknown>; upstream_kind: string }
}

export async function startStack(engineOptions: EngineOptions = {}): Promise<Stack> {
  const engine = await startEngine({ seed: 7, ...engineOptions })
  const persistTo = mkdtempSync(join(tmpdir(), 'rollgate-itest-'))
  const vars = {
    ROLLGATE_ADMIN_TOKEN: ADMIN_TOKEN,
    ROLLGATE_SIGNING_KEY: 'itest-signing-key',
    ROLLGATE_UPSTREAM_URL: engine.url,
    ROLLGATE_HEARTBEAT_MS: '200',
  }
  const stack: Stack = {
    engine,
    edge: await startEdge({ persistTo, vars }),
    persistTo,
    async restartEdge() {
      const port = stack.edge.port
      await stack.edge.stop()
      stack.edge = await startEdge({ persistTo, vars, port })
    },
    async createSession(body = {}) {
      const response = await fetch(`${stack.edge.url}/v1/sessions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      })
      if (response.status !== 201) throw new Error(`create session: ${response.status} ${await response.text()}`)
      return (await response.json()) as { session_id: string; token: string; base_urls: Record<string, string> }
    },
    async completions(sessionId) {
      const response = await fetch(`${stack.edge.url}/v1/sessions/${sessionId}/completions`, {
        headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
      })
      if (!response.ok) throw new Error(`completions: ${response.status} ${await response.text()}`)
      return ((await response.json()) as { completions: CompletionRecordJson[] }).completions
    },
    async stop() {
      await stack.edge.stop()
      await engine.close()
      rmSync(persistTo, { recursive: true, force: true })
    },
  }
  return stack
}

/** The engine's own tokenization of a chat prompt (what vLLM would render). */
export async function engineTokenize(
  engineUrl: string,
  messages: unknown[],
  tools?: unknown[],
  extra: Record<string, unknown> = {},
): Promise<number[]> {
  const response = await fetch(`${engineUrl}/tokenize`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ messages, ...(tools ? { tools } : {}), add_generation_prompt: true, ...extra }),
  })
  if (!response.ok) throw new Error(`tokenize: ${response.status} ${await response.text()}`)
  return ((await response.json()) as { tokens: number[] }).tokens
}

/** Poll until `check` passes (bounded). */
export async function eventually<T>(check: () => Promise<T>, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs
  let lastError: unknown
  while (Date.now() < deadline) {
    try {
      return await check()
    } catch (error) {
      lastError = error
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
  }
  throw lastError
}
