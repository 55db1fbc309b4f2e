/**
 * Session lifecycle, dispatch and the inference tunnel in workerd: a scripted runner over a real
 * WebSocket to the runner hub Durable Object; budgets driven by Durable Object alarms
 * (`runDurableObjectAlarm`); partial trajectories; runner loss; early stop.
 */
import { env, evictDurableObject, runDurableObjectAlarm, SELF } from 'cloudflare:test'
import { describe, expect, it } from 'vitest'
import type { CompletionRecord } from '../../src/contract/completion-record.ts'
import type { RolloutEvent, RolloutStatus } from '../../src/contract/rollout.ts'
import type { SessionResult } from '../../src/contract/trajectory.ts'
import type { SessionRolloutRpc } from '../../src/durable/session/session-rollout.ts'
import { verifySessionToken } from '../../src/contract/session-token.ts'
import {
  ADMIN,
  cancelTask,
  EDGE,
  engineAnswer,
  eventually,
  sessionToken,
  sleep,
  submit,
  TestRunner,
  taskBody,
  taskStatus,
} from './rollout-support.ts'

function sessionStub(sessionId: string) {
  return env.SESSIONS.get(env.SESSIONS.idFromName(sessionId))
}

function rolloutSession(sessionId: string): SessionRolloutRpc {
  return sessionStub(sessionId) as unknown as SessionRolloutRpc
}

async function lifecycleStatus(sessionId: string) {
  return (await rolloutSession(sessionId).lifecycle())?.status
}

