/**
 * The `rollgate` CLI against a running stack: the edge under `wrangler dev`, the stand-in engine and a
 * scripted runner over a real WebSocket. Every command runs as its own process; `--json` output is parsed
 * and checked, and the failure paths' exit codes are asserted.
 */
import { spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import OpenAI from 'openai'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { RolloutStatus, RunnerList, TaskStatus } from '../../src/contract/rollout.ts'
import type { SessionAssignment } from '../../src/contract/runner-protocol.ts'
import { type EngineHandle, startEngine } from '../../engine/server.ts'
import { type EdgeProcess, freePort, startEdge } from '../../scripts/lib/processes.ts'
import { childOutput } from '../support/child-output.ts'
import { RunnerClient } from '../support/runner-client.ts'
import { eventually } from '../support/stack.ts'

const ADMIN_TOKEN = 'cli-admin-token'
const RUNNER_TOKEN = 'cli-runner-token'
const CLI = join(import.meta.dirname, '../../cli/rollgate.ts')

let engine: EngineHandle
let edge: EdgeProcess
let persistTo: string
let runner: RunnerClient
let scratch: string

/** Run the CLI as a process (env: edge URL and admin token, so flags stay short). */
function rollgate(args: string[], env: Record<string, string> = {}): ReturnType<typeof childOutput> {
  const child = spawn(process.execPath, [CLI, ...args], {
    env: { ...process.env, ROLLGATE_EDGE_URL: edge.url, ROLLGATE_ADMIN_TOKEN: ADMIN_TOKEN, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  return childOutput(child)
}

/** Walk one assignment through the stages with one real model call, then finish it with a reward. */
async function runOne(
  taskId: string,
  reward: number,
  beforeFinish?: (session: SessionAssignment) => Promise<void>,
): Promise<SessionAssignment> {
  const session = await runner.take(taskId)
  await eventually(async () => {
    const response = await fetch(`${edge.url}/rollout/session/${session.session_id}`, {
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
    })
    expect(((await response.json()) as { status: string }).status).toBe('RUNNING')
  })
  const client = new OpenAI({ baseURL: session.base_urls.openai, apiKey: session.token, maxRetries: 0 })
  await client.chat.completions.create({ model: 'Qwen/Qwen3-8B', messages: [{ role: 'user', content: 'create hello.txt containing hi' }] })
  await beforeFinish?.(session)
  runner.send({
    type: 'session.finished',
    session_id: session.session_id,
    agent_result: { status: 'completed', return_code: 0 },
    eval_result: { outcome_reward: reward, metadata: {} },
  })
  runner.held.delete(session.session_id)
  return session
}

/** `GET /rollout/session/:id` (lifecycle and evaluation). */
async function lifecycleOf(sessionId: string): Promise<Record<string, unknown>> {
  const response = await fetch(`${edge.url}/rollout/session/${sessionId}`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
  expect(response.status).toBe(200)
  return (await response.json()) as Record<string, unknown>
}

beforeAll(async () => {
  engine = await startEngine({ seed: 3 })
  persistTo = mkdtempSync(join(tmpdir(), 'rollgate-cli-itest-'))
  scratch = mkdtempSync(join(tmpdir(), 'rollgate-cli-out-'))
  edge = await startEdge({
    persistTo,
    vars: {
      ROLLGATE_ADMIN_TOKEN: ADMIN_TOKEN,
      ROLLGATE_SIGNING_KEY: 'cli-signing-key',
      ROLLGATE_RUNNER_TOKEN: RUNNER_TOKEN,
      ROLLGATE_UPSTREAM_URL: engine.url,
      ROLLGATE_SERVED_MODEL: 'Qwen/Qwen3-8B',
    },
  })
  runner = new RunnerClient({ edgeUrl: edge.url, token: RUNNER_TOKEN, runnerId: 'cli-runner', engineUrl: null })
  await runner.start()
})

afterAll(async () => {
  await runner?.shutdown()
  await edge?.stop()
  await engine?.close()
  rmSync(persistTo, { recursive: true, force: true })
  rmSync(scratch, { recursive: true, force: true })
})

describe('rollgate CLI', () => {
  it('submit follows a task to the end; status, sessions, export, pause and resume read it back', async () => {
    const taskFile = join(scratch, 'task.json')
    writeFileSync(
      taskFile,
      JSON.stringify({
        task_id: 'cli-task-1',
        instruction: 'create hello.txt containing hi',
        num_samples: 2,
        agent: { harness: 'shell', custom_shell: { command: 'echo {instruction}' } },
        builder: { strategy: 'prefix_merging' },
        // Runner-side: the stand-in runner reports each session's reward (runOne).
        evaluator: { strategy: 'test_on_output', config: { test_command: 'true', expected_output_json: { 'test::hi': 'PASSED' } } },
      }),
    )
    const submitted = rollgate(['submit', taskFile, '--json'])
    // Live progress: while the first session is RUNNING, the progress lines say so (not the task's stale view).
    const whileRunning = () => eventually(async () => expect(submitted.stderrSoFar()).toMatch(/"running":1/), 20_000).then(() => undefined)
    // A session still running is not evaluated: its export says so (reward null), and so does its lifecycle.
    const notYetEvaluated = async (session: SessionAssignment) => {
      const running = await rollgate(['export', session.session_id, '--format', 'sft-tokens'])
      expect(running.stderr).toBe(`note: session ${session.session_id} is RUNNING, not evaluated yet: its traces have reward null\n`)
      const rows = running.stdout
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line) as { metadata: { reward: number | null } })
      expect(rows.map((row) => row.metadata.reward)).toEqual([null])
      expect(await lifecycleOf(session.session_id)).toMatchObject({ status: 'RUNNING', evaluated: false, reward: null })
    }
    const sessions = [await runOne('cli-task-1', 1, whileRunning), await runOne('cli-task-1', 0, notYetEvaluated)]
    const submit = await submitted
    expect(submit.stderr).not.toContain('Error')
    expect(submit.code).toBe(0)
    const final = JSON.parse(submit.stdout) as TaskStatus
    expect(final.status).toBe('completed')
    expect(final.results.map((result) => result.session_id).sort()).toEqual(sessions.map((s) => s.session_id).sort())
    // JSON lines of progress went to stderr (not a TTY), never to stdout.
    const progress = submit.stderr
      .trim()
      .split('\n')
      // The edge's submit warnings (one line each: the runner-side evaluator's) come first.
      .filter((line) => !line.startsWith('warning: '))
      .map((line) => JSON.parse(line) as { task_id: string; completed: number })
    expect(progress.at(-1)).toMatchObject({ task_id: 'cli-task-1', completed: 2 })

    const overview = await rollgate(['status', '--json'])
    expect(overview.code).toBe(0)
    const status = JSON.parse(overview.stdout) as RolloutStatus & { inference: { paused: boolean } }
    expect(status.tasks['cli-task-1']).toBe('completed')
    expect(status.nodes.nodes.map((node) => node.node_id)).toContain('cli-runner')
    expect(status.inference.paused).toBe(false)

    const one = JSON.parse((await rollgate(['status', 'cli-task-1', '--json'])).stdout) as TaskStatus
    expect(one).toMatchObject({ task_id: 'cli-task-1', total_sessions: 2, completed_sessions: 2 })

    const list = JSON.parse((await rollgate(['sessions', 'cli-task-1', '--json'])).stdout) as { session_id: string; status: string }[]
    expect(list.map((session) => session.status)).toEqual(['COMPLETED', 'COMPLETED'])

    const detail = JSON.parse((await rollgate(['sessions', '--session', sessions[0]!.session_id, '--json'])).stdout) as {
      completions: { seq: number; api: string; status: string; response_tokens: number }[]
    }
    expect(detail.completions).toHaveLength(1)
    expect(detail.completions[0]).toMatchObject({ seq: 0, api: 'openai-chat', status: 'ok' })
    expect(detail.completions[0]!.response_tokens).toBeGreaterThan(0)

    // Every export format of an evaluated rollout session carries its evaluation: its result in the task's results.
    const results = new Map(final.results.map((result) => [result.session_id, result]))
    const lines = (text: string) =>
      text
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line) as Record<string, unknown>)
    for (const [session, reward] of [
      [sessions[0]!, 1],
      [sessions[1]!, 0],
    ] as const) {
      const result = results.get(session.session_id)!
      const traces = result.trajectory.traces
      expect(traces.length).toBeGreaterThan(0)
      expect(traces.map((trace) => trace.reward)).toEqual(traces.map(() => reward))
      const exportAs = async (format: string) => {
        const out = await rollgate(['export', session.session_id, '--format', format])
        expect({ code: out.code, stderr: out.stderr }).toEqual({ code: 0, stderr: '' })
        return out.stdout
      }
      expect(JSON.parse(await exportAs('session_result'))).toEqual(result)
      expect(JSON.parse(await exportAs('trajectory'))).toEqual(result.trajectory)
      const nemo = lines(await exportAs('nemo-gym'))
      expect(nemo.length).toBeGreaterThanOrEqual(traces.length)
      expect(nemo.map((row) => row.reward)).toEqual(nemo.map(() => reward))
      const tokens = lines(await exportAs('sft-tokens'))
      expect(tokens.map((row) => (row.metadata as { reward: number }).reward)).toEqual(traces.map(() => reward))
      // OpenAI chat SFT rows ({messages, tools}) have no reward field: one row per trace.
      expect(lines(await exportAs('sft'))).toHaveLength(traces.length)
      expect(await lifecycleOf(session.session_id)).toMatchObject({
        status: 'COMPLETED',
        evaluated: true,
        reward,
        result_status: 'COMPLETED',
        eval_result: { outcome_reward: reward },
      })
    }
    const out = join(scratch, 'sft.jsonl')
    const exported = await rollgate(['export', '--task', 'cli-task-1', '--format', 'sft-tokens', '--out', out])
    expect(exported.code).toBe(0)
    expect(exported.stderr).not.toContain('note:')
    const rows = lines(readFileSync(out, 'utf8'))
    expect(rows).toHaveLength(2)
    expect(rows.map((row) => (row.metadata as { reward: number }).reward).sort()).toEqual([0, 1])

    // Asked with another builder than the task's, the traces are not those the rewards belong to: said, reward null.
    const other = await rollgate(['export', sessions[0]!.session_id, '--builder', 'per_request'])
    const otherTraces = (JSON.parse(other.stdout) as { traces: { reward: number | null }[] }).traces
    expect(otherTraces.map((trace) => trace.reward)).toEqual(otherTraces.map(() => null))
    expect(other.stderr).toContain(`note: session ${sessions[0]!.session_id} was evaluated with builder prefix_merging`)
    // A bare capture session's export has no evaluation to miss: nothing is said.
    const bare = (await (
      await fetch(`${edge.url}/v1/sessions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
        body: '{}',
      })
    ).json()) as { session_id: string }
    const bareExport = await rollgate(['export', bare.session_id])
    expect({ code: bareExport.code, stderr: bareExport.stderr }).toEqual({ code: 0, stderr: '' })

    const paused = await rollgate(['pause', '--policy-version', '7', '--timeout', '5', '--json'])
    expect(paused.code).toBe(0)
    expect(JSON.parse(paused.stdout)).toMatchObject({ paused: true, policy_version: '7' })
    const resumed = await rollgate(['resume', '--policy-version', '8', '--json'])
    expect(JSON.parse(resumed.stdout)).toMatchObject({ paused: false, policy_version: '8' })
  })

  it('exit codes: a failed task 1, bad input 2, a refused or unreachable edge 3', async () => {
    const failing = rollgate(['submit', '--task-id', 'cli-task-2', '--instruction', 'x', '--harness', 'shell', '--json'], {})
    // `shell` needs custom_shell: the edge refuses the TaskRequest with a 400 naming the field.
    const refused = await failing
    expect(refused.code).toBe(2)
    expect(refused.stderr).toContain('custom_shell')

    const unfinished = rollgate(['submit', '-', '--json'])
    expect((await unfinished).code).toBe(2)

    const wrongToken = await rollgate(['status', '--json'], { ROLLGATE_ADMIN_TOKEN: 'wrong' })
    expect(wrongToken.code).toBe(3)
    expect(wrongToken.stderr).toContain('401')

    const port = await freePort()
    const unreachable = await rollgate(['status', '--edge', `http://127.0.0.1:${port}`])
    expect(unreachable.code).toBe(3)
    expect(unreachable.stderr).toContain(`edge unreachable at http://127.0.0.1:${port}`)

    const unknown = await rollgate(['status', 'no-such-task', '--json'])
    expect(unknown.code).toBe(3)
    expect(unknown.stderr).toContain('404')

    // A task whose every session errors: submit exits 1.
    const file = join(scratch, 'task-2.json')
    writeFileSync(
      file,
      JSON.stringify({
        task_id: 'cli-task-3',
        instruction: 'x',
        agent: { harness: 'shell', custom_shell: { command: 'false' } },
      }),
    )
    const submitted = rollgate(['submit', file, '--json'])
    const session = await runner.take('cli-task-3')
    runner.finish(session.session_id, { status: 'failed', return_code: 1, error: 'harness exited 1' })
    const failed = await submitted
    expect(failed.code).toBe(1)
    const final = JSON.parse(failed.stdout) as TaskStatus
    expect(final.usable_sessions).toBe(0)
  })

  it('submit --timeout stops following with one line and exit 1 (the task goes on); a bad --timeout is a usage error', async () => {
    const file = join(scratch, 'task-timeout.json')
    writeFileSync(
      file,
      JSON.stringify({ task_id: 'cli-task-timeout', instruction: 'x', agent: { harness: 'shell', custom_shell: { command: 'true' } } }),
    )
    const gaveUp = await rollgate(['submit', file, '--timeout', '1'])
    expect(gaveUp.code).toBe(1)
    expect(gaveUp.stderr).toContain(
      'rollgate: task cli-task-timeout still running after 1 s; it goes on (follow it: rollgate status cli-task-timeout)',
    )
    expect(gaveUp.stderr).not.toMatch(/\n\s+at /)
    expect(gaveUp.stderr).not.toContain('[object Object]')
    const status = JSON.parse((await rollgate(['status', 'cli-task-timeout', '--json'])).stdout) as TaskStatus
    expect(status.status).toBe('running')
    const cancelled = await fetch(`${edge.url}/rollout/task/cli-task-timeout`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
    })
    expect(cancelled.status).toBe(200)

    const bad = await rollgate(['submit', file, '--task-id', 'cli-task-bad-timeout', '--timeout', 'soon'])
    expect(bad.code).toBe(2)
    expect(bad.stderr).toBe('rollgate: --timeout must be a positive number of seconds, got "soon"\n')
  })

  it('replay re-drives a recorded session (chat, Messages, Responses with previous_response_id) and diffs its tokens', async () => {
    const created = (await (
      await fetch(`${edge.url}/v1/sessions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
        body: '{}',
      })
    ).json()) as { session_id: string; token: string }
    const base = `${edge.url}/s/${created.token}`
    const post = async (path: string, body: unknown) => {
      const response = await fetch(`${base}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      })
      expect(response.status).toBe(200)
      return (await response.json()) as { id: string }
    }
    await post('/v1/chat/completions', { model: 'Qwen/Qwen3-8B', messages: [{ role: 'user', content: 'create hello.txt containing hi' }] })
    await post('/v1/messages', { model: 'Qwen/Qwen3-8B', max_tokens: 64, messages: [{ role: 'user', content: 'say hi' }] })
    const first = await post('/v1/responses', { model: 'Qwen/Qwen3-8B', input: 'say hi' })
    await post('/v1/responses', { model: 'Qwen/Qwen3-8B', input: 'and again', previous_response_id: first.id })

    const replay = await rollgate(['replay', created.session_id, '--strict', '--json'])
    expect(replay.stderr).toBe('')
    expect(replay.code).toBe(0)
    const summary = JSON.parse(replay.stdout) as { calls: number; prompts_equal: number; responses_equal: number; replay_session: string }
    expect(summary).toMatchObject({ calls: 4, prompts_equal: 4, responses_equal: 4 })
    expect(summary.replay_session).not.toBe(created.session_id)

    // A dump whose recorded prompt differs from what the edge captures now: named, exit 1.
    const dump = (await (
      await fetch(`${edge.url}/v1/sessions/${created.session_id}/completions`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
    ).json()) as { completions: { prompt_token_ids: number[] }[] }
    dump.completions[1]!.prompt_token_ids[3] = 0
    const file = join(scratch, 'records.json')
    writeFileSync(file, JSON.stringify(dump))
    const tampered = await rollgate(['replay', '--records', file, '--json'])
    expect(tampered.code).toBe(1)
    const diffs = (JSON.parse(tampered.stdout) as { diffs: { seq: number; prompt_equal: boolean; prompt_divergence: number | null }[] })
      .diffs
    expect(diffs.map((diff) => diff.prompt_equal)).toEqual([true, false, true, true])
    expect(diffs[1]!.prompt_divergence).toBe(3)

    // A `?format=polar` dump replays like the Rollgate one; a file that holds no records is a usage error.
    const polar = await (
      await fetch(`${edge.url}/v1/sessions/${created.session_id}/completions?format=polar`, {
        headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
      })
    ).text()
    const polarFile = join(scratch, 'polar.json')
    writeFileSync(polarFile, polar)
    const fromPolar = await rollgate(['replay', '--records', polarFile, '--json'])
    expect(fromPolar.stderr).toBe('')
    expect(JSON.parse(fromPolar.stdout)).toMatchObject({ calls: 4, prompts_equal: 4 })
    writeFileSync(polarFile, '[{"x":1}]')
    const notRecords = await rollgate(['replay', '--records', polarFile])
    expect(notRecords.code).toBe(2)
    expect(notRecords.stderr).toContain('completion [0] is not a completion record (no prompt_token_ids)')
  })

  it("runners list / drain / resume: the registry, an admin drain held until resumed; an unknown id or a non-admin key fails with the edge's error", async () => {
    const entry = async () => {
      const listed = await rollgate(['runners', 'list', '--json'])
      expect(listed.code).toBe(0)
      return (JSON.parse(listed.stdout) as RunnerList).runners.find((runner) => runner.runner_id === 'cli-runner')
    }
    expect(await entry()).toMatchObject({ state: 'connected', healthy: true, accepting: true, draining: false, cordoned: false })
    const human = await rollgate(['runners', 'list'])
    expect(human.stdout).toMatch(/^runners: 1\n {2}cli-runner {2}connected healthy accepting {2}init 0\/\d+ \(\+\d+ queued\) ready /)
    try {
      const drained = await rollgate(['runners', 'drain', 'cli-runner', '--json'])
      expect(drained.code).toBe(0)
      expect(JSON.parse(drained.stdout)).toEqual({ runner_id: 'cli-runner', draining: true })
      expect(await entry()).toMatchObject({ state: 'connected', accepting: false, cordoned: true, draining: false })
      expect((await rollgate(['runners', 'list'])).stdout).toMatch(/cli-runner {2}connected healthy cordoned since \d{4}-/)
      // The runner hears it holds nothing and takes nothing new.
      await eventually(async () => expect(runner.received.some((message) => message.type === 'drained')).toBe(true))
    } finally {
      const resumed = await rollgate(['runners', 'resume', 'cli-runner'])
      expect({ code: resumed.code, stdout: resumed.stdout }).toEqual({
        code: 0,
        stdout: 'runner cli-runner resumed: it takes new sessions\n',
      })
    }
    expect(await entry()).toMatchObject({ accepting: true, cordoned: false })

    // An id the edge has never seen: the edge's 404, exit 3, and where to look.
    const unknown = await rollgate(['runners', 'drain', 'no-such-runner'])
    expect(unknown.code).toBe(3)
    expect(unknown.stderr).toBe(
      'rollgate: DELETE /rollout/runners/no-such-runner → 404: runner no-such-runner not found: it has never registered with this edge ' +
        '(GET /rollout/runners lists the ids it knows)\n  `rollgate runners list` shows the runner ids this edge knows\n',
    )
    expect((await rollgate(['runners', 'resume', 'no-such-runner', '--json'])).code).toBe(3)
    // A key that is not the admin token (here the runner token): the edge's 401, exit 3, nothing drained.
    for (const args of [
      ['runners', 'drain', 'cli-runner'],
      ['runners', 'list'],
    ]) {
      const refused = await rollgate(args, { ROLLGATE_ADMIN_TOKEN: RUNNER_TOKEN })
      expect(refused.code).toBe(3)
      expect(refused.stderr).toContain('→ 401: invalid admin token')
    }
    expect(await entry()).toMatchObject({ accepting: true, cordoned: false })
    // No id: a usage error.
    const missing = await rollgate(['runners', 'drain'])
    expect(missing.code).toBe(2)
    expect(missing.stderr).toContain("missing required argument 'id'")
  })
})
