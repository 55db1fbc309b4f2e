/**
 * @module
 * The real stack for one chaos scenario: the stand-in engine (in this process), the edge under
 * `wrangler dev` with local persistence in a process group of its own (so SIGKILL ends wrangler and
 * workerd at once, like a crash), and helpers every scenario uses. Loopback only; every wait bounded.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type EngineHandle, type EngineOptions, startEngine } from '../../engine/server.ts'
import { type EdgeProcess, rssMb, startEdge } from '../lib/processes.ts'

export const ADMIN_TOKEN = 'chaos-admin-token'
export const RUNNER_TOKEN = 'chaos-runner-token'
export const SIGNING_KEY = 'chaos-signing-key'
export const UPSTREAM_KEY = 'chaos-upstream-key-0123456789'
export const MODEL = 'Qwen/Qwen3-8B'

export interface ChaosStack {
  engine: EngineHandle
  edge: EdgeProcess
  persistTo: string
  vars: Record<string, string>
  /** Admin call on the edge. */
  admin(path: string, init?: RequestInit): Promise<Response>
  /** Kill the edge with `signal` (SIGKILL: a crash) and start it again on the same port and state. */
  restartEdge(signal: NodeJS.Signals): Promise<void>
  /** Resident memory (MB) of the edge's processes (wrangler + workerd) and of this process (engine, clients). */
  rss(): { edge_mb: number; chaos_mb: number }
  /** Every line wrangler printed (for secret scans). */
  edgeOutput(): string
  stop(): Promise<void>
}

export async function startChaosStack(vars: Record<string, string> = {}, engineOptions: EngineOptions = {}): Promise<ChaosStack> {
  const engine = await startEngine({ seed: 5, ...engineOptions })
  const persistTo = mkdtempSync(join(tmpdir(), 'rollgate-chaos-'))
  const allVars = {
    ROLLGATE_ADMIN_TOKEN: ADMIN_TOKEN,
    ROLLGATE_SIGNING_KEY: SIGNING_KEY,
    ROLLGATE_RUNNER_TOKEN: RUNNER_TOKEN,
    ROLLGATE_UPSTREAM_URL: engine.url,
    ROLLGATE_SERVED_MODEL: MODEL,
    ROLLGATE_HEARTBEAT_MS: '200',
    ...vars,
  }
  let output = ''
  let edge: EdgeProcess
  try {
    edge = await startEdge({ persistTo, vars: allVars, group: true })
  } catch (error) {
    await engine.close()
    rmSync(persistTo, { recursive: true, force: true })
    throw error
  }
  const stack: ChaosStack = {
    engine,
    edge,
    persistTo,
    vars: allVars,
    admin: (path, init = {}) =>
      fetch(`${stack.edge.url}${path}`, {
        ...init,
        headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json', ...init.headers },
        signal: init.signal ?? AbortSignal.timeout(60_000),
      }),
    async restartEdge(signal) {
      const port = stack.edge.port
      output += stack.edge.output()
      await stack.edge.kill(signal)
      stack.edge = await startEdge({ persistTo, vars: allVars, port, group: true })
    },
    rss: () => ({
      edge_mb: Math.round(stack.edge.pids().reduce((sum, pid) => sum + rssMb(pid), 0) * 10) / 10,
      chaos_mb: Math.round((process.memoryUsage().rss / 1048576) * 10) / 10,
    }),
    edgeOutput: () => output + stack.edge.output(),
    async stop() {
      output += stack.edge.output()
      await stack.edge.stop()
      await engine.close()
      rmSync(persistTo, { recursive: true, force: true })
    },
  }
  return stack
}

/** Sessions' completion records (every page). */
export async function records(
  stack: ChaosStack,
  sessionId: string,
): Promise<{ seq: number; status: string; trainable: boolean; completion_id: string; [key: string]: unknown }[]> {
  const out: { seq: number; status: string; trainable: boolean; completion_id: string }[] = []
  let after: number | null = null
  for (;;) {
    const response = await stack.admin(`/v1/sessions/${sessionId}/completions?limit=1000${after === null ? '' : `&after_seq=${after}`}`)
    if (!response.ok) throw new Error(`completions ${sessionId}: ${response.status} ${await response.text()}`)
    const page = (await response.json()) as {
      completions: { seq: number; status: string; trainable: boolean; completion_id: string }[]
      next_after_seq: number | null
    }
    out.push(...page.completions)
    if (page.next_after_seq === null || page.next_after_seq === undefined || page.completions.length === 0) return out
    after = page.next_after_seq
  }
}

export async function createSession(stack: ChaosStack, body: Record<string, unknown> = {}): Promise<{ session_id: string; token: string }> {
  const response = await stack.admin('/v1/sessions', { method: 'POST', body: JSON.stringify(body) })
  if (response.status !== 201) throw new Error(`create session: ${response.status} ${await response.text()}`)
  return (await response.json()) as { session_id: string; token: string }
}

export function percentile(values: readonly number[], p: number): number {
  if (!values.length) return 0
  const sorted = [...values].sort((a, b) => a - b)
  return Math.round(sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]! * 10) / 10
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

/** Poll until `check` returns a value (not undefined), at most `timeoutMs`. */
export async function until<T>(check: () => Promise<T | undefined>, timeoutMs: number, what: string): Promise<T> {
  const deadline = Date.now() + timeoutMs
  let lastError: unknown = null
  for (;;) {
    const value = await check().catch((error: unknown) => {
      lastError = error
      return undefined
    })
    if (value !== undefined) return value
    if (Date.now() > deadline) {
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${what}${lastError ? ` (last error: ${(lastError as Error).message})` : ''}`,
      )
    }
    await sleep(200)
  }
}
