/**
 * A session result that cannot be handed to its task (security issue, item 2): the session ends ERROR
 * with a result that says why, the task goes on and completes, and cancelling a task whose session is
 * stuck that way really ends the task. The record is planted through the session's RPC (past the edge's
 * nesting limit, which would refuse it at the door).
 */
import { env } from 'cloudflare:test'
import { describe, expect, it } from 'vitest'
import type { SessionResult } from '../../src/contract/trajectory.ts'
import type { CompletionInput } from '../../src/durable/session/record.ts'
import type { SessionRolloutRpc } from '../../src/durable/session/session-rollout.ts'
import { cancelTask, eventually, submit, TestRunner, taskBody, taskStatus } from './rollout-support.ts'

function rolloutSession(sessionId: string): SessionRolloutRpc {
  return env.SESSIONS.get(env.SESSIONS.idFromName(sessionId)) as unknown as SessionRolloutRpc
}

function nestedText(levels: number): string {
  return `${'{"type":"object","properties":{"a":'.repeat(levels)}{}${'}}'.repeat(levels)}`
}

/** A record whose request carries tool parameters nested `levels` deep. */
function deepRecord(levels: number): CompletionInput {
  const requestText = `{"model":"Qwen/Qwen3-8B","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":${nestedText(levels)}}}]}`
  return {
    completion_id: `cmpl_deep${levels}`,
    timestamp: new Date().toISOString(),
    api: 'openai-chat',
    agent: 'default',
    model_requested: 'm',
    model_used: 'Qwen/Qwen3-8B',
    stream: false,
    status: 'ok',
    prompt_token_ids: new Uint32Array([1, 2, 3]),
    response_token_ids: new Uint32Array([4, 5, 151645]),
    response_logprobs: new Float64Array([-0.1, -0.2, -0.3]),
    finish_reason: 'stop',
    stop_reason: null,
    request_text: requestText,
    original_text: requestText,
    response_message: { role: 'assistant', content: 'ok' },
    usage: null,
    warnings: [],
    error: null,
    timing: { started_at: new Date().toISOString(), upstream_ms: 1, total_ms: 2 },
    provenance: {
      upstream_kind: 'vllm',
      upstream_url: 'runner://handoff-r',
      sampling_params: {},
      logprobs_mode: null,
      policy_version: null,
      route: 'runner:handoff-r',
    },
    metadata: {},
  } as CompletionInput
}

async function runningSession(runner: TestRunner, taskId: string, levels: number, samples = 1): Promise<string> {
  expect((await submit(taskBody(taskId, { builder: { strategy: 'per_request' }, num_samples: samples }))).status).toBe(200)
  const session = await runner.takeAssignment(taskId)
  await eventually(async () => expect((await rolloutSession(session.session_id).lifecycle())?.status).toBe('RUNNING'))
  const admission = await rolloutSession(session.session_id).admit()
  if (!admission.ok || !admission.managed) throw new Error('not admitted')
  await rolloutSession(session.session_id).recordAdmitted(admission.ticket, deepRecord(levels))
  return session.session_id
}

describe('session result hand-off', () => {
  it('a result that cannot be handed off ends the session ERROR and the task completes', async () => {
    const runner = await TestRunner.start('handoff-r')
    const sessionId = await runningSession(runner, 'handoff-1', 3_000)
    runner.send({ type: 'session.finished', session_id: sessionId, agent_result: { status: 'completed', return_code: 0 } })
    const status = await eventually(async () => {
      const current = await taskStatus('handoff-1')
      expect(current.status).not.toBe('running')
      return current
    })
    const result = status.results[0] as SessionResult
    expect(result).toMatchObject({ session_id: sessionId, status: 'ERROR' })
    expect(result.error).toContain('could not be handed')
    expect((await rolloutSession(sessionId).lifecycle())?.status).toBe('ERROR')
    runner.close()
  })

  it('a record nested to the edge limit is handed off whole', async () => {
    const runner = await TestRunner.start('handoff-r2')
    // body → tools → tool → function → parameters: 4 levels, then 2 per nested property, then {}.
    const sessionId = await runningSession(runner, 'handoff-2', 125)
    runner.send({ type: 'session.finished', session_id: sessionId, agent_result: { status: 'completed', return_code: 0 } })
    const status = await eventually(async () => {
      const current = await taskStatus('handoff-2')
      expect(current.status).toBe('completed')
      return current
    })
    const result = status.results[0] as SessionResult
    expect(result).toMatchObject({ session_id: sessionId, status: 'COMPLETED', error: null })
    expect(result.trajectory.traces).toHaveLength(1)
    runner.close()
  })

  it('cancelling a task whose finished session cannot hand off ends the task', async () => {
    const runner = await TestRunner.start('handoff-r3', { capacity: { max_init_workers: 1, max_run_workers: 1, max_postrun_workers: 1 } })
    const sessionId = await runningSession(runner, 'handoff-3', 3_000, 2)
    runner.send({ type: 'session.finished', session_id: sessionId, agent_result: { status: 'completed', return_code: 0 } })
    await eventually(async () => expect((await rolloutSession(sessionId).lifecycle())?.status).toMatch(/^(COMPLETED|ERROR)$/))
    await cancelTask('handoff-3')
    const status = await eventually(async () => {
      const current = await taskStatus('handoff-3')
      expect(current.status).toBe('failed')
      return current
    })
    expect(status.cancelled).toBe(true)
    expect(status.results).toHaveLength(2)
    expect(status.results.every((result) => result.status === 'ERROR')).toBe(true)
    runner.close()
  })
})
