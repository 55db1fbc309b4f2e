/**
 * The status gate and the generation gate as plain classes over node:sqlite, with a manual clock:
 * a rollout session admits model calls only while RUNNING (every other lifecycle state refused, bare
 * capture sessions untouched), a paused gate holds RUNNING calls (counted as waiting) until it opens,
 * leases count calls in flight until returned or expired, and the deployment's gate drains, counts and
 * drops its subscribers. The workers project proves the same through the edge in each caller's shape
 * (403 before RUNNING, 401 once ended: `test/worker/rollout-gate.test.ts`).
 */
import { afterEach, describe, expect, it, vi } from 'vitest'
import { nodeSql } from '../../../scripts/lib/node-sqlite.ts'
import type { SessionStatus } from '../../contract/trajectory.ts'
import { type GateSubscriber, type GateView, GenerationGate } from './generation-gate.ts'
import { ensureSchema } from '../session/schema.ts'
import { SessionGate } from '../session/session-gate.ts'
import type { LifecycleSpec, LifecycleState } from '../session/session-lifecycle.ts'
import { SessionLifecycle } from '../session/session-lifecycle.ts'
import { SessionRollout, type SessionRolloutDeps } from '../session/session-rollout.ts'

const ALL_STATES: SessionStatus[] = [
  'REGISTERED',
  'INITIALIZING',
  'READY',
  'RUNNING',
  'POST_RUN',
  'BUILDING',
  'EVALUATING',
  'COMPLETED',
  'ERROR',
  'TIMEOUT',
]

const SPEC: LifecycleSpec = {
  task_id: 't',
  run_id: 'r',
  index: 0,
  timeout_seconds: 60,
  agent_timeout_seconds: null,
  builder: { strategy: 'per_request' } as LifecycleSpec['builder'],
  evaluator: null,
  metadata: {},
  route: 'auto',
}

class Clock {
  now = 1_000_000
  read = () => this.now
}

function unused(): never {
  throw new Error('not used by admission')
}

/** A session's rollout side over a fresh SQLite; `state` sets the stored lifecycle (none: a bare session). */
function session(state?: Partial<LifecycleState>) {
  const { sql } = nodeSql()
  ensureSchema(sql)
  const clock = new Clock()
  if (state) {
    const { state: registered } = new SessionLifecycle(sql, clock.read).register(SPEC)
    sql.run("UPDATE rg_meta SET value = ? WHERE key = 'lifecycle'", JSON.stringify({ ...registered, ...state }))
  }
  const deps: SessionRolloutDeps = {
    sql,
    storage: { setAlarm: unused, deleteAlarm: unused },
    config: () => null,
    createConfig: unused,
    log: unused,
    task: unused,
    hub: unused,
    gate: unused,
    now: clock.read,
  }
  return { sql, clock, rollout: new SessionRollout(deps), gate: () => new SessionGate(sql, clock.read) }
}

afterEach(() => {
  vi.useRealTimers()
})

