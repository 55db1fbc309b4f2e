/**
 * Rollout API in workerd with real Durable Objects (task, session, runner hub), SQLite and R2:
 * submission and fan-out, duplicate submission, cancellation, the status gate on the proxy, and
 * credential kinds per route.
 */
import { env, SELF } from 'cloudflare:test'
import { describe, expect, it } from 'vitest'
import type { RolloutStatus, TaskStatus } from '../../src/contract/rollout.ts'
import type { TaskResult } from '../../src/contract/trajectory.ts'
import type { SessionRolloutRpc } from '../../src/durable/session/session-rollout.ts'
import { ADMIN, EDGE, eventually, RUNNER_TOKEN, sessionToken, submit, TestRunner, taskBody, taskStatus } from './rollout-support.ts'

function session(sessionId: string): SessionRolloutRpc {
  return env.SESSIONS.get(env.SESSIONS.idFromName(sessionId)) as unknown as SessionRolloutRpc
}

async function errorOf(res: Response) {
  return ((await res.json()) as { error: { message: string; type: string; param: string | null } }).error
}

describe('task submission', () => {
  it('expands num_samples sessions, each REGISTERED in its own SessionObject and queued at the hub', async () => {
    const res = await submit(taskBody('fanout-1', { num_samples: 4, metadata: { group_id: 'g1', policy_version: 3 } }))
    expect(res.status).toBe(200)
    // No runner is connected: accepted, and the answer says the sessions will wait.
    expect(await res.json()).toMatchObject({
      task_id: 'fanout-1',
      status: 'running',
      warnings: [{ code: 'no_runner_connected', message: expect.stringContaining('wait in REGISTERED') }],
    })

    const status = await taskStatus('fanout-1')
    expect(status).toMatchObject({
      task_id: 'fanout-1',
      status: 'running',
      total_sessions: 4,
      completed_sessions: 0,
      results: [],
      result_paths: [],
      // Task status says so too, while it holds.
      warnings: [{ code: 'no_runner_connected', message: expect.stringContaining('4 unfinished sessions cannot start') }],
    })
    const ids = status.sessions.map((entry) => entry.session_id)
    expect(new Set(ids).size).toBe(4)
    expect(status.sessions.map((entry) => entry.index)).toEqual([0, 1, 2, 3])
    for (const id of ids) {
      const state = await session(id).lifecycle()
      expect(state).toMatchObject({ status: 'REGISTERED', runner_id: null, spec: { task_id: 'fanout-1', run_id: status.run_id } })
      expect(id.startsWith('rs_')).toBe(true)
      const config = await env.SESSIONS.get(env.SESSIONS.idFromName(id)).config()
      expect(config).toMatchObject({ session_id: id, task_id: 'fanout-1', policy_version: 3, metadata: { group_id: 'g1' } })
    }
    const overview = (await (await SELF.fetch(`${EDGE}/rollout/status`, { headers: ADMIN })).json()) as RolloutStatus
    expect(overview.tasks['fanout-1']).toBe('running')
    expect(overview.pipeline.pending_sessions).toBeGreaterThanOrEqual(4)
  })

  it('the no-runner warning stays in task status while it holds and clears once a runner that takes work connects', async () => {
    expect((await submit(taskBody('warn-clears'))).status).toBe(200)
    const waiting = await taskStatus('warn-clears')
    expect(waiting.warnings).toEqual([
      { code: 'no_runner_connected', message: expect.stringContaining('1 unfinished session cannot start') },
    ])
    // Asked again: still there (not a one-shot notice).
    expect((await taskStatus('warn-clears')).warnings).toHaveLength(1)
    const runner = await TestRunner.start('warn-clears-runner')
    // Connected and taking work: no warning, whether or not the session has started yet.
    await eventually(async () => expect((await taskStatus('warn-clears')).warnings).toEqual([]))
    await runner.takeAssignment('warn-clears')
    expect((await taskStatus('warn-clears')).warnings).toEqual([])
    // The task ended: nothing to warn about, with or without a runner.
    await SELF.fetch(`${EDGE}/rollout/task/warn-clears`, { method: 'DELETE', headers: ADMIN })
    runner.send({ type: 'drain' })
    await eventually(async () => expect((await taskStatus('warn-clears')).status).toBe('failed'))
    expect((await taskStatus('warn-clears')).warnings).toEqual([])
    runner.close()
  })

  it('accepts the /v1/tasks alias and validates Polar fields with a 400 naming the field', async () => {
    expect((await submit(taskBody('alias-1'), '/v1/tasks')).status).toBe(200)
    expect((await SELF.fetch(`${EDGE}/v1/tasks/alias-1?results=false`, { headers: ADMIN })).status).toBe(200)

    const noAgent = await submit({ task_id: 'bad-1', instruction: 'x' })
    expect(noAgent.status).toBe(400)
    expect((await errorOf(noAgent)).param).toBe('agent')
    const both = await submit(taskBody('bad-2', { agent: { harness: 'codex', import_path: 'a:B' } }))
    expect((await errorOf(both)).message).toContain('exactly one of harness / import_path')
    const early = await submit(taskBody('bad-3', { num_samples: 2, early_stop_min_usable_sessions: 3 }))
    expect((await errorOf(early)).param).toBe('early_stop_min_usable_sessions')
    const priority = await submit(taskBody('bad-4', { dispatch_priority: 101 }))
    expect((await errorOf(priority)).param).toBe('dispatch_priority')
    const agentTimeout = await submit(taskBody('bad-5', { metadata: { agent_timeout: -1 } }))
    expect((await errorOf(agentTimeout)).param).toBe('metadata.agent_timeout')
    const builder = await submit(taskBody('bad-6', { builder: { strategy: 'my.module:Builder' } }))
    expect((await errorOf(builder)).param).toBe('builder.strategy')
    const slash = await submit(taskBody('../etc'))
    expect((await errorOf(slash)).param).toBe('task_id')
    // Builder configs are checked at submit (before any agent runs), naming the key.
    const bogus = await submit(taskBody('bad-7', { builder: { strategy: 'prefix_merging', config: { bogus: 1 } } }))
    expect(bogus.status).toBe(400)
    expect(await errorOf(bogus)).toMatchObject({
      param: 'builder.config.bogus',
      message: expect.stringContaining('unknown prefix_merging option'),
    })
    const mistyped = await submit(taskBody('bad-8', { builder: { strategy: 'prefix_merging', config: { strict: 'yes' } } }))
    expect(await errorOf(mistyped)).toMatchObject({ param: 'builder.config.strict', message: expect.stringContaining('boolean') })
    expect((await SELF.fetch(`${EDGE}/rollout/task/bad-7`, { headers: ADMIN })).status).toBe(404)
    // Evaluator configs too (src/contract/evaluator-config.ts), naming the field under `evaluator`.
    const noCommand = await submit(taskBody('bad-9', { evaluator: { strategy: 'test_on_output', config: {} } }))
    expect(noCommand.status).toBe(400)
    expect(await errorOf(noCommand)).toMatchObject({
      param: 'evaluator.config.test_command',
      message: expect.stringContaining('test_on_output'),
    })
    const unknownEvaluator = await submit(taskBody('bad-10', { evaluator: { strategy: 'magic' } }))
    expect(await errorOf(unknownEvaluator)).toMatchObject({
      param: 'evaluator.strategy',
      message: expect.stringContaining('unknown evaluator "magic"'),
    })
    expect((await SELF.fetch(`${EDGE}/rollout/task/bad-9`, { headers: ADMIN })).status).toBe(404)
    // The harness name too (the runner's registry, src/contract/harness-names.ts), instead of an INIT failure.
    const noHarness = await submit(taskBody('bad-11', { agent: { harness: 'nosuch' } }))
    expect(noHarness.status).toBe(400)
    expect(await errorOf(noHarness)).toMatchObject({
      param: 'agent.harness',
      message: expect.stringContaining('unknown harness "nosuch" (known: codex, claude_code, gemini_cli, qwen_code, opencode, pi, shell)'),
    })
    expect((await SELF.fetch(`${EDGE}/rollout/task/bad-11`, { headers: ADMIN })).status).toBe(404)
    // Polar's keys that do not apply are accepted and reported.
    const polar = await submit(
      taskBody('polar-keys-1', { builder: { strategy: 'prefix_merging', config: { tokenizer_name_or_path: 'Qwen/Qwen3-8B' } } }),
    )
    expect(polar.status).toBe(200)
    expect(((await polar.json()) as { warnings: { code: string; message: string }[] }).warnings).toEqual([
      { code: 'builder_config_ignored', message: expect.stringContaining('config.tokenizer_name_or_path') },
      { code: 'no_runner_connected', message: expect.any(String) },
    ])
    expect((await SELF.fetch(`${EDGE}/rollout/task/never-submitted`, { headers: ADMIN })).status).toBe(404)
  })

  it('refuses a duplicate task_id while it runs (409), and accepts it again once the run ended', async () => {
    expect((await submit(taskBody('dup-1', { num_samples: 2 }))).status).toBe(200)
    const first = await taskStatus('dup-1')
    const again = await submit(taskBody('dup-1', { num_samples: 2 }))
    expect(again.status).toBe(409)
    expect((await errorOf(again)).message).toContain('still running')

    expect((await SELF.fetch(`${EDGE}/rollout/task/dup-1`, { method: 'DELETE', headers: ADMIN })).status).toBe(200)
    await eventually(async () => expect((await taskStatus('dup-1')).status).toBe('failed'))
    expect((await submit(taskBody('dup-1', { num_samples: 1 }))).status).toBe(200)
    const second = await taskStatus('dup-1')
    expect(second.run_id).not.toBe(first.run_id)
    expect(second.total_sessions).toBe(1)
    expect(second.sessions[0]!.session_id).not.toBe(first.sessions[0]!.session_id)
  })
})

