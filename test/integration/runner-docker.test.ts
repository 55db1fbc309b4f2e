/**
 * A rollout through the real runner on the **docker runtime**: `rollgate runner --runtime docker` (the CLI
 * process) against a private dockerd (no bridge, no iptables; containers `--network none` plus the
 * forwarded edge port), the edge under `wrangler dev`, and the stand-in engine (solver policy) behind an
 * engine tap. The task is `tasks/fix-stats` (one sample, the default harness `qwen_code`: the pinned
 * devDependency CLI, mounted read-only from the host like every harness CLI) with its runtime switched to
 * docker. The image is a skeleton whose userland is the host's `/usr` bind-mounted read-only through the
 * runner's `--ro-bind` (python3, pytest, git without debootstrap or a registry; `test/support/dockerd.ts`).
 *
 * Checks: the session is COMPLETED with reward 1 (the evaluator ran pytest in a second, fresh container);
 * every generation the engine served was captured with its exact tokens (`checkSession`), and the calls
 * served equal the completions captured; the containers were docker's, labelled with the session.
 * If dockerd cannot start, the suite fails with the reason (it never skips).
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { RunnerCommandOptions } from '../../cli/commands/runner.ts'
import { type EngineHandle, startEngine } from '../../engine/server.ts'
import { type EngineTap, startEngineTap } from '../../scripts/lib/engine-tap.ts'
import { type EdgeProcess, REPO_ROOT, startEdge } from '../../scripts/lib/processes.ts'
import { type CapturedRecord, checkSession } from '../../scripts/lib/rollout-checks.ts'
import type { Trajectory } from '../../src/contract/trajectory.ts'
import { loadTaskFile } from '../../tasks/load.ts'
import { importHostUserlandImage, startDockerd, type TestDockerd } from '../support/dockerd.ts'
import { type RunnerProc, startRunner } from '../support/runner-proc.ts'
import { eventually } from '../support/stack.ts'

const ADMIN_TOKEN = 'docker-e2e-admin'
const RUNNER_TOKEN = 'docker-e2e-runner'

let daemon: TestDockerd
let image: { tag: string; binds: string[] }
let engine: EngineHandle
let tap: EngineTap
let edge: EdgeProcess
let runner: RunnerProc
let work: string

async function admin<T>(path: string, init: RequestInit = {}): Promise<T> {
  const response = await fetch(`${edge.url}${path}`, {
    ...init,
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
  })
  const text = await response.text()
  if (!response.ok) throw new Error(`${init.method ?? 'GET'} ${path}: ${response.status} ${text.slice(0, 500)}`)
  return JSON.parse(text) as T
}

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'rollgate-runner-docker-'))
  daemon = await startDockerd()
  image = await importHostUserlandImage(daemon.docker)
  engine = await startEngine({ port: 0, seed: 7, maxModelLen: 262_144, policy: 'solver' })
  tap = await startEngineTap(engine.url)
  edge = await startEdge({
    persistTo: join(work, 'edge-state'),
    vars: {
      ROLLGATE_ADMIN_TOKEN: ADMIN_TOKEN,
      ROLLGATE_SIGNING_KEY: 'docker-e2e-signing-key',
      ROLLGATE_UPSTREAM_URL: tap.url,
      ROLLGATE_RUNNER_TOKEN: RUNNER_TOKEN,
    },
  })
  const options: RunnerCommandOptions = {
    edge: edge.url,
    token: RUNNER_TOKEN,
    upstream: tap.url,
    servedModel: null,
    upstreamKind: 'vllm',
    runtime: 'docker',
    image: image.tag,
    roBind: image.binds.map((path) => ({ source: path, target: path })),
    maxInit: 1,
    maxRun: 1,
    maxPostrun: 1,
    readyBuffer: null,
    stateDir: join(work, 'runner-state'),
    workDir: join(work, 'sessions'),
    runnerId: 'docker-e2e',
    statusPort: 0,
    statusHost: '127.0.0.1',
    jsonLogs: true,
  }
  runner = startRunner(options, 'cli', { DOCKER_HOST: `unix://${daemon.socketPath}` })
  await runner.waitFor((line) => line.event === 'edge.registered', 60_000, 'runner registered')
}, 180_000)

afterAll(async () => {
  await runner?.stop()
  await tap?.close()
  await edge?.stop()
  await engine?.close()
  await daemon?.stop()
  if (work) rmSync(work, { recursive: true, force: true })
})

type TaskState = { status: string; sessions: { session_id: string; status: string; reward: number | null }[] }

describe('rollgate runner --runtime docker', () => {
  it('solves tasks/fix-stats in containers: COMPLETED, reward 1, every engine call captured exactly', async () => {
    const since = Math.floor(Date.now() / 1000) - 1
    const task = loadTaskFile(join(REPO_ROOT, 'tasks/fix-stats/task.json')) as Record<string, unknown>
    const taskId = `docker-e2e-${Date.now().toString(36)}`
    Object.assign(task, {
      task_id: taskId,
      num_samples: 1,
      runtime: { ...(task.runtime as object), backend: 'docker', image: image.tag },
    })
    await admin('/rollout/task/submit', { method: 'POST', body: JSON.stringify(task) })
    const state = await eventually(async () => {
      const status = await admin<TaskState>(`/rollout/task/${taskId}?results=false`)
      expect(status.status).not.toBe('running')
      return status
    }, 240_000)
    const session = state.sessions[0]!
    expect(session, runner.output().slice(-3000)).toMatchObject({ status: 'COMPLETED', reward: 1 })

    const records: CapturedRecord[] = []
    for (let after: number | null = -1; after !== null; ) {
      const page: { completions: CapturedRecord[]; next_after_seq: number | null } = await admin(
        `/v1/sessions/${session.session_id}/completions?after_seq=${after}`,
      )
      records.push(...page.completions)
      after = page.next_after_seq
    }
    const trajectory = (builder: string) => admin<Trajectory>(`/v1/sessions/${session.session_id}/trajectory?builder=${builder}`)
    const check = checkSession({
      served: tap.calls,
      records,
      perRequest: await trajectory('per_request'),
      prefixMerging: await trajectory('prefix_merging'),
    })
    expect(check.problems).toEqual([])
    expect(check.calls).toBeGreaterThan(0)
    expect(check.captured).toBe(check.calls)
    expect(check.mismatches).toBe(0)

    // The agent and the evaluator each ran in a docker container labelled with the session.
    const events = (await daemon.docker.getEvents({
      since,
      until: Math.ceil(Date.now() / 1000),
      filters: { type: ['container'], event: ['create'], label: ['rollgate.session'] },
    })) as unknown as AsyncIterable<Buffer>
    let text = ''
    for await (const chunk of events) text += chunk.toString()
    const created = text
      .split('\n')
      .filter(Boolean)
      .map((line) => (JSON.parse(line) as { Actor: { Attributes: Record<string, string> } }).Actor.Attributes['rollgate.session'])
    expect(created).toEqual(expect.arrayContaining([session.session_id, `${session.session_id}-eval`]))
  }, 300_000)
})