async function chat(sessionId: string, content: string, stream = false) {
  const token = await sessionToken(sessionId)
  return SELF.fetch(`${EDGE}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'harness-model', messages: [{ role: 'user', content }], stream }),
  })
}

async function completions(sessionId: string): Promise<CompletionRecord[]> {
  const res = await SELF.fetch(`${EDGE}/v1/sessions/${sessionId}/completions`, { headers: ADMIN })
  return ((await res.json()) as { completions: CompletionRecord[] }).completions
}

/** Serve tunnelled engine calls with a fixed answer; prompt ids grow per call so turns are distinct. */
function serveEngine(runner: TestRunner, chunkChars?: number) {
  let calls = 0
  runner.serveTunnel((call) => {
    calls++
    const body = JSON.parse(call.body) as { model: string }
    if (call.path !== '/v1/chat/completions' || body.model !== 'Qwen/Qwen3-8B')
      return { status: 400, body: JSON.stringify({ error: { message: `unexpected ${call.path} ${body.model}` } }) }
    const prompt = Array.from({ length: 10 + calls * 4 }, (_, i) => 1000 + i)
    return { status: 200, body: engineAnswer(prompt, [11, 12, 13, 151645], `answer ${calls}`), ...(chunkChars ? { chunkChars } : {}) }
  })
}

describe('dispatch and the full lifecycle', () => {
  it('assigns, walks REGISTERED → … → COMPLETED, tunnels calls through the runner and builds the result', async () => {
    const runner = await TestRunner.start('life-r1')
    serveEngine(runner, 300)
    expect(
      (
        await submit(
          taskBody('life-1', {
            evaluator: { strategy: 'session_completed' },
            builder: { strategy: 'per_request' },
            metadata: { group_id: 'gl' },
          }),
        )
      ).status,
    ).toBe(200)
    const { session_id: sessionId, token, env: injected, route, base_urls } = await runner.takeAssignment('life-1', ['INITIALIZING'])
    expect(route).toBe('runner')
    expect(await verifySessionToken(token, 'test-signing-key')).toBe(sessionId)
    expect(injected).toMatchObject({
      OPENAI_API_KEY: token,
      OPENAI_BASE_URL: `${EDGE}/v1`,
      ANTHROPIC_BASE_URL: EDGE,
      SESSION_ID: sessionId,
      TASK_ID: 'life-1',
    })
    expect(base_urls.openai).toBe(`${EDGE}/v1`)
    await eventually(async () => expect(await lifecycleStatus(sessionId)).toBe('INITIALIZING'))
    // INITIALIZING: still refused.
    expect((await chat(sessionId, 'too early')).status).toBe(403)
    runner.send({ type: 'session.status', session_id: sessionId, status: 'READY' })
    runner.send({ type: 'session.status', session_id: sessionId, status: 'RUNNING' })
    await eventually(async () => expect(await lifecycleStatus(sessionId)).toBe('RUNNING'))

    const plain = await chat(sessionId, 'first')
    expect(plain.status).toBe(200)
    expect(((await plain.json()) as { choices: { message: { content: string } }[] }).choices[0]!.message.content).toBe('answer 1')
    const streamed = await chat(sessionId, 'second', true)
    expect(streamed.status).toBe(200)
    expect(await streamed.text()).toContain('answer 2')
    const records = await completions(sessionId)
    expect(records).toHaveLength(2)
    for (const record of records) {
      expect(record).toMatchObject({ status: 'ok', trainable: true, response_token_ids: [11, 12, 13, 151645] })
      expect(record.provenance).toMatchObject({ route: 'runner:life-r1', upstream_url: 'runner://life-r1' })
      expect(record.request.model).toBe('Qwen/Qwen3-8B')
    }
    expect(records.map((record) => record.stream)).toEqual([false, true])

    runner.send({ type: 'session.finished', session_id: sessionId, agent_result: { status: 'completed', return_code: 0 } })
    const status = await eventually(async () => {
      const current = await taskStatus('life-1')
      expect(current.status).toBe('completed')
      return current
    })
    const result = status.results[0] as SessionResult
    expect(result).toMatchObject({
      session_id: sessionId,
      status: 'COMPLETED',
      node_id: 'life-r1',
      error: null,
      metadata: { group_id: 'gl' },
    })
    expect(result.trajectory.status).toBe('COMPLETED')
    expect(result.trajectory.traces).toHaveLength(2)
    expect(result.trajectory.traces.map((trace) => trace.reward)).toEqual([1, 1])
    expect(result.trajectory.metadata).toMatchObject({
      evaluation: { strategy: 'session_completed', outcome_reward: 1 },
      agent_result: { status: 'completed' },
    })
    expect(result.timing.run_ms).toBeGreaterThanOrEqual(0)
    const state = await rolloutSession(sessionId).lifecycle()
    expect(state?.status).toBe('COMPLETED')
    // The finished session no longer takes calls.
    // The finished session's token is revoked.
    const late = await chat(sessionId, 'too late')
    expect(late.status).toBe(401)
    expect(((await late.json()) as { error: { message: string } }).error.message).toContain(
      'session token revoked: session ended COMPLETED',
    )
    runner.close()
  })

  it('emits the lifecycle on the event stream (SSE) in order', async () => {
    const runner = await TestRunner.start('life-r-events')
    const events = await SELF.fetch(`${EDGE}/v1/events?task_id=life-events&timeout_seconds=10`, { headers: ADMIN })
    expect(events.headers.get('content-type')).toContain('text/event-stream')
    const reader = events.body!.getReader()
    expect((await submit(taskBody('life-events'))).status).toBe(200)
    const session = await runner.takeAssignment('life-events')
    runner.send({ type: 'session.finished', session_id: session.session_id, agent_result: { status: 'completed', return_code: 0 } })
    const seen: RolloutEvent[] = []
    const decoder = new TextDecoder()
    let buffer = ''
    const deadline = Date.now() + 5_000
    while (!seen.some((event) => event.type === 'task.completed') && Date.now() < deadline) {
      const { value, done } = await reader.read()
      if (done) break
      buffer += decoder.decode(value, { stream: true })
      for (let split = buffer.indexOf('\n\n'); split >= 0; split = buffer.indexOf('\n\n')) {
        const frame = buffer.slice(0, split)
        buffer = buffer.slice(split + 2)
        const data = frame.split('\n').find((line) => line.startsWith('data: '))
        if (data && !frame.includes('event: hello')) seen.push(JSON.parse(data.slice(6)) as RolloutEvent)
      }
    }
    await reader.cancel()
    const statuses = seen.flatMap((event) => (event.type === 'session.state_changed' ? [event.status] : []))
    expect(statuses).toEqual(['REGISTERED', 'INITIALIZING', 'READY', 'RUNNING', 'POST_RUN', 'BUILDING', 'EVALUATING', 'COMPLETED'])
    expect(seen[0]).toMatchObject({ type: 'task.submitted', task_id: 'life-events' })
    expect(seen.at(-1)).toMatchObject({ type: 'task.completed', status: 'completed' })
    // The task announces the session it counted (after counting it), before it announces its own end.
    const resolved = seen.findIndex((event) => event.type === 'task.session_resolved')
    expect(resolved).toBeGreaterThan(0)
    expect(resolved).toBeLessThan(seen.length - 1)
    expect(seen[resolved]).toMatchObject({
      session_id: session.session_id,
      status: 'COMPLETED',
      completed_sessions: 1,
      total_sessions: 1,
    })
    runner.close()
  })

  it('picks the runner with the lowest pressure score and honours dispatch_priority', async () => {
    const busy = await TestRunner.start('score-busy', { capacity: { max_init_workers: 2, max_run_workers: 2, max_postrun_workers: 2 } })
    busy.send({ type: 'heartbeat', metrics: { run_inflight: 2, ready_depth: 0 } })
    const idle = await TestRunner.start('score-idle', { capacity: { max_init_workers: 2, max_run_workers: 2, max_postrun_workers: 2 } })
    // Wait until the hub has the busy runner's heartbeat (the fact the choice depends on), not for a fixed time.
    await eventually(async () => {
      const overview = (await (await SELF.fetch(`${EDGE}/rollout/status`, { headers: ADMIN })).json()) as RolloutStatus
      expect(overview.nodes.nodes.find((node) => node.node_id === 'score-busy')?.metrics.run_inflight).toBe(2)
    })
    expect((await submit(taskBody('score-1'))).status).toBe(200)
    const assigned = await idle.next('assign')
    expect(assigned.session.task_id).toBe('score-1')
    idle.send({ type: 'ack', session_id: assigned.session.session_id, accepted: true })
    await cancelTask('score-1')
    busy.close()
    idle.close()

    // Priority: with no runner connected both tasks queue; the first runner gets the high-priority one first.
    expect((await submit(taskBody('prio-low', { dispatch_priority: 0 }))).status).toBe(200)
    expect((await submit(taskBody('prio-high', { dispatch_priority: 90 }))).status).toBe(200)
    await eventually(async () => {
      const overview = (await (await SELF.fetch(`${EDGE}/rollout/status`, { headers: ADMIN })).json()) as RolloutStatus
      expect(overview.pipeline.pending_sessions).toBe(2)
    })
    const single = await TestRunner.start('prio-runner', {
      capacity: { max_init_workers: 1, max_run_workers: 1, max_postrun_workers: 1, ready_buffer: 0 },
    })
    const first = await single.next('assign')
    expect(first.session.task_id).toBe('prio-high')
    await cancelTask('prio-high')
    await cancelTask('prio-low')
    single.close()
  })

  it('re-dispatches a session whose runner refuses it or is lost before RUNNING', async () => {
    const flaky = await TestRunner.start('lost-early')
    expect((await submit(taskBody('lost-1'))).status).toBe(200)
    const { session_id: sessionId } = await flaky.takeAssignment('lost-1', ['INITIALIZING'])
    await eventually(async () => expect(await lifecycleStatus(sessionId)).toBe('INITIALIZING'))
    flaky.close(1000, 'shutdown')
    await eventually(async () => expect(await lifecycleStatus(sessionId)).toBe('REGISTERED'))

    const picky = await TestRunner.start('picky')
    const offered = await picky.next('assign')
    expect(offered.session.session_id).toBe(sessionId)
    picky.send({ type: 'ack', session_id: sessionId, accepted: false, reason: 'disk full' })
    picky.close(1000, 'shutdown')
    const steady = await TestRunner.start('steady')
    const again = await steady.takeAssignment('lost-1')
    expect(again.session_id).toBe(sessionId)
    await eventually(async () => expect(await lifecycleStatus(sessionId)).toBe('RUNNING'))
    const state = await rolloutSession(sessionId).lifecycle()
    expect(state).toMatchObject({ runner_id: 'steady', dispatch_attempts: 3 })
    steady.close()
  })

  it('a runner lost during RUNNING ends its sessions with the partial trajectory (no completion lost)', async () => {
    const runner = await TestRunner.start('lost-late')
    serveEngine(runner)
    expect((await submit(taskBody('lost-2', { builder: { strategy: 'per_request' } }))).status).toBe(200)
    const { session_id: sessionId } = await runner.takeAssignment('lost-2')
    await eventually(async () => expect(await lifecycleStatus(sessionId)).toBe('RUNNING'))
    for (const turn of ['a', 'b', 'c']) expect((await chat(sessionId, turn)).status).toBe(200)
    runner.close(1000, 'shutdown')
    const status = await eventually(async () => {
      const current = await taskStatus('lost-2')
      expect(current.status).not.toBe('running')
      return current
    })
    const result = status.results[0] as SessionResult
    expect(result.status).toBe('ERROR')
    expect(result.error).toContain('runner closed')
    expect(result.trajectory.traces).toHaveLength(3)
    expect(result.trajectory.metadata.agent_result).toMatchObject({ status: 'failed' })
    const overview = (await (await SELF.fetch(`${EDGE}/rollout/status`, { headers: ADMIN })).json()) as RolloutStatus
    expect(overview.nodes.nodes.find((node) => node.node_id === 'lost-late')).toBeUndefined()
  })
})

describe('draining', () => {
  it('a draining runner gets no new sessions and hears `drained` once it holds none', async () => {
    const runner = await TestRunner.start('drain-r')
    expect((await submit(taskBody('drain-1'))).status).toBe(200)
    const { session_id: sessionId } = await runner.takeAssignment('drain-1')
    await eventually(async () => expect(await lifecycleStatus(sessionId)).toBe('RUNNING'))
    runner.send({ type: 'drain' })
    await eventually(async () => {
      const overview = (await (await SELF.fetch(`${EDGE}/rollout/status`, { headers: ADMIN })).json()) as RolloutStatus
      expect(overview.nodes.nodes.find((node) => node.node_id === 'drain-r')).toMatchObject({ draining: true, sessions: 1 })
    })
    expect((await submit(taskBody('drain-2'))).status).toBe(200)
    runner.send({ type: 'session.finished', session_id: sessionId, agent_result: { status: 'completed', return_code: 0 } })
    await runner.next('drained')
    await sleep(100)
    expect(runner.received.some((message) => message.type === 'assign' && message.session.task_id === 'drain-2')).toBe(false)
    expect((await taskStatus('drain-2')).sessions[0]!.status).toBe('REGISTERED')
    await cancelTask('drain-2')
    runner.close(1000, 'drained')
  })

  it('refuses a runner speaking another protocol version', async () => {
    const runner = await TestRunner.connect('old-runner')
    runner.send({
      type: 'register',
      protocol_version: 99,
      runner_id: 'old-runner',
      capacity: { max_init_workers: 1, max_run_workers: 1, max_postrun_workers: 1 },
    })
    const error = await runner.next('error')
    expect(error.message).toContain('protocol_version 99 unsupported')
    await eventually(async () => expect(runner.closed).toBe(true))
  })
})

describe('acknowledgements', () => {
  it('re-queues an assignment the runner does not acknowledge in time (hub alarm) and tells the runner to drop it', async () => {
    const silent = await TestRunner.start('no-ack')
    expect((await submit(taskBody('ack-1'))).status).toBe(200)
    const { session } = await silent.next('assign', (message) => message.session.task_id === 'ack-1')
    // Not acknowledged: the hub's alarm is set for the acknowledgement deadline.
    expect(await runDurableObjectAlarm(env.RUNNERS.get(env.RUNNERS.idFromName('default')))).toBe(true)
    const cancel = await silent.next('cancel', (message) => message.session_id === session.session_id)
    expect(cancel.reason).toContain('not acknowledged')
    // Back in the queue, then offered again (to the only runner there is).
    const again = await silent.next('assign', (message) => message.session.session_id === session.session_id)
    expect(await verifySessionToken(again.session.token, 'test-signing-key')).toBe(session.session_id)
    expect((await rolloutSession(session.session_id).lifecycle())?.dispatch_attempts).toBe(2)
    await cancelTask('ack-1')
    silent.close()
  })
})

describe('hibernation', () => {
  it('a registered runner survives the hub being evicted (hibernatable WebSocket) and still gets work', async () => {
    const runner = await TestRunner.start('hibernating')
    await evictDurableObject(env.RUNNERS.get(env.RUNNERS.idFromName('default')))
    expect((await submit(taskBody('hibernate-1'))).status).toBe(200)
    const session = await runner.takeAssignment('hibernate-1')
    await eventually(async () => expect(await lifecycleStatus(session.session_id)).toBe('RUNNING'))
    const overview = (await (await SELF.fetch(`${EDGE}/rollout/status`, { headers: ADMIN })).json()) as RolloutStatus
    expect(overview.nodes.nodes.find((node) => node.node_id === 'hibernating')).toMatchObject({ connected: true, healthy: true })
    await cancelTask('hibernate-1')
    runner.close()
  })
})

describe('budgets (Durable Object alarms)', () => {
  it('the agent budget starts at RUNNING and a timeout still builds the partial trajectory (TIMEOUT)', async () => {
    const runner = await TestRunner.start('budget-agent')
    serveEngine(runner)
    expect(
      (await submit(taskBody('budget-1', { agent_timeout_seconds: 0.4, timeout_seconds: 600, builder: { strategy: 'per_request' } })))
        .status,
    ).toBe(200)
    const { session_id: sessionId } = await runner.takeAssignment('budget-1', ['INITIALIZING', 'READY'])
    await eventually(async () => expect(await lifecycleStatus(sessionId)).toBe('READY'))
    // READY is not counted against the agent budget: no agent deadline is armed before RUNNING.
    expect((await rolloutSession(sessionId).lifecycle())!.agent_deadline).toBeNull()
    runner.send({ type: 'session.status', session_id: sessionId, status: 'RUNNING' })
    await eventually(async () => expect(await lifecycleStatus(sessionId)).toBe('RUNNING'))
    const state = await rolloutSession(sessionId).lifecycle()
    expect(state!.agent_deadline! - state!.times.running_at!).toBe(400)
    expect((await chat(sessionId, 'one turn')).status).toBe(200)
    await sleep(Math.max(0, state!.agent_deadline! - Date.now()) + 20)
    await runDurableObjectAlarm(sessionStub(sessionId))
    const cancel = await runner.next('cancel', (message) => message.session_id === sessionId)
    expect(cancel.reason).toContain('TIMEOUT')
    const result = (await eventually(async () => {
      const current = await rolloutSession(sessionId).result()
      expect(current).not.toBeNull()
      return current
    })) as SessionResult
    expect(result.status).toBe('TIMEOUT')
    expect(result.trajectory.traces).toHaveLength(1)
    expect(result.trajectory.metadata.agent_result).toMatchObject({ status: 'timeout', timeout_source: 'agent', timeout_stage: 'exec' })
    expect(result.error).toContain('agent budget of 0.4 s exhausted')
    runner.close()
  })

  it('the session budget starts at INIT (waiting in REGISTERED is bounded separately) and times out before RUNNING without a build', async () => {
    const runner = await TestRunner.start('budget-session')
    expect((await submit(taskBody('budget-2', { timeout_seconds: 0.3 }))).status).toBe(200)
    const { session_id: sessionId } = await runner.takeAssignment('budget-2', ['INITIALIZING'])
    await eventually(async () => expect(await lifecycleStatus(sessionId)).toBe('INITIALIZING'))
    const state = await rolloutSession(sessionId).lifecycle()
    expect(state!.session_deadline! - state!.times.init_at!).toBe(300)
    await sleep(Math.max(0, state!.session_deadline! - Date.now()) + 20)
    await runDurableObjectAlarm(sessionStub(sessionId))
    await eventually(async () => expect(await lifecycleStatus(sessionId)).toBe('TIMEOUT'))
    const result = await rolloutSession(sessionId).result()
    expect(result).toMatchObject({ status: 'TIMEOUT', trajectory: { traces: [] } })
    expect(result!.error).toContain('session budget of 0.3 s exhausted in INITIALIZING')
    runner.close()

    // Nobody to run it: the queue wait is bounded by the same budget.
    expect((await submit(taskBody('budget-3', { timeout_seconds: 0.2 }))).status).toBe(200)
    const queued = (await taskStatus('budget-3')).sessions[0]!.session_id
    await sleep(250)
    await runDurableObjectAlarm(sessionStub(queued))
    await eventually(async () => expect((await taskStatus('budget-3')).status).toBe('failed'))
    expect((await taskStatus('budget-3')).results[0]!.error).toContain('exhausted in REGISTERED')
  })
})

describe('early stop', () => {
  it('cancels stragglers once early_stop_min_usable_sessions usable sessions exist', async () => {
    const runner = await TestRunner.start('early-r', { capacity: { max_init_workers: 4, max_run_workers: 4, max_postrun_workers: 4 } })
    expect((await submit(taskBody('early-1', { num_samples: 3, early_stop_min_usable_sessions: 1 }))).status).toBe(200)
    const sessions = [
      await runner.takeAssignment('early-1'),
      await runner.takeAssignment('early-1'),
      await runner.takeAssignment('early-1'),
    ]
    for (const session of sessions) await eventually(async () => expect(await lifecycleStatus(session.session_id)).toBe('RUNNING'))
    runner.send({ type: 'session.finished', session_id: sessions[0]!.session_id, agent_result: { status: 'completed', return_code: 0 } })
    const status = await eventually(async () => {
      const current = await taskStatus('early-1')
      expect(current.status).toBe('completed')
      return current
    })
    expect(status).toMatchObject({ early_stopped: true, usable_sessions: 1, completed_sessions: 3 })
    const byId = new Map(status.results.map((result) => [result.session_id, result]))
    expect(byId.get(sessions[0]!.session_id)!.status).toBe('COMPLETED')
    for (const straggler of sessions.slice(1)) {
      expect(byId.get(straggler.session_id)).toMatchObject({ status: 'ERROR', error: 'early stop: enough usable sessions' })
      const cancel = await runner.next('cancel', (message) => message.session_id === straggler.session_id)
      expect(cancel.reason).toContain('ERROR')
    }
    runner.close()
  })
})