describe('cancellation', () => {
  it('DELETE /rollout/task/:id ends every session with ERROR, writes the results and the TaskResult to R2', async () => {
    expect((await submit(taskBody('cancel-1', { num_samples: 3, metadata: { group_id: 'gc' } }))).status).toBe(200)
    const res = await SELF.fetch(`${EDGE}/rollout/task/cancel-1`, { method: 'DELETE', headers: ADMIN })
    // The answer is the state after cancelling: every session ended, the task failed (not "running").
    expect(await res.json()).toMatchObject({
      task_id: 'cancel-1',
      cancelled: true,
      status: 'failed',
      completed_sessions: 3,
      total_sessions: 3,
    })
    const status = await eventually(async () => {
      const current = await taskStatus('cancel-1')
      expect(current.status).toBe('failed')
      return current
    })
    expect(status).toMatchObject({ total_sessions: 3, completed_sessions: 3, cancelled: true, usable_sessions: 0 })
    expect(status.results).toHaveLength(3)
    for (const result of status.results) {
      expect(result).toMatchObject({ task_id: 'cancel-1', status: 'ERROR', error: 'task cancelled', metadata: { group_id: 'gc' } })
      expect(result.trajectory.traces).toEqual([])
    }
    expect(status.result_paths).toEqual(status.sessions.map((entry) => `rollout/task_cancel-1/ses_${entry.session_id}.json`))
    for (const path of status.result_paths) expect(await env.BLOBS.get(path)).not.toBeNull()
    expect(status.task_result_path).toBe('rollout/task_cancel-1/task_result.json')
    const stored = (await (await env.BLOBS.get('rollout/task_cancel-1/task_result.json'))!.json()) as TaskResult
    expect(stored).toMatchObject({ task_id: 'cancel-1', status: 'failed' })
    expect(stored.results.map((result) => result.session_id).sort()).toEqual(status.sessions.map((entry) => entry.session_id).sort())
    // Cancelling again is harmless.
    expect((await SELF.fetch(`${EDGE}/rollout/task/cancel-1`, { method: 'DELETE', headers: ADMIN })).status).toBe(200)
  })

  it('DELETE /rollout/session/:id cancels one session; the task keeps running for the rest', async () => {
    expect((await submit(taskBody('cancel-2', { num_samples: 2 }))).status).toBe(200)
    const [first, second] = (await taskStatus('cancel-2')).sessions
    const res = await SELF.fetch(`${EDGE}/rollout/session/${first!.session_id}`, { method: 'DELETE', headers: ADMIN })
    expect(await res.json()).toMatchObject({ cancelled: true, status: 'ERROR' })
    const status = await eventually(async () => {
      const current = await taskStatus('cancel-2')
      expect(current.completed_sessions).toBe(1)
      return current
    })
    expect(status.status).toBe('running')
    expect(status.sessions.find((entry) => entry.session_id === second!.session_id)!.status).toBe('REGISTERED')
    const info = (await (await SELF.fetch(`${EDGE}/rollout/session/${first!.session_id}`, { headers: ADMIN })).json()) as Record<
      string,
      unknown
    >
    expect(info).toMatchObject({ status: 'ERROR', error: 'session cancelled' })
    expect((await SELF.fetch(`${EDGE}/rollout/session/unknown-session`, { method: 'DELETE', headers: ADMIN })).status).toBe(404)
  })
})

