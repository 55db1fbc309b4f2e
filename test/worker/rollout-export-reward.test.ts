/**
 * An evaluated rollout session's trajectory route carries its evaluation: `GET /v1/sessions/:id/trajectory` in
 * every format gives the rewards (here per trace, from a runner-side evaluator) and the evaluation details of
 * the session's result in the task's results, and `GET /rollout/session/:id` its reward. A session not
 * evaluated says so (`x-rollgate-evaluation`): still running (`pending`), asked with another builder than its
 * task's (`other_builder`), or a bare capture session (`not_evaluated`); their traces have `reward: null`.
 */
import { env, SELF } from 'cloudflare:test'
import { describe, expect, it } from 'vitest'
import type { SessionResult } from '../../src/contract/trajectory.ts'
import type { SessionRpc } from '../../src/durable/session/session-object.ts'
import type { SessionRolloutRpc } from '../../src/durable/session/session-rollout.ts'
import { completionInput } from '../support/records.ts'
import { ADMIN, EDGE, eventually, submit, TestRunner, taskBody, taskStatus } from './rollout-support.ts'

type Session = SessionRolloutRpc & SessionRpc

async function get(path: string): Promise<Response> {
  const response = await SELF.fetch(`${EDGE}${path}`, { headers: ADMIN })
  expect(response.status).toBe(200)
  return response
}

async function exported(sessionId: string, query: string): Promise<{ evaluation: string | null; text: string }> {
  const response = await get(`/v1/sessions/${sessionId}/trajectory?${query}`)
  return { evaluation: response.headers.get('x-rollgate-evaluation'), text: await response.text() }
}

function rows(text: string): Record<string, unknown>[] {
  return text
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as Record<string, unknown>)
}

describe('an evaluated rollout session exports its evaluation', () => {
  it('every format and the session route carry the task result’s rewards; not evaluated is said', async () => {
    const runner = await TestRunner.start('reward-r1')
    const evaluator = { strategy: 'test_on_output', config: { test_command: 'true', expected_output_json: { 'test::a': 'PASSED' } } }
    expect((await submit(taskBody('reward-1', { evaluator, builder: { strategy: 'per_request' } }))).status).toBe(200)
    const { session_id: sessionId } = await runner.takeAssignment('reward-1')
    const session = env.SESSIONS.get(env.SESSIONS.idFromName(sessionId)) as unknown as Session
    await eventually(async () => expect((await session.lifecycle())?.status).toBe('RUNNING'))
    for (const id of ['c1', 'c2']) {
      const admission = await session.admit()
      if (!admission.ok || !admission.managed) throw new Error('not admitted')
      await session.recordAdmitted(admission.ticket, completionInput({ completion_id: id }))
    }

    // Running: not evaluated yet, and said so.
    const running = await exported(sessionId, 'format=trajectory')
    expect(running.evaluation).toBe('pending')
    expect((JSON.parse(running.text) as SessionResult['trajectory']).traces.map((trace) => trace.reward)).toEqual([null, null])
    expect(await (await get(`/rollout/session/${sessionId}`)).json()).toMatchObject({ status: 'RUNNING', evaluated: false, reward: null })

    runner.send({
      type: 'session.finished',
      session_id: sessionId,
      agent_result: { status: 'completed', return_code: 0 },
      eval_result: { outcome_reward: null, trace_rewards: [0.25, 0.75], metadata: { passed: 1 } },
    })
    const status = await eventually(async () => {
      const current = await taskStatus('reward-1')
      expect(current.status).toBe('completed')
      return current
    })
    const result = status.results[0] as SessionResult
    expect(result.trajectory.traces.map((trace) => trace.reward)).toEqual([0.25, 0.75])
    expect(result.trajectory.metadata.evaluation).toMatchObject({ strategy: 'test_on_output', trace_rewards: [0.25, 0.75], passed: 1 })

    // Without a builder the route uses the task's (per_request): the export is the task's result.
    const asResult = await exported(sessionId, 'format=session_result')
    expect(asResult.evaluation).toBe('evaluated')
    expect(JSON.parse(asResult.text)).toEqual(result)
    const asTrajectory = await exported(sessionId, 'format=trajectory&builder=per_request')
    expect(asTrajectory.evaluation).toBe('evaluated')
    expect(JSON.parse(asTrajectory.text)).toEqual(result.trajectory)
    const nemo = await exported(sessionId, 'format=nemo-gym')
    expect(rows(nemo.text).map((row) => row.reward)).toEqual([0.25, 0.75])
    const tokens = await exported(sessionId, 'format=sft-tokens')
    expect(rows(tokens.text).map((row) => (row.metadata as { reward: number }).reward)).toEqual([0.25, 0.75])
    const sft = await exported(sessionId, 'format=sft')
    expect({ evaluation: sft.evaluation, rows: rows(sft.text).length }).toEqual({ evaluation: 'evaluated', rows: 2 })

    expect(await (await get(`/rollout/session/${sessionId}`)).json()).toMatchObject({
      status: 'COMPLETED',
      evaluated: true,
      reward: 0.5,
      result_status: 'COMPLETED',
      result_path: status.sessions[0]!.result_path,
      eval_result: { trace_rewards: [0.25, 0.75] },
    })
    expect(status.sessions[0]!.reward).toBe(0.5)

    // Another builder than the task's: other traces than the rewards belong to — said, rewards null.
    const other = await exported(sessionId, 'format=trajectory&builder=prefix_merging')
    expect(other.evaluation).toBe('other_builder')
    const otherTraces = (JSON.parse(other.text) as SessionResult['trajectory']).traces
    expect(otherTraces.map((trace) => trace.reward)).toEqual(otherTraces.map(() => null))

    // A bare capture session: nothing evaluates it.
    const created = await SELF.fetch(`${EDGE}/v1/sessions`, { method: 'POST', headers: ADMIN, body: '{}' })
    const bare = (await created.json()) as { session_id: string }
    expect((await exported(bare.session_id, 'format=trajectory')).evaluation).toBe('not_evaluated')
    runner.close()
  })
})
