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
    expect(((await badConfig.json()) as { error: { param: string } }).error.param).toBe('config.max_context_drift_tokens')
  })

  it('checks builder configs at the route for every builder: 400 naming the key, Polar keys ignored with a warning', async () => {
    await sessionWithTurns('traj-6', 2)
    const get = (query: string) => SELF.fetch(`${EDGE}/v1/sessions/traj-6/trajectory?${query}`, { headers: ADMIN })
    const config = (value: unknown) => `config=${encodeURIComponent(JSON.stringify(value))}`
    // Polar's PerRequestBuilder accepts and ignores any config: so does Rollgate, and says so.
    const perRequest = await get(`builder=per_request&${config({ bogus: 1 })}`)
    expect(perRequest.status).toBe(200)
    expect(((await perRequest.json()) as Trajectory).metadata.builder_warnings).toEqual([
      { code: 'builder_config_ignored', message: 'per_request ignores config.bogus (it does not apply to Rollgate)' },
    ])
    const notObject = await get(`builder=per_request&${config([1])}`)
    expect(notObject.status).toBe(400)
    expect(((await notObject.json()) as { error: { param: string } }).error.param).toBe('config')
    const tokenizer = await get(`builder=prefix_merging&${config({ tokenizer_name_or_path: 'Qwen/Qwen3-8B', strict: true })}`)
    expect(tokenizer.status).toBe(200)
    const merged = (await tokenizer.json()) as Trajectory
    expect(merged.metadata.builder_warnings).toHaveLength(1)
    const bogus = await get(`builder=prefix_merging&${config({ bogus: 1 })}`)
    expect(bogus.status).toBe(400)
    const error = ((await bogus.json()) as { error: { param: string; message: string } }).error
    expect(error.param).toBe('config.bogus')
    expect(error.message).toMatch(
      /^invalid prefix_merging builder config: config\.bogus: unknown prefix_merging option \(known: end_of_turn_token_id, /,
    )
    for (const body of [
      { builder: 'prefix_merging', config: { bogus: 1 } },
      { builder: 'per_request', config: 'x' },
    ]) {
      const finalize = await SELF.fetch(`${EDGE}/v1/sessions/traj-6/finalize`, {
        method: 'POST',
        headers: ADMIN,
        body: JSON.stringify(body),
      })
      expect(finalize.status).toBe(400)
      await finalize.body?.cancel()
    }
    expect(
      ((await (await SELF.fetch(`${EDGE}/v1/sessions/traj-6`, { headers: ADMIN })).json()) as { finalized: unknown }).finalized,
    ).toBeNull()
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

  it('finalize closes the session: a second finalize is idempotent, another builder is a 409, records are refused', async () => {
    const inputs = await sessionWithTurns('traj-4', 3)
    const finalize = (body: unknown) =>
      SELF.fetch(`${EDGE}/v1/sessions/traj-4/finalize`, { method: 'POST', headers: ADMIN, body: JSON.stringify(body) })
    const first = await finalize({ builder: 'per_request' })
    expect(first.status).toBe(200)
    const firstBody = (await first.json()) as { finalized_at: string; trajectory_key: string; already_finalized: boolean }
    expect(firstBody.already_finalized).toBe(false)
    const uploaded = (await env.BLOBS.head(firstBody.trajectory_key))!.uploaded.getTime()

    const again = await finalize({ builder: 'per_request' })
    expect(again.status).toBe(200)
    const againBody = (await again.json()) as { finalized_at: string; already_finalized: boolean }
    expect(againBody).toMatchObject({ finalized_at: firstBody.finalized_at, already_finalized: true })
    expect((await env.BLOBS.head(firstBody.trajectory_key))!.uploaded.getTime()).toBe(uploaded)

    const other = await finalize({ builder: 'prefix_merging' })
    expect(other.status).toBe(409)
    expect(((await other.json()) as { error: { message: string; param: string } }).error).toMatchObject({
      param: 'builder',
      message: expect.stringContaining('already finalized'),
    })

    const stub = env.SESSIONS.get(env.SESSIONS.idFromName('traj-4')) as unknown as SessionRpc
    const late = { ...inputs[0]!, completion_id: 'cmpl_after_finalize' }
    const refused = await stub.record(late).then(
      () => null,
      (error: Error) => error.message,
    )
    expect(refused).toMatch(/^session closed: session traj-4 was finalized at/)
    expect((await stub.summary())!.completion_count).toBe(3)
  })

  it('reads the stored trajectory back from R2 (404 before finalize)', async () => {
    await sessionWithTurns('traj-5', 2)
    const before = await SELF.fetch(`${EDGE}/v1/sessions/traj-5/trajectory/stored`, { headers: ADMIN })
    expect(before.status).toBe(404)
    await before.body?.cancel()
    const done = await SELF.fetch(`${EDGE}/v1/sessions/traj-5/finalize`, { method: 'POST', headers: ADMIN, body: '{}' })
    const { trajectory_key } = (await done.json()) as { trajectory_key: string }
    const stored = await SELF.fetch(`${EDGE}/v1/sessions/traj-5/trajectory/stored`, { headers: ADMIN })
    expect(stored.status).toBe(200)
    expect(stored.headers.get('x-rollgate-trajectory-key')).toBe(trajectory_key)
    const fromRoute = (await stored.json()) as Trajectory
    const fromR2 = (await (await env.BLOBS.get(trajectory_key))!.json()) as Trajectory
    expect(fromRoute).toEqual(fromR2)
    expect(fromRoute.metadata).toMatchObject({ session_id: 'traj-5', builder: 'prefix_merging' })
  })

  it('exports a session created without task_id as session_result with the documented placeholder task id', async () => {
    const res = await SELF.fetch(`${EDGE}/v1/sessions`, { method: 'POST', headers: ADMIN, body: JSON.stringify({ session_id: 'traj-7' }) })
    expect(res.status).toBe(201)
    const stub = env.SESSIONS.get(env.SESSIONS.idFromName('traj-7')) as unknown as SessionRpc
    for (const input of growingSession(2, 500, 300, 50)) await stub.record(input)
    for (const format of ['session_result', 'session-result']) {
      const result = await SELF.fetch(`${EDGE}/v1/sessions/traj-7/trajectory?format=${format}`, { headers: ADMIN })
      expect(result.status).toBe(200)
      expect(await result.json()).toMatchObject({ session_id: 'traj-7', task_id: 'unknown-task', status: 'COMPLETED' })
    }
  })

  it('reads after_seq and limit strictly: empty means from the start, malformed is a 400 naming the parameter', async () => {
    await sessionWithTurns('traj-8', 3)
    const page = (query: string) => SELF.fetch(`${EDGE}/v1/sessions/traj-8/completions?${query}`, { headers: ADMIN })
    for (const query of ['after_seq=&limit=', 'after_seq=-1', '']) {
      const res = await page(query)
      expect(res.status, query).toBe(200)
      expect(((await res.json()) as { completions: { seq: number }[] }).completions.map((record) => record.seq)).toEqual([0, 1, 2])
    }
    for (const [query, param] of [
      ['after_seq=%20', 'after_seq'],
      ['after_seq=0x0', 'after_seq'],
      ['after_seq=1.0', 'after_seq'],
      ['limit=0', 'limit'],
      ['limit=ten', 'limit'],
    ] as const) {
      const res = await page(query)
      expect(res.status, query).toBe(400)
      expect(((await res.json()) as { error: { param: string } }).error.param).toBe(param)
    }
    const events = await SELF.fetch(`${EDGE}/v1/events?timeout_seconds=99999`, { headers: ADMIN })
    expect(events.status).toBe(400)
    expect(((await events.json()) as { error: { message: string } }).error.message).toBe(
      'timeout_seconds must be a number in [0, 3600], got "99999"',
    )
  })
})
