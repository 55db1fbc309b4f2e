/**
 * Polar compatibility at the edge: raw records in Polar's CompletionRecord shape.
 */
import { env, SELF } from 'cloudflare:test'
import { describe, expect, it } from 'vitest'
import type { Trajectory } from '../../src/contract/trajectory.ts'
import type { SessionRpc } from '../../src/durable/session/session-object.ts'
import { fromPolarCompletionRecords, reconstructTrajectory } from '../../src/reconstruct/index.ts'
import { completionInput, growingSession } from '../support/records.ts'
import { cancelTask, engineAnswer, eventually, submit, TestRunner, taskBody, taskStatus } from './rollout-support.ts'

const ADMIN = { authorization: 'Bearer test-admin-token', 'content-type': 'application/json' }
const EDGE = 'https://edge.test'

describe('GET /v1/sessions/:id/completions?format=polar', () => {
  it('serves Polar CompletionRecords; builders give the edge’s traces from them; failed calls listed, not dropped', async () => {
    const res = await SELF.fetch(`${EDGE}/v1/sessions`, {
      method: 'POST',
      headers: ADMIN,
      body: JSON.stringify({ session_id: 'polar-rec-1', task_id: 'task-p', metadata: { group_id: 'gp' } }),
    })
    expect(res.status).toBe(201)
    const stub = env.SESSIONS.get(env.SESSIONS.idFromName('polar-rec-1')) as unknown as SessionRpc
    const inputs = growingSession(4, 300, 200, 40)
    await stub.record(inputs[0]!)
    await stub.record(
      completionInput({
        completion_id: 'cmpl_failed',
        status: 'failed',
        prompt_token_ids: null,
        response_token_ids: null,
        response_logprobs: null,
        error: 'engine 500',
      }),
    )
    for (const input of inputs.slice(1)) await stub.record(input)

    const page = (await (
      await SELF.fetch(`${EDGE}/v1/sessions/polar-rec-1/completions?format=polar&limit=3`, { headers: ADMIN })
    ).json()) as {
      completions: {
        completion_id: string
        api_type: string
        response: { prompt_token_ids: number[]; choices: { token_ids: number[]; logprobs: { content: { token_id: number }[] } }[] }
      }[]
      excluded_completions: { completion_id: string; status: string }[]
      next_after_seq: number | null
    }
    // limit counts records, excluded ones included: seq 0, 1 (failed), 2.
    expect(page.completions.map((r) => r.completion_id)).toEqual(['cmpl_0', 'cmpl_1'])
    expect(page.excluded_completions).toEqual([{ completion_id: 'cmpl_failed', seq: 1, status: 'failed', reason: 'failed' }])
    expect(page.next_after_seq).toBe(2)
    const first = page.completions[0]!
    expect(first).toMatchObject({
      api_type: 'openai_chat',
      session_id: 'polar-rec-1',
      model_used: 'Qwen/Qwen3-8B',
      request: { model: 'Qwen/Qwen3-8B' },
    })
    expect(first.response.prompt_token_ids).toEqual(Array.from(inputs[0]!.prompt_token_ids!))
    expect(first.response.choices[0]!.token_ids).toEqual(Array.from(inputs[0]!.response_token_ids!))
    expect(first.response.choices[0]!.logprobs.content[0]).toMatchObject({ token_id: inputs[0]!.response_token_ids![0] })
    expect(first).not.toHaveProperty('response_token_ids')

    const rest = (await (
      await SELF.fetch(`${EDGE}/v1/sessions/polar-rec-1/completions?format=polar&after_seq=2`, { headers: ADMIN })
    ).json()) as {
      completions: unknown[]
    }
    const records = fromPolarCompletionRecords([...page.completions, ...rest.completions])
    expect(records).toHaveLength(4)
    for (const builder of ['per_request', 'prefix_merging'] as const) {
      const edge = (await (
        await SELF.fetch(`${EDGE}/v1/sessions/polar-rec-1/trajectory?builder=${builder}`, { headers: ADMIN })
      ).json()) as Trajectory
      const offline = reconstructTrajectory(records, { builder })
      expect(offline.traces.map((t) => [t.prompt_ids, t.response_ids, t.loss_mask, t.response_logprobs])).toEqual(
        edge.traces.map((t) => [t.prompt_ids, t.response_ids, t.loss_mask, t.response_logprobs]),
      )
    }
    // A session outside a task: timing from its log, no runner (node_id null).
    const result = (await (
      await SELF.fetch(`${EDGE}/v1/sessions/polar-rec-1/trajectory?format=session_result`, { headers: ADMIN })
    ).json()) as {
      timing: { run_ms: number }
      node_id: string | null
      trajectory: { metadata: { capture_timing: { completions: number; wall_ms: number } } }
    }
    expect(result.node_id).toBeNull()
    expect(result.trajectory.metadata.capture_timing.completions).toBe(5)
    expect(result.timing.run_ms).toBe(result.trajectory.metadata.capture_timing.wall_ms)
    const bad = await SELF.fetch(`${EDGE}/v1/sessions/polar-rec-1/completions?format=xml`, { headers: ADMIN })
    expect(bad.status).toBe(400)
  })
})

