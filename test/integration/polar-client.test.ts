/**
 * Polar's trainer-side client flow, unchanged, over plain HTTP against the edge under `wrangler dev`:
 * the client knows only `polar_rollout_url` (here `<edge>/t/<admin token>`), sends no credential
 * header, polls `GET /health` before starting, submits a TaskRequest, polls `GET /rollout/task/{id}`
 * until it is `completed`/`failed`, and receives the `TaskResult` at its callback URL. A scripted
 * runner runs the sessions (tunnelled inference to the stand-in engine, OpenAI SDK as the harness).
 * The client below is written from Polar's documented flow (slime bridge `_submit_and_wait_for_task`),
 * checked against Polar's `TaskStatus`/`TaskResult` field names.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer, type Server } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import OpenAI from 'openai'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { TaskResult } from '../../src/contract/trajectory.ts'
import { type EngineHandle, startEngine } from '../../engine/server.ts'
import { type EdgeProcess, startEdge } from '../../scripts/lib/processes.ts'
import { RunnerClient } from '../support/runner-client.ts'
import { type CompletionRecordJson, eventually } from '../support/stack.ts'

const ADMIN_TOKEN = 'polar-itest-admin-token-7f3a'
const RUNNER_TOKEN = 'polar-itest-runner-token'

let engine: EngineHandle
let edge: EdgeProcess
let persistTo: string
let trainer: Server
let trainerUrl: string
let runner: RunnerClient
const callbacks: { headers: Record<string, string | string[] | undefined>; body: TaskResult }[] = []

/** Polar's client: every call is `${polar_rollout_url}/…` with only a JSON content type. */
class PolarTrainerClient {
  readonly rolloutUrl: string

  constructor(rolloutUrl: string) {
    this.rolloutUrl = rolloutUrl
  }

  async waitHealthy(timeoutMs = 10_000): Promise<void> {
    await eventually(async () => expect((await fetch(`${this.rolloutUrl}/health`)).status).toBe(200), timeoutMs)
  }

  async submit(payload: Record<string, unknown>): Promise<string> {
    const res = await fetch(`${this.rolloutUrl}/rollout/task/submit`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(payload),
    })
    if (!res.ok) throw new Error(`submit ${res.status}: ${await res.text()}`)
    return ((await res.json()) as { task_id: string }).task_id
  }

  /** Poll until terminal, like Polar's `_submit_and_wait_for_task` (bounded here). */
  async waitTask(taskId: string, timeoutMs = 30_000): Promise<TaskResult> {
    const deadline = Date.now() + timeoutMs
    while (Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 200))
      const res = await fetch(`${this.rolloutUrl}/rollout/task/${taskId}`)
      if (!res.ok) continue
      const status = (await res.json()) as Record<string, unknown>
      // Polar's TaskStatus fields.
      for (const key of ['task_id', 'status', 'total_sessions', 'completed_sessions', 'results', 'result_paths'])
        expect(status).toHaveProperty(key)
      if (status.status === 'completed' || status.status === 'failed') {
        return {
          task_id: taskId,
          status: status.status,
          results: status.results as TaskResult['results'],
          result_paths: status.result_paths as string[],
        }
      }
    }
    throw new Error(`task ${taskId} did not finish within ${timeoutMs} ms`)
  }
}

