/**
 * A rollout session hands its result to the task through R2, never over RPC (issue #15.3): the session
 * streams the `SessionResult` into an R2 object and the task gets its key and a few small fields.
 * - A per_request result of more than 32 MiB (what one Durable Object RPC may carry) reaches the task,
 *   its TaskResult and the task status route whole, with the traces the in-memory builder gives.
 * - For every builder (per_request, tolerant prefix_merging, Polar-strict) the streamed result is the
 *   one the in-memory path builds (`result()` over RPC, on a small session).
 * - The task reads each session's result once when it completes, and writes its TaskResult (both keys)
 *   from that one read: R2 reads and bytes written are counted.
 */
import { env, runInDurableObject } from 'cloudflare:test'
import { describe, expect, it } from 'vitest'
import type { CompletionRecord } from '../../src/contract/completion-record.ts'
import type { SessionResult, TaskResult } from '../../src/contract/trajectory.ts'
import type { SessionRpc } from '../../src/durable/session/session-object.ts'
import type { SessionRolloutRpc } from '../../src/durable/session/session-rollout.ts'
import { reconstructTrajectory } from '../../src/reconstruct/index.ts'
import { completionInput, growingSession } from '../support/records.ts'
import type { CompletionInput } from '../../src/durable/session/record.ts'
import { eventually, submit, TestRunner, taskBody, taskStatus } from './rollout-support.ts'
import { taskRequestSchema } from '../../src/contract/rollout.ts'
import type { MultipartUpload } from '../../src/durable/session/r2-part-writer.ts'
import { Sql } from '../../src/durable/session/sql.ts'
import { type BlobPort, TaskCoordinator, type TaskDeps } from '../../src/durable/task/task-coordinator.ts'
import { TaskStore } from '../../src/durable/task/task-store.ts'

type Session = SessionRolloutRpc & SessionRpc
const RPC_LIMIT = 32 * 1024 * 1024

async function runSession(
  runnerId: string,
  taskId: string,
  builder: Record<string, unknown>,
  inputs: Iterable<CompletionInput>,
  { task = {}, agent = 'completed' }: { task?: Record<string, unknown>; agent?: 'completed' | 'failed' } = {},
) {
  const runner = await TestRunner.start(runnerId)
  expect((await submit(taskBody(taskId, { builder, ...task }))).status).toBe(200)
  const assigned = await runner.takeAssignment(taskId)
  const session = env.SESSIONS.get(env.SESSIONS.idFromName(assigned.session_id)) as unknown as Session
  await eventually(async () => expect((await session.lifecycle())?.status).toBe('RUNNING'))
  for (const input of inputs) {
    const admission = await session.admit()
    if (!admission.ok || !admission.managed) throw new Error('not admitted')
    await session.recordAdmitted(admission.ticket, input)
  }
  runner.send({
    type: 'session.finished',
    session_id: assigned.session_id,
    agent_result:
      agent === 'completed' ? { status: 'completed', return_code: 0 } : { status: 'failed', return_code: 1, error: 'agent failed' },
  })
  // Polled without the results: a 32 MiB result is read once, by the test that asserts it.
  await eventually(async () => expect((await taskStatus(taskId, { results: false })).status).not.toBe('running'), 60_000)
  return { runner, session, sessionId: assigned.session_id }
}

async function allRecords(stub: SessionRpc): Promise<CompletionRecord[]> {
  const out: CompletionRecord[] = []
  for (let after = -1; ; ) {
    const page = await stub.completions(after, 1000, 8 * 1024 * 1024)
    if (page.length === 0) return out
    out.push(...page)
    after = page.at(-1)!.seq
  }
}

/**
 * 34 turns whose requests carry a ≈ 1 MB system message: each per_request trace holds it once, ≈ 34.2 MB in
 * all — 2 % over the 32 MiB limit, no more: every byte of it is built once and copied three times through R2
 * (the session writes it; the task reads it once and writes its run copy and its `task_result.json` from
 * that one read), the work that bounds this test.
 */