describe("Polar's trainer client: admin token in the base URL, /health", () => {
  const T = `${EDGE}/t/test-admin-token`
  const body = (taskId: string) => JSON.stringify({ task_id: taskId, instruction: 'x', agent: { harness: 'qwen_code' } })

  it('/t/<token>/ reaches the rollout and admin routes with no auth header; a wrong token is a 401', async () => {
    const submitted = await SELF.fetch(`${T}/rollout/task/submit`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: body('t-prefix-1'),
    })
    expect(submitted.status).toBe(200)
    expect(await submitted.json()).toMatchObject({ task_id: 't-prefix-1', status: 'running' })
    const status = await SELF.fetch(`${T}/rollout/task/t-prefix-1`)
    expect(status.status).toBe(200)
    // The token never reaches what the edge keeps or answers.
    expect(await status.text()).not.toContain('test-admin-token')
    expect((await SELF.fetch(`${T}/rollout/status`)).status).toBe(200)
    expect((await SELF.fetch(`${T}/admin/inference/status`)).status).toBe(200)
    expect((await SELF.fetch(`${T}/v1/sessions/nope`)).status).toBe(404)
    expect((await SELF.fetch(`${T}/rollout/task/t-prefix-1`, { method: 'DELETE' })).status).toBe(200)

    const wrong = await SELF.fetch(`${EDGE}/t/not-the-token/rollout/status`)
    expect(wrong.status).toBe(401)
    expect(await wrong.text()).not.toContain('not-the-token')
    // Harness, runner and unknown routes are not admin routes: 404, path (and token) not echoed.
    for (const path of ['/v1/chat/completions', '/runners/connect', '/nope']) {
      const res = await SELF.fetch(`${T}${path}`, { method: 'POST', body: '{}' })
      expect(res.status).toBe(404)
      expect(await res.text()).not.toContain('test-admin-token')
    }
    // Without the prefix and without a header: still a 401 (no unauthenticated mode).
    expect((await SELF.fetch(`${EDGE}/rollout/status`)).status).toBe(401)
  })

  it("accepts newer Polar's X-Polar-Control-Token header as the admin credential", async () => {
    expect((await SELF.fetch(`${EDGE}/rollout/status`, { headers: { 'x-polar-control-token': 'test-admin-token' } })).status).toBe(200)
    expect((await SELF.fetch(`${EDGE}/rollout/status`, { headers: { 'x-polar-control-token': 'nope' } })).status).toBe(401)
  })

  it('GET /health answers without credentials, also under /t/<token>/', async () => {
    for (const url of [`${EDGE}/health`, `${T}/health`]) {
      const res = await SELF.fetch(url)
      expect(res.status).toBe(200)
      expect(await res.json()).toMatchObject({ status: 'ok' })
    }
  })
})

/** Evaluator configs are validated at submit (src/contract/evaluator-config.ts): valid ones per strategy. */
const VALID_EVALUATOR_CONFIGS: Record<string, Record<string, unknown>> = {
  swebench_harness: { instance: { instance_id: 'demo__demo-1', FAIL_TO_PASS: ['tests/test_a.py::test_a'] } },
  test_on_output: { test_command: 'python3 -m pytest -q', expected_output_json: { 'tests/test_a.py::test_a': 'PASSED' } },
}