describe('status gate: a rollout session takes model calls only while RUNNING', () => {
  it.each(ALL_STATES)('%s', async (status) => {
    const { rollout, gate } = session({ status, route: 'direct' })
    const admission = await rollout.admit(60_000, 0)
    if (status === 'RUNNING') {
      expect(admission).toEqual({ ok: true, managed: true, ticket: expect.any(String), policy_version: null, route: 'direct' })
      expect(rollout.peek()).toEqual({ ok: true, managed: true, ticket: '', policy_version: null, route: 'direct' })
      expect(gate().inflight()).toBe(1)
    } else {
      expect(admission).toEqual({ ok: false, status, paused: false })
      expect(rollout.peek()).toEqual({ ok: false, status, paused: false })
      expect(gate().inflight()).toBe(0)
    }
  })

  it('a runner-routed RUNNING session is admitted to its runner with the gate policy version', async () => {
    const upstream = { model: 'Qwen/Qwen3-8B', kind: 'vllm' as const }
    const { rollout, gate } = session({ status: 'RUNNING', route: 'runner', runner_id: 'r-1', runner_upstream: upstream })
    gate().update({ paused: false, policy_version: 'v7' })
    const admission = await rollout.admit(60_000, 0)
    expect(admission).toEqual({
      ok: true,
      managed: true,
      ticket: expect.any(String),
      policy_version: 'v7',
      route: 'runner',
      runner_id: 'r-1',
      upstream,
    })
    expect(rollout.peek()).toEqual({
      ok: true,
      managed: true,
      ticket: '',
      policy_version: null,
      route: 'runner',
      runner_id: 'r-1',
      upstream,
    })
    // A runner route without a runner upstream falls back to the direct route.
    const direct = session({ status: 'RUNNING', route: 'runner', runner_id: 'r-1', runner_upstream: null })
    expect(await direct.rollout.admit(60_000, 0)).toMatchObject({ ok: true, route: 'direct' })
    expect(direct.rollout.peek()).toMatchObject({ ok: true, route: 'direct' })
  })

  it('a bare capture session (no lifecycle) is admitted unmanaged, paused or not', async () => {
    const { rollout, gate } = session()
    gate().update({ paused: true, policy_version: null })
    expect(await rollout.admit(60_000, 60_000)).toEqual({ ok: true, managed: false })
    expect(rollout.peek()).toEqual({ ok: true, managed: false })
    expect(gate().inflight()).toBe(0)
  })
})

describe('generation gate at the session', () => {
  it('a paused gate holds a RUNNING call, counted as waiting, until the gate opens; then leases it with the new version', async () => {
    const { rollout, gate } = session({ status: 'RUNNING', route: 'direct' })
    const view = gate()
    // The rollout side reads the same rows; push the view through the rollout's own gate (as the gate object does).
    rollout.gateSync({ paused: true, policy_version: 'old' })
    let settled = false
    const admitted = rollout.admit(60_000, 60_000).then((admission) => {
      settled = true
      return admission
    })
    await Promise.resolve()
    expect(rollout.gateSync({ paused: true, policy_version: 'old' })).toEqual({ subscribed: true, inflight: 0, waiting: 1, completions: 0 })
    expect(settled).toBe(false)
    expect(rollout.gateSync({ paused: false, policy_version: 'new' })).toMatchObject({ waiting: 0 })
    expect(await admitted).toMatchObject({ ok: true, managed: true, policy_version: 'new' })
    expect(rollout.gateSync({ paused: false, policy_version: 'new' })).toEqual({
      subscribed: true,
      inflight: 1,
      waiting: 0,
      completions: 0,
    })
    expect(view.view()).toEqual({ paused: false, policy_version: 'new' })
  })

  it('a wait that outlasts its bound answers paused (no lease); a non-RUNNING session is refused without waiting', async () => {
    vi.useFakeTimers()
    const { rollout, gate } = session({ status: 'RUNNING', route: 'direct' })
    rollout.gateSync({ paused: true, policy_version: null })
    const admitted = rollout.admit(60_000, 5_000)
    await vi.advanceTimersByTimeAsync(4_999)
    expect(rollout.gateSync({ paused: true, policy_version: null }).waiting).toBe(1)
    await vi.advanceTimersByTimeAsync(1)
    expect(await admitted).toEqual({ ok: false, status: 'RUNNING', paused: true })
    expect(gate().waiting()).toBe(0)
    expect(rollout.gateSync({ paused: true, policy_version: null })).toMatchObject({ inflight: 0, waiting: 0 })

    const ready = session({ status: 'READY' })
    ready.rollout.gateSync({ paused: true, policy_version: null })
    expect(await ready.rollout.admit(60_000, 5_000)).toEqual({ ok: false, status: 'READY', paused: false })
    expect(ready.rollout.gateSync({ paused: true, policy_version: null })).toEqual({
      subscribed: false,
      inflight: 0,
      waiting: 0,
      completions: 0,
    })
  })

  it('a wait still ends open when the gate opened by its deadline', async () => {
    vi.useFakeTimers()
    const { gate } = session({ status: 'RUNNING' })
    const view = gate()
    view.update({ paused: true, policy_version: null })
    const open = view.waitOpen(1_000)
    expect(view.waiting()).toBe(1)
    view.update({ paused: false, policy_version: 2 })
    expect(await open).toBe(true)
    expect(view.waiting()).toBe(0)
    expect(await view.waitOpen(1_000)).toBe(true)
    expect(view.waiting()).toBe(0)
    // No timer outlives a wait.
    expect(vi.getTimerCount()).toBe(0)
    // Still paused at the deadline: false.
    view.update({ paused: true, policy_version: 2 })
    const closed = view.waitOpen(1_000)
    await vi.advanceTimersByTimeAsync(1_000)
    expect(await closed).toBe(false)
    expect(view.waiting()).toBe(0)
    expect(vi.getTimerCount()).toBe(0)
  })

  it('leases: refused while paused, counted until released or expired', () => {
    const { gate, clock } = session({ status: 'RUNNING' })
    const view = gate()
    expect(view.view()).toEqual({ paused: false, policy_version: null })
    const first = view.lease(1_000)
    const second = view.lease(2_000)
    expect(first).not.toBe(second)
    expect(view.inflight()).toBe(2)
    view.release(first!)
    expect(view.inflight()).toBe(1)
    clock.now += 1_999
    expect(view.inflight()).toBe(1)
    clock.now += 1
    expect(view.inflight()).toBe(0)
    view.update({ paused: true, policy_version: 3 })
    expect(view.lease(1_000)).toBeNull()
    expect(view.inflight()).toBe(0)
    // The view is stored: a fresh instance (an evicted object) reads it back.
    expect(gate().view()).toEqual({ paused: true, policy_version: 3 })
  })
})

