/**
 * The real runner agent (its own process: connection, tunnel, stage pools, session flow, status endpoint,
 * signals) against the edge under `wrangler dev` and the stand-in engine. Sessions run the `shell` harness
 * (`custom_shell`: a node script making two chat calls through the injected OPENAI_BASE_URL, the second
 * streamed) on the host runtime of `test/support/host-runtime.ts` (no sandbox: isolation is the runtime
 * backends' own tests).
 *
 * Covers registration and enrolment (secret file 0600), dispatch, tunnelled inference with exact tokens,
 * drain on SIGTERM, a second SIGTERM (partial results reported), kill -9 mid-RUNNING (the edge finalizes
 * with the partial trajectory) and an edge restart mid-RUNNING (the runner keeps its session, nothing lost).
 */
import { existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { TaskStatus } from '../../src/contract/rollout.ts'
import type { RunnerCommandOptions } from '../../cli/commands/runner.ts'
import { type EngineHandle, startEngine } from '../../engine/server.ts'
import { type EdgeProcess, startEdge } from '../../scripts/lib/processes.ts'
import { type RunnerProc, runnerOptions, startRunner } from '../support/runner-proc.ts'
import { type CompletionRecordJson, eventually } from '../support/stack.ts'

const ADMIN_TOKEN = 'itest-admin-token'
const RUNNER_TOKEN = 'itest-runner-token'
const HEARTBEAT_MS = 1_000
const GRACE_MS = 3_000
const AGENT_SCRIPT = fileURLToPath(new URL('../fixtures/runner/agent.mjs', import.meta.url))

let engine: EngineHandle
let edge: EdgeProcess
let persistTo: string
let stateRoot: string
let vars: Record<string, string>
const runners: RunnerProc[] = []

async function admin(path: string, init: RequestInit = {}): Promise<Response> {
  return fetch(`${edge.url}${path}`, {
    ...init,
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json', ...init.headers },
  })
}

async function submit(taskId: string, options: { samples?: number; waitFor?: boolean; backend?: 'local' } = {}): Promise<void> {
  const res = await admin('/rollout/task/submit', {
    method: 'POST',
    body: JSON.stringify({
      task_id: taskId,
      instruction: 'make two model calls',
      num_samples: options.samples ?? 1,
      timeout_seconds: 300,
      runtime: {
        ...(options.backend ? { backend: options.backend } : { image: 'host' }),
        prepare: [{ type: 'upload_file', source: AGENT_SCRIPT, target: '/polar/session/agent.mjs' }],
      },
      agent: { harness: 'shell', custom_shell: { command: 'node agent.mjs' }, env: options.waitFor ? { WAIT_FOR: 'go' } : {} },
      builder: { strategy: 'per_request' },
      evaluator: { strategy: 'session_completed' },
      upstream: { route: 'runner' },
    }),
  })
  if (res.status !== 200) throw new Error(`submit ${res.status}: ${await res.text()}`)
}

async function task(taskId: string): Promise<TaskStatus & { sessions: { session_id: string; status: string }[] }> {
  const res = await admin(`/rollout/task/${taskId}`)
  if (res.status !== 200) throw new Error(`task ${res.status}: ${await res.text()}`)
  return (await res.json()) as TaskStatus & { sessions: { session_id: string; status: string }[] }
}

async function sessionInfo(sessionId: string): Promise<{ status: string; runner_id: string | null; error: string | null }> {
  return (await (await admin(`/rollout/session/${sessionId}`)).json()) as { status: string; runner_id: string | null; error: string | null }
}

async function completions(sessionId: string): Promise<CompletionRecordJson[]> {
  const res = await admin(`/v1/sessions/${sessionId}/completions`)
  return ((await res.json()) as { completions: CompletionRecordJson[] }).completions
}

async function finished(taskId: string, timeoutMs = 60_000) {
  return eventually(async () => {
    const status = await task(taskId)
    expect(status.status).not.toBe('running')
    return status
  }, timeoutMs)
}

function options(runnerId: string, extra: Partial<RunnerCommandOptions> = {}): RunnerCommandOptions {
  const base = { edge: edge.url, token: RUNNER_TOKEN, upstream: engine.url, stateRoot, runnerId }
  return runnerOptions(base, { maxInit: 2, maxRun: 2, maxPostrun: 2, ...extra })
}

async function runner(runnerId: string, mode: 'host' | 'cli' = 'host'): Promise<RunnerProc> {
  const proc = startRunner(options(runnerId), mode)
  runners.push(proc)
  await proc.waitFor((line) => line.event === 'edge.registered', 30_000, `${runnerId} registered`)
  return proc
}

function sessionDir(runnerId: string, sessionId: string): string {
  return join(stateRoot, runnerId, 'sessions', sessionId)
}

/** The single session of a task once the runner has it RUNNING with its first call captured. */
async function firstCallDone(runnerId: string, taskId: string): Promise<string> {
  return eventually(async () => {
    const [session] = (await task(taskId)).sessions
    expect(session).toBeTruthy()
    const id = (session as { session_id: string }).session_id
    expect(existsSync(join(sessionDir(runnerId, id), 'first-call-done'))).toBe(true)
    expect(await completions(id)).toHaveLength(1)
    return id
  }, 60_000)
}

/** What the engine samples for exactly this engine body (deterministic per seed). */
async function engineDirect(record: CompletionRecordJson) {
  const response = await fetch(`${engine.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ ...record.request, return_token_ids: true, logprobs: true, top_logprobs: 0, stream: false }),
  })
  return (await response.json()) as { prompt_token_ids: number[]; choices: { token_ids: number[] }[] }
}

beforeAll(async () => {
  engine = await startEngine({ seed: 11 })
  persistTo = mkdtempSync(join(tmpdir(), 'rollgate-runner-itest-'))
  stateRoot = mkdtempSync(join(tmpdir(), 'rollgate-runner-state-'))
  vars = {
    ROLLGATE_ADMIN_TOKEN: ADMIN_TOKEN,
    ROLLGATE_SIGNING_KEY: 'itest-signing-key',
    ROLLGATE_RUNNER_TOKEN: RUNNER_TOKEN,
    ROLLGATE_UPSTREAM_URL: engine.url,
    ROLLGATE_HEARTBEAT_MS: '200',
    ROLLGATE_RUNNER_HEARTBEAT_MS: String(HEARTBEAT_MS),
    ROLLGATE_RUNNER_GRACE_MS: String(GRACE_MS),
  }
  edge = await startEdge({ persistTo, vars })
})

afterAll(async () => {
  await Promise.all(runners.map((proc) => proc.stop()))
  await edge?.stop()
  await engine?.close()
  rmSync(persistTo, { recursive: true, force: true })
  rmSync(stateRoot, { recursive: true, force: true })
})

describe('runner agent ↔ edge (wrangler dev)', () => {
  it('registers (enrolled, secret kept 0600), runs dispatched sessions, tunnels with exact tokens, drains on SIGTERM', async () => {
    const proc = await runner('r-basic')
    // The edge accepted the runner's tunnel features: binary frames and credit windows.
    expect(proc.lines.find((line) => line.event === 'edge.registered')?.tunnel).toEqual(['tunnel.binary', 'tunnel.credit'])
    const secretFile = join(stateRoot, 'r-basic', 'r-basic.secret')
    expect(statSync(secretFile).mode & 0o777).toBe(0o600)
    await submit('ra-basic', { samples: 2 })
    const done = await finished('ra-basic')
    expect(done.status).toBe('completed')
    // With the error, so a failure names its cause.
    expect(done.results.map((result) => [result.status, result.error ?? null])).toEqual([
      ['COMPLETED', null],
      ['COMPLETED', null],
    ])
    for (const result of done.results) {
      const records = await completions(result.session_id)
      expect(records.map((record) => record.stream)).toEqual([false, true])
      for (const record of records) {
        expect(record).toMatchObject({ status: 'ok', trainable: true })
        expect((record.provenance as unknown as { route: string }).route).toBe('runner:r-basic')
        const direct = await engineDirect(record)
        expect(record.prompt_token_ids).toEqual(direct.prompt_token_ids)
        expect(record.response_token_ids).toEqual(direct.choices[0]?.token_ids)
      }
      expect(result.trajectory.traces).toHaveLength(2)
    }
    // Every stage change reached the edge, in order; the status endpoint counts the tunnel.
    const stages = proc.lines.filter((line) => line.event === 'session.stage' && line.session_id === done.results[0]?.session_id)
    expect(stages.map((line) => line.stage)).toEqual(['INITIALIZING', 'READY', 'RUNNING', 'POST_RUN'])
    const started = await proc.waitFor((line) => line.event === 'runner.started')
    const metrics = await (await fetch(`${started.status_url as string}/metrics`)).text()
    expect(metrics).toMatch(/rollgate_runner_tunnel_requests_total\{runner_id="r-basic"\} 4/)
    expect(metrics).toMatch(/rollgate_runner_sessions_finished_total\{runner_id="r-basic",outcome="completed"\} 2/)
    const health = await fetch(`${started.status_url as string}/health`)
    expect(health.status).toBe(200)

    proc.child.kill('SIGTERM')
    expect(await proc.exited).toBe(0)
    await eventually(async () => {
      const overview = (await (await admin('/rollout/status')).json()) as { nodes: { nodes: { node_id: string }[] } }
      expect(overview.nodes.nodes.map((node) => node.node_id)).not.toContain('r-basic')
    })
  })

  it('the real `rollgate runner --runtime local`: the session runs in the bubblewrap sandbox and reaches the edge through the forwarded port', async () => {
    const proc = await runner('r-local', 'cli')
    await submit('ra-local', { backend: 'local' })
    const done = await finished('ra-local')
    const [result] = done.results
    expect(result?.error ?? null).toBeNull()
    expect(result).toMatchObject({ status: 'COMPLETED', node_id: 'r-local' })
    const records = await completions(result?.session_id as string)
    expect(records.map((record) => [record.status, record.stream])).toEqual([
      ['ok', false],
      ['ok', true],
    ])
    for (const record of records) expect(record.response_token_ids).toEqual((await engineDirect(record)).choices[0]?.token_ids)
    const log = proc.lines.find((line) => line.event === 'session.finished')
    expect(log).toMatchObject({ agent_status: 'completed', reported: true })
    proc.child.kill('SIGINT')
    expect(await proc.exited).toBe(0)
  })

  it('drain: SIGTERM finishes the running session, takes no new one, then exits 0', async () => {
    const proc = await runner('r-drain')
    await submit('ra-drain', { waitFor: true })
    const sessionId = await firstCallDone('r-drain', 'ra-drain')
    proc.child.kill('SIGTERM')
    await proc.waitFor((line) => line.event === 'runner.draining')
    await eventually(async () => {
      const overview = (await (await admin('/rollout/status')).json()) as { nodes: { nodes: { node_id: string; draining: boolean }[] } }
      expect(overview.nodes.nodes.find((node) => node.node_id === 'r-drain')?.draining).toBe(true)
    })
    await submit('ra-drain-late')
    writeFileSync(join(sessionDir('r-drain', sessionId), 'go'), '')
    expect(await proc.exited).toBe(0)
    const done = await finished('ra-drain')
    expect(done.results[0]).toMatchObject({ session_id: sessionId, status: 'COMPLETED' })
    expect(await completions(sessionId)).toHaveLength(2)
    // Nothing was dispatched to the draining runner.
    const late = await task('ra-drain-late')
    expect(late.sessions[0]?.status).toBe('REGISTERED')
    expect(proc.lines.some((line) => line.event === 'session.assigned' && line.task_id === 'ra-drain-late')).toBe(false)
    await admin('/rollout/task/ra-drain-late', { method: 'DELETE' })
  })

  it('a second SIGTERM cancels: the running session still reports its partial result, exit 1', async () => {
    const proc = await runner('r-cancel')
    await submit('ra-cancel', { waitFor: true })
    const sessionId = await firstCallDone('r-cancel', 'ra-cancel')
    proc.child.kill('SIGTERM')
    await proc.waitFor((line) => line.event === 'runner.draining')
    proc.child.kill('SIGTERM')
    expect(await proc.exited).toBe(1)
    const reported = await proc.waitFor((line) => line.event === 'session.finished' && line.session_id === sessionId)
    expect(reported).toMatchObject({ agent_status: 'failed', reported: true })
    const done = await finished('ra-cancel')
    expect(done.results[0]).toMatchObject({ session_id: sessionId, status: 'ERROR' })
    expect(done.results[0]?.error).toContain('runner cancelled')
    expect(done.results[0]?.trajectory.traces).toHaveLength(1)
  })

  it('kill -9 mid-RUNNING: the edge finalizes the session with its partial trajectory', async () => {
    const proc = await runner('r-kill')
    await submit('ra-kill', { waitFor: true })
    const sessionId = await firstCallDone('r-kill', 'ra-kill')
    const [before] = await completions(sessionId)
    proc.child.kill('SIGKILL')
    await proc.exited
    const done = await finished('ra-kill', GRACE_MS + 30_000)
    // Let the orphaned harness script end (its next call is refused: the session is over).
    writeFileSync(join(sessionDir('r-kill', sessionId), 'go'), '')
    expect(done.results[0]).toMatchObject({ session_id: sessionId, status: 'ERROR', node_id: 'r-kill' })
    expect(done.results[0]?.trajectory.traces.map((trace) => trace.response_ids)).toEqual([before?.response_token_ids])
  })

  it('edge restart mid-RUNNING: the runner reconnects with its secret, keeps its session, nothing is lost', async () => {
    const proc = await runner('r-restart')
    await submit('ra-restart', { waitFor: true })
    const sessionId = await firstCallDone('r-restart', 'ra-restart')
    const port = edge.port
    await edge.stop()
    edge = await startEdge({ persistTo, vars, port })
    await eventually(async () => {
      expect(proc.lines.filter((line) => line.event === 'edge.registered')).toHaveLength(2)
    }, 30_000)
    expect(proc.lines.filter((line) => line.event === 'edge.enrolled')).toHaveLength(1)
    expect(await sessionInfo(sessionId)).toMatchObject({ status: 'RUNNING', runner_id: 'r-restart', error: null })
    writeFileSync(join(sessionDir('r-restart', sessionId), 'go'), '')
    const done = await finished('ra-restart')
    expect(done.results[0]).toMatchObject({ session_id: sessionId, status: 'COMPLETED' })
    const records = await completions(sessionId)
    expect(records).toHaveLength(2)
    expect(done.results[0]?.trajectory.traces).toHaveLength(2)
    proc.child.kill('SIGTERM')
    expect(await proc.exited).toBe(0)
  })
})
