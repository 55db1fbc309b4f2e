/**
 * Two-phase enrolment end to end: the real runner process (`rollgate runner`, its secret file in a temporary
 * `--state-dir`) against the edge under `wrangler dev`. A secret the edge mints is pending until the runner
 * shows it kept it; these are the ways a runner can be stopped inside that window, and how it gets out:
 *
 * - the runner confirms on the enrolling connection (`secret.kept`, sent once its file is fsync'd), so the
 *   shared token alone is refused (401) while it is still on its first connection;
 * - killed after the secret was issued and written but before the edge heard it was kept: restarted with the
 *   file, it presents the secret and confirms it (no new enrolment, the file stays as it is); after a kill -9
 *   of a confirmed runner, the same;
 * - killed before it wrote the file: restarted token-only, it gets 409 while the old connection is live
 *   (retried), and enrols afresh once it is gone; the stale pending secret opens nothing.
 *
 * Scripted clients (`RunnerClient`, which never sends `secret.kept`) play the runner that was killed in the
 * window: what they leave on the edge is what a killed runner leaves.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import type { RunnerCommandOptions } from '../../cli/commands/runner.ts'
import type { RunnerEntry, RunnerList } from '../../src/contract/rollout.ts'
import { type EngineHandle, startEngine } from '../../engine/server.ts'
import { type EdgeProcess, startEdge } from '../../scripts/lib/processes.ts'
import { RunnerClient } from '../support/runner-client.ts'
import { type RunnerProc, runnerOptions, startRunner } from '../support/runner-proc.ts'
import { eventually } from '../support/stack.ts'

const ADMIN_TOKEN = 'enrol-admin-token'
const RUNNER_TOKEN = 'enrol-runner-token'

let engine: EngineHandle
let edge: EdgeProcess
let persistTo: string
let stateRoot: string
const procs: RunnerProc[] = []
const clients: RunnerClient[] = []

function options(runnerId: string): RunnerCommandOptions {
  return runnerOptions({ edge: edge.url, token: RUNNER_TOKEN, upstream: engine.url, stateRoot, runnerId })
}

function secretFile(runnerId: string): string {
  return join(stateRoot, runnerId, `${runnerId}.secret`)
}

/** The real runner process; `registered`: wait for its registration. */
async function realRunner(runnerId: string, registered = true): Promise<RunnerProc> {
  const proc = startRunner(options(runnerId))
  procs.push(proc)
  if (registered) await proc.waitFor((line) => line.event === 'edge.registered', 30_000, `${runnerId} registered`)
  return proc
}

/** A scripted runner connection (token, plus `secret` when given); it never confirms a secret it is sent. */
function scripted(runnerId: string, secret?: string): RunnerClient {
  const client = new RunnerClient({
    edgeUrl: edge.url,
    token: RUNNER_TOKEN,
    runnerId,
    engineUrl: null,
    reconnect: false,
    ...(secret ? { secret } : {}),
  })
  clients.push(client)
  return client
}

/** The HTTP status a connect of `runnerId` gets (101 → registered, then left at once). */
async function connectStatus(runnerId: string, secret?: string): Promise<number> {
  const client = scripted(runnerId, secret)
  try {
    await client.start()
    await client.shutdown()
    return 101
  } catch (error) {
    return (error as { status?: number }).status ?? 0
  }
}

