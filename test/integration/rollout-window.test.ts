/**
 * Rollout sessions know the engine's context window: a harness asking for an output budget that does not
 * fit (Qwen Code always asks `max_tokens: 32768`) against the stand-in engine at `--max-model-len 32768`
 * gets the budget lowered as a bare session does — for a tunnelled call (the real `RunnerAgent` reports
 * the window it read from its engine at register) and for a direct one (the edge reads `/v1/models` at
 * dispatch). Without the window the engine refuses: "maximum context length is 32768 tokens".
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import OpenAI from 'openai'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { TaskStatus } from '../../src/contract/rollout.ts'
import { type EngineHandle, startEngine } from '../../engine/server.ts'
import { RunnerAgent } from '../../runner/agent.ts'
import type { StageHandlers } from '../../runner/pools/pipeline.ts'
import type { SessionJob } from '../../runner/session/session-flow.ts'
import { type EdgeProcess, startEdge } from '../../scripts/lib/processes.ts'
import { type CompletionRecordJson, eventually } from '../support/stack.ts'

const ADMIN_TOKEN = 'itest-admin-token'
const RUNNER_TOKEN = 'itest-runner-token'
const WINDOW = 32_768
/** What Qwen Code asks for on every call. */
const HARNESS_BUDGET = 32_768

let engine: EngineHandle
let edge: EdgeProcess
let agent: RunnerAgent
let persistTo: string
const harnessErrors: string[] = []

async function admin(path: string, init: RequestInit = {}): Promise<Response> {
  return fetch(`${edge.url}${path}`, {
    ...init,
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json', ...init.headers },
  })
}

/** The harness stage: one Qwen-Code-shaped call through the edge with the session's token. */
const handlers: StageHandlers<SessionJob, unknown> = {
  init: async () => ({}),
  run: async (job) => {
    const client = new OpenAI({ baseURL: job.assignment.base_urls.openai, apiKey: job.assignment.token, maxRetries: 0 })
    try {
      await client.chat.completions.create({
        model: 'qwen3-coder',
        max_tokens: HARNESS_BUDGET,
        messages: [
          { role: 'system', content: 'You are a coding agent.' },
          { role: 'user', content: job.assignment.instruction },
        ],
      })
      return { status: 'completed', return_code: 0, error: null, timeout_stage: null }
    } catch (error) {
      harnessErrors.push((error as Error).message)
      return { status: 'failed', return_code: 1, error: (error as Error).message, timeout_stage: null }
    }
  },
  postrun: async () => null,
  dispose: async () => {},
}

beforeAll(async () => {
  engine = await startEngine({ seed: 3, maxModelLen: WINDOW })
  persistTo = mkdtempSync(join(tmpdir(), 'rollgate-window-itest-'))
  edge = await startEdge({
    persistTo,
    vars: {
      ROLLGATE_ADMIN_TOKEN: ADMIN_TOKEN,
      ROLLGATE_SIGNING_KEY: 'itest-signing-key',
      ROLLGATE_RUNNER_TOKEN: RUNNER_TOKEN,
      ROLLGATE_UPSTREAM_URL: `${engine.url}/v1`,
    },
  })
  agent = new RunnerAgent({
    edgeUrl: edge.url,
    token: RUNNER_TOKEN,
    runnerId: 'window-runner',
    stateDir: persistTo,
    upstreamUrl: engine.url,
    servedModel: null,
    capacity: { max_init_workers: 2, max_run_workers: 2, max_postrun_workers: 2, ready_buffer: 0 },
    handlers,
    log: () => {},
  })
  await agent.start()
  await agent.registered()
})

afterAll(async () => {
  await agent?.cancel().catch(() => {})
  await edge?.stop()
  await engine?.close()
  if (persistTo) rmSync(persistTo, { recursive: true, force: true })
})

async function rollout(taskId: string, upstream: Record<string, unknown>): Promise<CompletionRecordJson> {
  const submitted = await admin('/rollout/task/submit', {
    method: 'POST',
    body: JSON.stringify({
      task_id: taskId,
      instruction: 'create hello.txt containing hi',
      agent: { harness: 'qwen_code' },
      evaluator: { strategy: 'session_completed' },
      upstream,
    }),
  })
  expect(submitted.status, await submitted.clone().text()).toBe(200)
  const done = await eventually(async () => {
    const res = await admin(`/rollout/task/${taskId}`)
    const status = (await res.json()) as TaskStatus
    expect(status.status, JSON.stringify(status.results.map((entry) => [entry.status, entry.error]))).not.toBe('running')
    return status
  }, 30_000)
  expect(harnessErrors).toEqual([])
  expect(done.status).toBe('completed')
  const result = done.results[0]!
  expect(result.status).toBe('COMPLETED')
  const page = (await (await admin(`/v1/sessions/${result.session_id}/completions`)).json()) as { completions: CompletionRecordJson[] }
  expect(page.completions).toHaveLength(1)
  return page.completions[0]!
}

describe("rollout sessions lower output budgets to the engine's window", () => {
  it('tunnelled: the runner reports its engine window at register', async () => {
    const record = await rollout('window-runner-route', { route: 'runner' })
    expect((record.provenance as unknown as { route: string }).route).toBe('runner:window-runner')
    expect(record.status).toBe('ok')
    const sent = record.request.max_tokens as number
    expect(sent).toBeLessThan(HARNESS_BUDGET)
    expect(sent + record.prompt_token_ids.length).toBeLessThanOrEqual(WINDOW)
  })

  it("direct: the edge reads the engine's /v1/models at dispatch", async () => {
    const record = await rollout('window-direct-route', { route: 'direct' })
    expect((record.provenance as unknown as { route: string }).route).toBe('direct')
    expect(record.status).toBe('ok')
    const sent = record.request.max_tokens as number
    expect(sent).toBeLessThan(HARNESS_BUDGET)
  })
})