describe('runner-side evaluators', () => {
  // Two tests (each 5 s under vitest's default): the submit warnings, then a session whose evaluator did not run.
  // Every task submitted runs sessions (a Durable Object each, registered and queued at the hub): the work here.
  const warnings = async (strategy: string, taskId: string, numSamples = 1) => {
    const res = await submit(
      taskBody(taskId, {
        evaluator: { strategy, config: VALID_EVALUATOR_CONFIGS[strategy] ?? {} },
        num_samples: numSamples,
        builder: { strategy: 'per_request' },
      }),
    )
    expect(res.status).toBe(200)
    return ((await res.json()) as { warnings?: { code: string; message: string }[] }).warnings
  }

  it('warns at submit when no connected runner offers the evaluator; not for an offered one or an edge evaluator', async () => {
    const runner = await TestRunner.start('polar-eval-r1', { evaluators: ['test_on_output'] })
    expect(await warnings('swebench_harness', 'eval-missing')).toEqual([
      {
        code: 'evaluator_not_offered',
        message: expect.stringContaining('evaluator swebench_harness runs on a runner and no connected runner offers it'),
      },
    ])
    await cancelTask('eval-missing')
    expect(await warnings('session_completed', 'eval-edge')).toEqual([])
    await cancelTask('eval-edge')
    expect(await warnings('test_on_output', 'eval-offered-probe')).toEqual([])
    await cancelTask('eval-offered-probe')
    runner.close()
  })

  it('a session whose evaluator did not run ends ERROR; the one whose evaluator ran COMPLETED', async () => {
    const runner = await TestRunner.start('polar-eval-r2', { evaluators: ['test_on_output'] })
    runner.serveTunnel(() => null)
    expect(await warnings('test_on_output', 'eval-offered', 2)).toEqual([])

    const first = await runner.takeAssignment('eval-offered')
    const second = await runner.takeAssignment('eval-offered')
    // One session's evaluator ran, the other's did not (no eval_result): ERROR with the reason, not a zero reward.
    runner.send({
      type: 'session.finished',
      session_id: first.session_id,
      agent_result: { status: 'completed', return_code: 0 },
      eval_result: { outcome_reward: 1 },
    })
    runner.send({ type: 'session.finished', session_id: second.session_id, agent_result: { status: 'completed', return_code: 0 } })
    const status = await eventually(async () => {
      const current = await taskStatus('eval-offered')
      expect(current.results).toHaveLength(2)
      return current
    })
    const bySession = new Map(status.results.map((result) => [result.session_id, result]))
    expect(bySession.get(first.session_id)).toMatchObject({ status: 'COMPLETED', error: null })
    const missed = bySession.get(second.session_id)
    expect(missed).toMatchObject({ status: 'ERROR', trajectory: { status: 'ERROR' } })
    expect(missed?.error).toContain('evaluator test_on_output did not run')
    expect(missed?.trajectory.metadata.evaluation).toMatchObject({
      strategy: 'test_on_output',
      error: expect.stringContaining('did not run'),
    })
    expect(status.status).toBe('completed')
    runner.close()
  })
})

describe('training_filter: mask_noncompleted (Polar masks non-COMPLETED sessions)', () => {
  it('a failed session’s traces come back with reward 0 and a zero loss mask; the default leaves them', async () => {
    const runner = await TestRunner.start('polar-mask-r1')
    runner.serveTunnel((call) => ({ status: 200, body: engineAnswer([1000 + (call.body.length % 7), 1001, 1002], [11, 12, 151645], 'ok') }))
    const run = async (taskId: string, filter: string | null) => {
      const body = taskBody(taskId, { builder: { strategy: 'per_request' }, evaluator: { strategy: 'session_completed' } })
      expect((await submit(filter === null ? body : { ...body, training_filter: filter })).status).toBe(200)
      const { session_id: sessionId, token } = await runner.takeAssignment(taskId)
      await eventually(async () => {
        const res = await SELF.fetch(`${EDGE}/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }),
        })
        expect(res.status).toBe(200)
      })
      runner.send({ type: 'session.finished', session_id: sessionId, agent_result: { status: 'failed', return_code: 2, error: 'exit 2' } })
      const status = await eventually(async () => {
        const current = await taskStatus(taskId)
        expect(current.results).toHaveLength(1)
        return current
      })
      return status.results[0]!
    }
    const masked = await run('mask-on', 'mask_noncompleted')
    expect(masked.status).toBe('ERROR')
    expect(masked.trajectory.traces).toHaveLength(1)
    expect(masked.trajectory.traces[0]).toMatchObject({
      reward: 0,
      loss_mask: [0, 0, 0],
      metadata: { training_filter: { masked: true, reason: 'non_completed' } },
    })
    expect(masked.trajectory.metadata.training_filter).toEqual({ rule: 'mask_noncompleted', masked_traces: 1, trainable_traces: 0 })
    const plain = await run('mask-off', null)
    expect(plain.trajectory.traces[0]).toMatchObject({ reward: 0, loss_mask: [1, 1, 1] })
    expect(plain.trajectory.metadata).not.toHaveProperty('training_filter')
    runner.close()
  })
})
