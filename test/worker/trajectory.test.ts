import { env, SELF } from 'cloudflare:test'
import { describe, expect, it } from 'vitest'
import type { Trajectory } from '../../src/contract/trajectory.ts'
import type { SessionRpc } from '../../src/durable/session/session-object.ts'
import { growingSession } from '../support/records.ts'

const ADMIN = { authorization: 'Bearer test-admin-token', 'content-type': 'application/json' }
const EDGE = 'https://edge.test'

async function sessionWithTurns(sessionId: string, turns: number) {
  const res = await SELF.fetch(`${EDGE}/v1/sessions`, {
    method: 'POST',
    headers: ADMIN,
    body: JSON.stringify({ session_id: sessionId, task_id: 'task-7', metadata: { group_id: 'g7' } }),
  })
  expect(res.status).toBe(201)
  const stub = env.SESSIONS.get(env.SESSIONS.idFromName(sessionId)) as unknown as SessionRpc
  const inputs = growingSession(turns, 500, 300, 50)
  for (const input of inputs) await stub.record(input)
  return inputs
}

describe('trajectory routes', () => {
  it('builds per_request and prefix_merging trajectories from the durable log', async () => {
    const inputs = await sessionWithTurns('traj-1', 6)
    const perRequest = (await (
      await SELF.fetch(`${EDGE}/v1/sessions/traj-1/trajectory?builder=per_request`, { headers: ADMIN })
    ).json()) as Trajectory
    expect(perRequest.traces).toHaveLength(6)
    expect(perRequest.traces[3]!.response_ids).toEqual(Array.from(inputs[3]!.response_token_ids!))
    expect(perRequest.metadata).toMatchObject({ builder: 'per_request', session_id: 'traj-1', task_id: 'task-7', group_id: 'g7' })

    const merged = (await (await SELF.fetch(`${EDGE}/v1/sessions/traj-1/trajectory`, { headers: ADMIN })).json()) as Trajectory
    expect(merged.metadata.builder).toBe('prefix_merging')
    expect(merged.traces).toHaveLength(1)
    const trace = merged.traces[0]!
    // Every sampled token appears once with mask 1 and its logprob, in order.
    const sampled = trace.response_ids.filter((_, i) => trace.loss_mask[i] === 1)
    expect(sampled).toEqual(inputs.flatMap((input) => Array.from(input.response_token_ids!)))
    const sampledLogprobs = trace.response_logprobs!.filter((_, i) => trace.loss_mask[i] === 1)
    expect(sampledLogprobs).toEqual(inputs.flatMap((input) => Array.from(input.response_logprobs!)))
    expect(trace.prompt_ids).toEqual(Array.from(inputs[0]!.prompt_token_ids!))
  })

  it('exports trainer formats and rejects bad builder input with a 400', async () => {
    await sessionWithTurns('traj-2', 3)
    const nemo = await SELF.fetch(`${EDGE}/v1/sessions/traj-2/trajectory?builder=per_request&format=nemo-gym`, { headers: ADMIN })
    expect(nemo.headers.get('content-type')).toContain('ndjson')
    const rows = (await nemo.text())
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line))
    expect(rows.length).toBeGreaterThan(0)
    const result = (await (
      await SELF.fetch(`${EDGE}/v1/sessions/traj-2/trajectory?format=session_result`, { headers: ADMIN })
    ).json()) as Record<string, unknown>
    expect(result).toMatchObject({ session_id: 'traj-2', task_id: 'task-7' })
    const badBuilder = await SELF.fetch(`${EDGE}/v1/sessions/traj-2/trajectory?builder=magic`, { headers: ADMIN })
    expect(badBuilder.status).toBe(400)
    const badConfig = await SELF.fetch(
      `${EDGE}/v1/sessions/traj-2/trajectory?config=${encodeURIComponent('{"max_context_drift_tokens":"lots"}')}`,
      { headers: ADMIN },
    )
    expect(badConfig.status).toBe(400)
    expect(((await badConfig.json()) as { error: { param: string } }).error.param).toBe('config')
  })

  it('finalize writes the trajectory to R2 under the documented key', async () => {
    const inputs = await sessionWithTurns('traj-3', 4)
    const res = await SELF.fetch(`${EDGE}/v1/sessions/traj-3/finalize`, {
      method: 'POST',
      headers: ADMIN,
      body: JSON.stringify({ builder: 'prefix_merging' }),
    })
    expect(res.status).toBe(200)
    const finalization = (await res.json()) as { trajectory_key: string; trace_count: number; completion_count: number }
    expect(finalization).toMatchObject({ trajectory_key: 'trajectories/traj-3/prefix_merging.json', trace_count: 1, completion_count: 4 })
    const object = await env.BLOBS.get(finalization.trajectory_key)
    const stored = (await object!.json()) as Trajectory
    expect(stored.traces[0]!.response_ids.filter((_, i) => stored.traces[0]!.loss_mask[i] === 1)).toEqual(
      inputs.flatMap((input) => Array.from(input.response_token_ids!)),
    )
    const info = (await (await SELF.fetch(`${EDGE}/v1/sessions/traj-3`, { headers: ADMIN })).json()) as {
      finalized: { trajectory_key: string }
    }
    expect(info.finalized.trajectory_key).toBe(finalization.trajectory_key)
  })
})