async function entry(runnerId: string): Promise<RunnerEntry | undefined> {
  const response = await fetch(`${edge.url}/rollout/runners`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
  expect(response.status).toBe(200)
  return ((await response.json()) as RunnerList).runners.find((runner) => runner.runner_id === runnerId)
}

beforeAll(async () => {
  engine = await startEngine({ seed: 5 })
  persistTo = mkdtempSync(join(tmpdir(), 'rollgate-enrol-itest-'))
  stateRoot = mkdtempSync(join(tmpdir(), 'rollgate-enrol-state-'))
  edge = await startEdge({
    persistTo,
    vars: {
      ROLLGATE_ADMIN_TOKEN: ADMIN_TOKEN,
      ROLLGATE_SIGNING_KEY: 'enrol-signing-key',
      ROLLGATE_RUNNER_TOKEN: RUNNER_TOKEN,
      ROLLGATE_UPSTREAM_URL: engine.url,
      ROLLGATE_RUNNER_HEARTBEAT_MS: '1000',
      // Long enough that a killed runner is never declared lost while a test looks at it (nothing here waits for it).
      ROLLGATE_RUNNER_GRACE_MS: '30000',
    },
  })
})

afterEach(async () => {
  await Promise.all(procs.splice(0).map((proc) => proc.stop()))
  for (const client of clients.splice(0)) await client.shutdown().catch(() => {})
})

afterAll(async () => {
  await edge?.stop()
  await engine?.close()
  if (persistTo) rmSync(persistTo, { recursive: true, force: true })
  if (stateRoot) rmSync(stateRoot, { recursive: true, force: true })
})

describe('enrolment pending window (real runner process)', () => {
  it('the runner confirms its new secret on the enrolling connection: the token alone is refused while that connection lives', async () => {
    const proc = await realRunner('en-confirm')
    await proc.waitFor((line) => line.event === 'edge.enrolled', 5_000, 'enrolled')
    expect(statSync(secretFile('en-confirm')).mode & 0o777).toBe(0o600)
    const first = (await entry('en-confirm'))?.connection.id
    await eventually(async () => expect(await entry('en-confirm')).toMatchObject({ state: 'connected', credential: 'confirmed' }))
    // Still the enrolling connection: confirmed by `secret.kept`, not by a reconnect.
    expect((await entry('en-confirm'))?.connection.id).toBe(first)
    expect(proc.lines.filter((line) => line.event === 'edge.registered')).toHaveLength(1)
    // A token holder cannot enrol the id again, now or once the runner's link drops (was 409 now, and 101 after a drop).
    expect(await connectStatus('en-confirm')).toBe(401)
    expect((await entry('en-confirm'))?.connection.id).toBe(first)
  }, 60_000)

  it('killed after its secret was issued and written, before confirming: restarted with the file, it confirms on reconnect', async () => {
    // The killed runner: enrolled (a pending secret), wrote its file, died before the edge heard it was kept.
    const killed = scripted('en-killed')
    const issued = (await killed.start()).runner_secret
    expect(issued).toMatch(/^[A-Za-z0-9_-]{43}$/)
    killed.crash()
    await eventually(async () => expect(await entry('en-killed')).toMatchObject({ state: 'disconnected', credential: 'pending' }))
    mkdirSync(join(stateRoot, 'en-killed'), { recursive: true, mode: 0o700 })
    writeFileSync(secretFile('en-killed'), `${issued}\n`, { mode: 0o600 })

    const restarted = await realRunner('en-killed')
    expect(restarted.lines.some((line) => line.event === 'edge.enrolled')).toBe(false)
    expect(await entry('en-killed')).toMatchObject({ state: 'connected', credential: 'confirmed' })
    expect(readFileSync(secretFile('en-killed'), 'utf8')).toBe(`${issued}\n`)
    expect(await connectStatus('en-killed')).toBe(401)

    // kill -9 of the (confirmed) runner, and a restart: it presents its file again, nothing is enrolled anew.
    restarted.child.kill('SIGKILL')
    await restarted.exited
    await eventually(async () => expect((await entry('en-killed'))?.state).toBe('disconnected'))
    const again = await realRunner('en-killed')
    expect(again.lines.some((line) => line.event === 'edge.enrolled')).toBe(false)
    expect(await entry('en-killed')).toMatchObject({ state: 'connected', credential: 'confirmed' })
    expect(readFileSync(secretFile('en-killed'), 'utf8')).toBe(`${issued}\n`)
  }, 60_000)

  it('killed before it wrote the file: token-only, it waits out the live old connection (409, retried), then enrols afresh', async () => {
    // The killed runner's connection is still live on the edge (its socket not closed yet): pending and live.
    const killed = scripted('en-nofile')
    const stale = (await killed.start()).runner_secret
    expect(stale).toBeTruthy()
    const restarted = await realRunner('en-nofile', false)
    const refused = await restarted.waitFor((line) => line.event === 'edge.connect_failed', 30_000, 'a refused connect')
    expect(String(refused.error)).toContain('HTTP 409')
    expect(existsSync(secretFile('en-nofile'))).toBe(false)
    // The old connection goes: the runner's next try enrols the id again, keeps and confirms the new secret.
    killed.crash()
    await restarted.waitFor((line) => line.event === 'edge.enrolled', 30_000, 'enrolled')
    await restarted.waitFor((line) => line.event === 'edge.registered', 5_000, 'registered')
    const fresh = readFileSync(secretFile('en-nofile'), 'utf8').trim()
    expect(fresh).toMatch(/^[A-Za-z0-9_-]{43}$/)
    expect(fresh).not.toBe(stale)
    await eventually(async () => expect(await entry('en-nofile')).toMatchObject({ state: 'connected', credential: 'confirmed' }))
    // The stale pending secret opens nothing; nor does the token alone.
    expect(await connectStatus('en-nofile', stale)).toBe(401)
    expect(await connectStatus('en-nofile')).toBe(401)
    expect((await entry('en-nofile'))?.state).toBe('connected')
  }, 60_000)
})