/** A subscribed session as the gate object sees it (scripted answers). */
class FakeSession implements GateSubscriber {
  views: GateView[] = []
  subscribed = true
  inflight = 0
  waiting: number | undefined = 0
  completions: number | undefined = 0
  fail = false
  async gateSync(view: GateView) {
    this.views.push(view)
    if (this.fail) throw new Error('unreachable')
    return {
      subscribed: this.subscribed,
      inflight: this.inflight,
      ...(this.waiting === undefined ? {} : { waiting: this.waiting }),
      ...(this.completions === undefined ? {} : { completions: this.completions }),
    }
  }
}

function generationGate(ids: string[]) {
  const { sql } = nodeSql()
  const clock = new Clock()
  const sessions = new Map(ids.map((id) => [id, new FakeSession()]))
  const gate = new GenerationGate(sql, (id) => sessions.get(id)!, clock.read)
  return { gate, sessions, clock, sql, reopen: () => new GenerationGate(sql, (id) => sessions.get(id)!, clock.read) }
}

describe('generation gate (the deployment)', () => {
  it('status sums the subscribers; a session no longer RUNNING is dropped; an unreachable one is counted', async () => {
    const { gate, sessions, clock } = generationGate(['a', 'b', 'c'])
    expect(await gate.status()).toEqual({
      paused: false,
      policy_version: null,
      paused_at: null,
      inflight: 0,
      waiting: 0,
      sessions: 0,
      unreachable: 0,
      completions_total: 0,
    })
    for (const id of ['a', 'b', 'c']) {
      expect(gate.subscribe(id)).toEqual({ paused: false, policy_version: null })
      clock.now += 1
    }
    const [a, b, c] = ['a', 'b', 'c'].map((id) => sessions.get(id)!) as [FakeSession, FakeSession, FakeSession]
    Object.assign(a, { inflight: 2, waiting: 1, completions: 5 })
    Object.assign(b, { inflight: 1, waiting: undefined, completions: undefined })
    Object.assign(c, { subscribed: false, inflight: 4, waiting: 3, completions: 100 })
    expect(await gate.status()).toMatchObject({ inflight: 7, waiting: 4, sessions: 2, unreachable: 0, completions_total: 5 })
    // c was dropped: not asked again.
    expect(c.views).toHaveLength(1)
    b.fail = true
    expect(await gate.status()).toMatchObject({ inflight: 2, waiting: 1, sessions: 1, unreachable: 1, completions_total: 5 })
    gate.unsubscribe('a')
    expect(await gate.status()).toMatchObject({ inflight: 0, sessions: 0, unreachable: 1 })
    expect(a.views).toHaveLength(2)
  })

  it('many subscribers are each asked once per push (in batches)', async () => {
    const ids = Array.from({ length: 40 }, (_, index) => `s${index}`)
    const { gate, sessions } = generationGate(ids)
    for (const id of ids) gate.subscribe(id)
    for (const session of sessions.values()) session.inflight = 1
    expect(await gate.status()).toMatchObject({ sessions: 40, inflight: 40 })
    for (const session of sessions.values()) expect(session.views).toHaveLength(1)
  })

  it('pause pushes the paused view and waits for the calls in flight to drain; resume pushes the open view', async () => {
    const { gate, sessions, clock, reopen } = generationGate(['a'])
    gate.subscribe('a')
    const a = sessions.get('a')!
    a.inflight = 1
    const pausing = gate.pause(60_000, 'v2')
    await vi.waitFor(() => expect(a.views.length).toBeGreaterThanOrEqual(2))
    a.inflight = 0
    const paused = await pausing
    expect(paused.drained).toBe(true)
    expect(paused.status).toMatchObject({ paused: true, policy_version: 'v2', inflight: 0, paused_at: new Date(clock.now).toISOString() })
    expect(a.views.at(-1)).toEqual({ paused: true, policy_version: 'v2' })
    // A second pause keeps the first pause time; the view is stored (an evicted gate reads it back).
    const pausedAt = clock.now
    clock.now += 5_000
    expect((await gate.pause(0)).status).toMatchObject({ paused_at: new Date(pausedAt).toISOString(), policy_version: 'v2' })
    expect(reopen().view()).toEqual({ paused: true, policy_version: 'v2', paused_at: pausedAt })
    expect(gate.subscribe('a')).toEqual({ paused: true, policy_version: 'v2' })

    expect(await gate.resume(8)).toMatchObject({ paused: false, paused_at: null, policy_version: 8 })
    expect(a.views.at(-1)).toEqual({ paused: false, policy_version: 8 })
    expect(await gate.resume()).toMatchObject({ policy_version: 8 })
    expect(await gate.resume('8')).toMatchObject({ policy_version: '8' })
    expect(await gate.resume(null)).toMatchObject({ policy_version: null })
  })

  it('pause gives up at its deadline while a call is in flight or a subscriber is unreachable', async () => {
    const { gate, sessions, clock } = generationGate(['a'])
    gate.subscribe('a')
    const a = sessions.get('a')!
    a.inflight = 1
    const pausing = gate.pause(1_000)
    await vi.waitFor(() => expect(a.views.length).toBeGreaterThanOrEqual(1))
    clock.now += 999
    await vi.waitFor(() => expect(a.views.length).toBeGreaterThanOrEqual(2))
    clock.now += 1
    const timedOut = await pausing
    expect(timedOut).toMatchObject({ drained: false, status: { paused: true, inflight: 1 } })

    a.inflight = 0
    a.fail = true
    expect(await gate.pause(0)).toMatchObject({ drained: false, status: { unreachable: 1, inflight: 0 } })
    a.fail = false
    expect(await gate.pause(0)).toMatchObject({ drained: true, status: { unreachable: 0, inflight: 0 } })
  })
})