function* heavyInputs(): Generator<CompletionInput> {
  const system = `You are an agent. ${'Follow the repository conventions carefully. '.repeat(22_300)}`
  const messages: { role: string; content: string }[] = [
    { role: 'system', content: system },
    { role: 'user', content: 'Fix the bug.' },
  ]
  const prompt = Array.from({ length: 300 }, (_, i) => (i * 7919) % 150000)
  for (let turn = 0; turn < 34; turn++) {
    const response = [turn + 11, turn + 12, 151645]
    yield completionInput({
      completion_id: `heavy_${turn}`,
      prompt_token_ids: Uint32Array.from(prompt),
      response_token_ids: Uint32Array.from(response),
      response_logprobs: Float64Array.from([-0.5, -0.25, -0.125]),
      request_text: JSON.stringify({ model: 'Qwen/Qwen3-8B', messages }),
      original_text: JSON.stringify({ model: 'gpt-test', messages }),
    })
    prompt.push(...response, 198, turn + 500)
    messages.push({ role: 'assistant', content: `a${turn}` }, { role: 'tool', content: `out ${turn}` })
  }
}

describe('rollout result hand-off through R2', () => {
  it('a per_request result over 32 MiB reaches the task, its TaskResult and the status route whole', async () => {
    const taskId = 'r2-heavy'
    const { runner, session, sessionId } = await runSession('r2-heavy-r', taskId, { strategy: 'per_request' }, heavyInputs())
    const records = await allRecords(session)
    const path = `rollout/task_${taskId}/ses_${sessionId}.json`
    const head = await env.BLOBS.head(path)
    expect(head!.size).toBeGreaterThan(RPC_LIMIT)
    const taskResultHead = await env.BLOBS.head(`rollout/task_${taskId}/task_result.json`)
    expect(taskResultHead!.size).toBeGreaterThan(RPC_LIMIT)

    const status = await taskStatus(taskId)
    const result = status.results[0] as SessionResult
    expect(result).toMatchObject({ session_id: sessionId, status: 'COMPLETED', error: null })
    const expected = reconstructTrajectory(records, {
      builder: 'per_request',
      session: { session_id: sessionId, task_id: taskId, metadata: result.metadata },
    })
    expect(result.trajectory.traces).toHaveLength(34)
    expect(JSON.stringify(result.trajectory.traces)).toBe(JSON.stringify(expected.traces))
    // No evaluator here: every trace's reward is null, and so is the session's (the mean of non-null ones).
    expect(result.trajectory.traces.every((trace) => trace.reward === null)).toBe(true)
    expect(status.sessions[0]).toMatchObject({ session_id: sessionId, result_path: path, reward: null })

    const taskResult = JSON.parse(await (await env.BLOBS.get(`rollout/task_${taskId}/task_result.json`))!.text()) as TaskResult
    expect(taskResult).toMatchObject({ task_id: taskId, status: 'completed', result_paths: [path] })
    expect(JSON.stringify(taskResult.results[0])).toBe(JSON.stringify(result))
    runner.close()
  }, 180_000)

  const EVALUATED = { evaluator: { strategy: 'session_completed' } }
  const MASKED = { ...EVALUATED, training_filter: 'mask_noncompleted' }
  for (const [name, builder, task, agent] of [
    ['per_request, evaluated', { strategy: 'per_request' }, EVALUATED, 'completed'],
    ['prefix_merging (tolerant), evaluated', { strategy: 'prefix_merging', config: { preset: 'tolerant' } }, EVALUATED, 'completed'],
    ['prefix_merging (Polar-strict), evaluated', { strategy: 'prefix_merging', config: { strict: true } }, EVALUATED, 'completed'],
    ['per_request, failed agent, mask_noncompleted', { strategy: 'per_request' }, MASKED, 'failed'],
    [
      'prefix_merging (tolerant), failed agent, mask_noncompleted',
      { strategy: 'prefix_merging', config: { preset: 'tolerant' } },
      MASKED,
      'failed',
    ],
  ] as const) {
    it(`${name}: the streamed result is the one the in-memory path builds`, async () => {
      const taskId = `r2-same-${name.replace(/\W+/g, '-')}`
      const { runner, session, sessionId } = await runSession(`${taskId}-r`, taskId, builder, growingSession(12, 400, 60, 20), {
        task,
        agent,
      })
      const stored = JSON.parse(await (await env.BLOBS.get(`rollout/task_${taskId}/ses_${sessionId}.json`))!.text()) as SessionResult
      const inMemory = await session.result()
      expect(stored).toEqual(inMemory)
      const traces = stored.trajectory.traces
      expect(traces.length).toBeGreaterThan(0)
      const status = await taskStatus(taskId)
      if (agent === 'completed') {
        expect(stored.status).toBe('COMPLETED')
        expect(traces.every((trace) => trace.reward === 1)).toBe(true)
        expect(status.sessions[0]?.reward).toBe(1)
      } else {
        expect(stored.status).toBe('ERROR')
        expect(stored.trajectory.metadata.training_filter).toEqual({
          rule: 'mask_noncompleted',
          masked_traces: traces.length,
          trainable_traces: 0,
        })
        expect(traces.every((trace) => trace.reward === 0 && trace.loss_mask.every((bit) => bit === 0))).toBe(true)
      }
      runner.close()
    }, 120_000)
  }

  it('the task reads each session result once and writes each byte of its TaskResult once per key', async () => {
    const taskId = 'r2-count'
    // Two results whose TaskResult (≈ 9.4 MB) is past one 8 MiB part: the multipart path, to both keys.
    const bodies = [0, 1].map((index) => `{"session_id":"s${index}","pad":"${String(index).repeat(4_700_000)}"}`)
    const reads = new Map<string, number>()
    const written = new Map<string, number>()
    const wrote = (key: string, bytes: number) => written.set(key, (written.get(key) ?? 0) + bytes)
    const blobs: BlobPort = {
      async get(key) {
        reads.set(key, (reads.get(key) ?? 0) + 1)
        return env.BLOBS.get(key)
      },
      async put(key, value, options) {
        wrote(key, typeof value === 'string' ? new TextEncoder().encode(value).byteLength : value.byteLength)
        return env.BLOBS.put(key, value, options)
      },
      async createMultipartUpload(key, options) {
        const upload = await env.BLOBS.createMultipartUpload(key, options)
        const counted: MultipartUpload = {
          uploadPart: (partNumber, value) => {
            wrote(key, value.byteLength)
            return upload.uploadPart(partNumber, value)
          },
          complete: (parts) => upload.complete(parts),
          abort: () => upload.abort(),
        }
        return counted
      },
    }
    const host = env.TASKS.get(env.TASKS.idFromName(`${taskId}-host`))
    await runInDurableObject(host, async (_instance, state) => {
      const store = new TaskStore(new Sql(state.storage.sql))
      const deps: TaskDeps = {
        store,
        session: () => {
          throw new Error('no session is called: the results are handed off')
        },
        hub: () => ({ enqueue: async () => {}, publish: async () => {}, taskState: async () => {} }),
        blobs,
        fetch: () => Promise.reject(new Error('no callback')),
        callbackPolicy: { baseDelayMs: 1000, maxAttempts: 1 },
        setAlarm: async () => {},
        now: () => Date.now(),
      }
      const coordinator = new TaskCoordinator(deps)
      const run = {
        task_id: taskId,
        run_id: 'run_count',
        request: taskRequestSchema.parse(taskBody(taskId, { num_samples: 2 })),
        status: 'running' as const,
        submitted_at: new Date().toISOString(),
        completed_at: null,
        cancelled: false,
        cancel_reason: null,
        early_stopped: false,
        public_url: 'http://127.0.0.1',
        default_upstream: { url: 'http://127.0.0.1/v1', kind: 'openai' as const, served_model: null },
        task_result_key: null,
        next_poll_at: null,
        next_sweep_at: null,
      }
      store.startRun(run, ['s0', 's1'], Date.now())
      for (const [index, body] of bodies.entries()) {
        const key = `rollout/task_${taskId}/ses_s${index}.json`
        await env.BLOBS.put(key, body)
        const stored = { session_id: `s${index}`, status: 'COMPLETED' as const, error: null, node_id: null, reward: null }
        const outcome = await coordinator.sessionStored(run.run_id, { ...stored, trace_count: 0, key, bytes: body.length })
        expect(outcome.accepted).toBe(true)
      }
      expect(store.run()?.status).toBe('completed')
    })
    const paths = [0, 1].map((index) => `rollout/task_${taskId}/ses_s${index}.json`)
    const expected = `{"task_id":"${taskId}","status":"completed","results":[${bodies.join(',')}],"result_paths":${JSON.stringify(paths)}}`
    const runKey = `rollout/task_${taskId}/run_run_count.json`
    const latestKey = `rollout/task_${taskId}/task_result.json`
    for (const key of [runKey, latestKey]) expect(await (await env.BLOBS.get(key))!.text()).toBe(expected)
    // Read once each (a second pass for the second key, or a read-back copy, counts more).
    expect(Object.fromEntries(reads)).toEqual(Object.fromEntries(paths.map((path) => [path, 1])))
    expect(Object.fromEntries(written)).toEqual({ [runKey]: expected.length, [latestKey]: expected.length })
  }, 60_000)
})