describe('status gate on the proxy', () => {
  it('refuses model calls for a session that is not RUNNING with a 403 in the caller format (OpenAI, Anthropic)', async () => {
    expect((await submit(taskBody('gate-1'))).status).toBe(200)
    const [entry] = (await taskStatus('gate-1')).sessions
    const token = await sessionToken(entry!.session_id)
    const openai = await SELF.fetch(`${EDGE}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }),
    })
    expect(openai.status).toBe(403)
    expect(await errorOf(openai)).toMatchObject({ type: 'permission_error', message: expect.stringContaining('session is REGISTERED') })
    const anthropic = await SELF.fetch(`${EDGE}/v1/messages`, {
      method: 'POST',
      headers: { 'x-api-key': token, 'anthropic-version': '2023-06-01', 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'claude', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] }),
    })
    expect(anthropic.status).toBe(403)
    expect(await anthropic.json()).toMatchObject({ type: 'error', error: { type: 'permission_error' } })
    // Nothing reached the log.
    const completions = await SELF.fetch(`${EDGE}/v1/sessions/${entry!.session_id}/completions`, { headers: ADMIN })
    expect(((await completions.json()) as { completions: unknown[] }).completions).toEqual([])
  })

  it('leaves bare capture sessions alone', async () => {
    const created = await SELF.fetch(`${EDGE}/v1/sessions`, { method: 'POST', headers: ADMIN, body: JSON.stringify({}) })
    const { token } = (await created.json()) as { token: string }
    const res = await SELF.fetch(`${EDGE}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }),
    })
    // Admitted: it reached the (unreachable) upstream and failed there, not at the gate.
    expect(res.status).toBe(502)
    expect(res.headers.get('x-rollgate-error-source')).toBe('upstream')
    // A bare session whose id looks like a rollout session's is checked, and admitted as bare.
    const lookalike = await SELF.fetch(`${EDGE}/v1/sessions`, {
      method: 'POST',
      headers: ADMIN,
      body: JSON.stringify({ session_id: 'rs_chosen_by_hand' }),
    })
    const { token: lookalikeToken } = (await lookalike.json()) as { token: string }
    const admitted = await SELF.fetch(`${EDGE}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${lookalikeToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }),
    })
    expect(admitted.headers.get('x-rollgate-error-source')).toBe('upstream')
  })
})

describe('credential kinds', () => {
  it('each route accepts exactly its own kind of token', async () => {
    expect((await submit(taskBody('auth-1'))).status).toBe(200)
    const [entry] = (await taskStatus('auth-1')).sessions
    const sessionTok = await sessionToken(entry!.session_id)
    const bearer = (token: string) => ({ authorization: `Bearer ${token}`, 'content-type': 'application/json' })

    // Control plane: admin only.
    for (const token of [RUNNER_TOKEN, sessionTok]) {
      expect(
        (
          await SELF.fetch(`${EDGE}/rollout/task/submit`, {
            method: 'POST',
            headers: bearer(token),
            body: JSON.stringify(taskBody('auth-x')),
          })
        ).status,
      ).toBe(401)
      expect((await SELF.fetch(`${EDGE}/rollout/status`, { headers: bearer(token) })).status).toBe(401)
      expect((await SELF.fetch(`${EDGE}/rollout/task/auth-1`, { method: 'DELETE', headers: bearer(token) })).status).toBe(401)
      expect((await SELF.fetch(`${EDGE}/v1/events`, { headers: bearer(token) })).status).toBe(401)
      expect((await SELF.fetch(`${EDGE}/admin/inference/status`, { headers: bearer(token) })).status).toBe(401)
      expect((await SELF.fetch(`${EDGE}/admin/inference/pause`, { method: 'POST', headers: bearer(token) })).status).toBe(401)
    }
    // Runner endpoint: runner token only.
    for (const token of ['test-admin-token', sessionTok, 'nope']) {
      const res = await SELF.fetch(`${EDGE}/runners/connect?runner_id=r-auth`, {
        headers: { upgrade: 'websocket', authorization: `Bearer ${token}` },
      })
      expect(res.status).toBe(401)
      expect((await errorOf(res)).message).toMatch(/runner token/)
    }
    const runner = await SELF.fetch(`${EDGE}/runners/connect?runner_id=r-auth`, {
      headers: { upgrade: 'websocket', authorization: `Bearer ${RUNNER_TOKEN}` },
    })
    expect(runner.status).toBe(101)
    runner.webSocket!.accept()
    runner.webSocket!.close(1000, 'shutdown')
    // Harness proxy: session tokens only.
    for (const token of ['test-admin-token', RUNNER_TOKEN]) {
      const res = await SELF.fetch(`${EDGE}/v1/chat/completions`, {
        method: 'POST',
        headers: bearer(token),
        body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }),
      })
      expect(res.status).toBe(401)
      expect((await errorOf(res)).message).toContain('invalid session token')
    }
    // And the admin token works where it should.
    expect((await SELF.fetch(`${EDGE}/rollout/status`, { headers: ADMIN })).status).toBe(200)
  })
})

describe('task status shape', () => {
  it('is Polar TaskStatus plus Rollgate fields', async () => {
    expect((await submit(taskBody('shape-1', { num_samples: 1, callback_url: 'https://trainer.invalid/cb' }))).status).toBe(200)
    const status: TaskStatus = await taskStatus('shape-1')
    expect(Object.keys(status).slice(0, 6)).toEqual([
      'task_id',
      'status',
      'total_sessions',
      'completed_sessions',
      'results',
      'result_paths',
    ])
    expect(status.callback).toBeNull()
  })
})