beforeAll(async () => {
  engine = await startEngine({ seed: 11 })
  trainer = createServer((request, response) => {
    let body = ''
    request.on('data', (chunk: Buffer) => {
      body += chunk.toString()
    })
    request.on('end', () => {
      callbacks.push({ headers: request.headers, body: JSON.parse(body) as TaskResult })
      response.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"accepted"}')
    })
  })
  await new Promise<void>((resolve) => trainer.listen(0, '127.0.0.1', resolve))
  const address = trainer.address()
  trainerUrl = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`
  persistTo = mkdtempSync(join(tmpdir(), 'rollgate-polar-client-'))
  edge = await startEdge({
    persistTo,
    vars: {
      ROLLGATE_ADMIN_TOKEN: ADMIN_TOKEN,
      ROLLGATE_SIGNING_KEY: 'polar-itest-signing-key',
      ROLLGATE_RUNNER_TOKEN: RUNNER_TOKEN,
      ROLLGATE_UPSTREAM_URL: engine.url,
      ROLLGATE_SERVED_MODEL: 'Qwen/Qwen3-8B',
      ROLLGATE_CALLBACK_BASE_DELAY_MS: '300',
    },
  })
  runner = new RunnerClient({ edgeUrl: edge.url, token: RUNNER_TOKEN, runnerId: 'polar-runner', engineUrl: engine.url })
  await runner.start()
})

afterAll(async () => {
  await runner?.shutdown().catch(() => {})
  await edge?.stop()
  await engine?.close()
  await new Promise<void>((resolve) => (trainer ? trainer.close(() => resolve()) : resolve()))
  if (persistTo) rmSync(persistTo, { recursive: true, force: true })
})

describe("Polar's trainer client against the edge", () => {
  it('health, submit, poll, callback over plain HTTP with the token in the base URL; samples carry the captured tokens', async () => {
    const client = new PolarTrainerClient(`${edge.url}/t/${ADMIN_TOKEN}`)
    await client.waitHealthy()
    // No credential at all: refused (there is no unauthenticated mode).
    const bare = await fetch(`${edge.url}/rollout/task/submit`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: '{}',
    })
    expect(bare.status).toBe(401)

    const taskId = await client.submit({
      task_id: 'polar-slime-0-0',
      instruction: 'create hello.txt containing hi',
      num_samples: 2,
      timeout_seconds: 120,
      agent: { harness: 'qwen_code', model_name: 'qwen3-coder-plus' },
      builder: { strategy: 'prefix_merging', config: {} },
      evaluator: { strategy: 'session_completed', config: {} },
      callback_url: `${trainerUrl}/polar/callback`,
      metadata: { group_id: 0, policy_version: 3, rollout_step: 0 },
    })
    expect(taskId).toBe('polar-slime-0-0')

    // The runner runs both sessions: one model call each through the edge, then the agent exits.
    for (let i = 0; i < 2; i++) {
      const session = await runner.take(taskId)
      const harness = new OpenAI({ baseURL: session.base_urls.openai, apiKey: session.token, maxRetries: 0 })
      await eventually(async () => {
        const answer = await harness.chat.completions.create({
          model: 'qwen3-coder-plus',
          messages: [{ role: 'user', content: `create hello.txt containing hi (${i})` }],
        })
        expect(answer.choices[0]).toBeDefined()
      })
      runner.finish(session.session_id, { status: 'completed', return_code: 0 })
    }

    const result = await client.waitTask(taskId)
    expect(result.status).toBe('completed')
    expect(result.results).toHaveLength(2)
    const callback = await eventually(async () => {
      expect(callbacks).toHaveLength(1)
      return callbacks[0]!
    })
    expect(callback.body).toMatchObject({ task_id: taskId, status: 'completed' })
    expect(callback.body.results.map((r) => r.status)).toEqual(['COMPLETED', 'COMPLETED'])
    expect(callback.headers['idempotency-key']).toMatch(new RegExp(`^${taskId}/`))

    // Samples: the trace tokens are exactly the captured ones (read back through the same URL prefix).
    for (const session of callback.body.results) {
      const [trace] = session.trajectory.traces
      expect(trace?.reward).toBe(1)
      expect(session.trajectory.metadata).toMatchObject({ group_id: 0, policy_version: 3, rollout_step: 0 })
      const page = (await (await fetch(`${client.rolloutUrl}/v1/sessions/${session.session_id}/completions`)).json()) as {
        completions: CompletionRecordJson[]
      }
      expect(page.completions).toHaveLength(1)
      expect(trace?.prompt_ids).toEqual(page.completions[0]!.prompt_token_ids)
      expect(trace?.response_ids).toEqual(page.completions[0]!.response_token_ids)
      const text = JSON.stringify(page)
      expect(text).not.toContain(ADMIN_TOKEN)
    }
    // The admin token is in no result, record or edge log line.
    expect(JSON.stringify(callback.body)).not.toContain(ADMIN_TOKEN)
    expect(JSON.stringify(result)).not.toContain(ADMIN_TOKEN)
    expect(edge.output()).not.toContain(ADMIN_TOKEN)
  })
})
