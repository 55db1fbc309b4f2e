/**
 * @module
 * Polar's session lifecycle for rollout sessions (`docs/polar-compat.md` §4, §5), persisted as one JSON row
 * in `rg_meta` (key `lifecycle`). Plain class over `Sql` with an injected clock; the SessionObject
 * shell does the I/O (trajectory build, notifications, alarms).
 *
 *   REGISTERED → INITIALIZING → READY → RUNNING → POST_RUN → BUILDING → EVALUATING → COMPLETED | ERROR | TIMEOUT
 *
 * Budgets: waiting in REGISTERED is bounded by `timeout_seconds` (Polar's rollout-side wait for a node);
 * the session budget restarts when INIT begins; the agent budget (if any) starts at RUNNING. A timeout,
 * cancel or lost runner during RUNNING still builds the partial trajectory from the durable log; before
 * RUNNING the session ends without a build (no completion can exist: calls are admitted only while
 * RUNNING). Bare capture sessions (`POST /v1/sessions`) have no lifecycle row and are unaffected.
 */
import type { EvaluatorSpec, StrategySpec } from '../../contract/rollout.ts'
import type { AgentResult, RunnerSessionStatus } from '../../contract/runner-protocol.ts'
import type { EvalResult, SessionStatus, SessionTiming, TrajectoryStatus } from '../../contract/trajectory.ts'
import type { UpstreamKind } from '../../contract/completion-record.ts'
import type { Sql } from './sql.ts'

/** A lost runner before RUNNING re-dispatches the session at most this many times in total. */
export const MAX_DISPATCH_ATTEMPTS = 3
/** Retry cadence for notifying the task / runner hub of a terminal result (doubles up to the cap). */
const NOTIFY_BASE_DELAY_MS = 1_000
const NOTIFY_MAX_DELAY_MS = 60_000

export const ACTIVE_BEFORE_RUN: readonly SessionStatus[] = ['REGISTERED', 'INITIALIZING', 'READY']
export const CONCLUDING: readonly SessionStatus[] = ['POST_RUN', 'BUILDING', 'EVALUATING']
export const TERMINAL: readonly SessionStatus[] = ['COMPLETED', 'ERROR', 'TIMEOUT']
const ORDER: Record<SessionStatus, number> = {
  REGISTERED: 0,
  INITIALIZING: 1,
  READY: 2,
  RUNNING: 3,
  POST_RUN: 4,
  BUILDING: 5,
  EVALUATING: 6,
  COMPLETED: 7,
  ERROR: 7,
  TIMEOUT: 7,
}

/** What the task registers for one sample. */
export interface LifecycleSpec {
  task_id: string
  run_id: string
  index: number
  timeout_seconds: number
  agent_timeout_seconds: number | null
  builder: StrategySpec
  evaluator: EvaluatorSpec | null
  /** `TaskRequest.metadata` (becomes `SessionResult.metadata`). */
  metadata: Record<string, unknown>
  route: 'auto' | 'runner' | 'direct'
  /** Polar's training filter for non-COMPLETED sessions (absent in states stored before it existed: `none`). */
  training_filter?: 'none' | 'mask_noncompleted'
}

export interface RunnerUpstream {
  model: string
  kind: UpstreamKind
  /** The runner's engine's context window, when it reported one. */
  max_model_len?: number
}

/** The agent outcome as recorded in `trajectory.metadata.agent_result` (Polar [later]). */
export interface RecordedAgentResult extends AgentResult {
  timeout_source: 'agent' | 'session' | null
}

export interface LifecycleState {
  spec: LifecycleSpec
  status: SessionStatus
  runner_id: string | null
  /** Decided at assignment and sticky for the session. */
  route: 'runner' | 'direct' | null
  runner_upstream: RunnerUpstream | null
  dispatch_attempts: number
  times: {
    registered_at: number
    init_at: number | null
    ready_at: number | null
    running_at: number | null
    postrun_at: number | null
    finished_at: number | null
  }
  /** Epoch ms; the session budget (queue wait while REGISTERED, then from INIT on). */
  session_deadline: number | null
  /** Epoch ms; the agent budget while RUNNING. */
  agent_deadline: number | null
  /** True when POST_RUN must build the trajectory (the session reached RUNNING). */
  build: boolean
  agent_result: RecordedAgentResult | null
  eval_result: EvalResult | null
  /** Completions with `seq` ≤ this are the session's result (later ones stay in the log, flagged late). */
  built_through_seq: number | null
  final_status: TrajectoryStatus | null
  error: string | null
  /** Outbox: the terminal result still has to reach the task / the runner hub. */
  notify: { task: boolean; hub: boolean; attempts: number; next_at: number | null }
}

export interface Transition {
  previous: SessionStatus | null
  status: SessionStatus
  reason: string | null
}

/** What a runner report or an edge decision did. */
export type LifecycleOutcome =
  | { ok: true; transitions: Transition[]; route?: 'runner' | 'direct' }
  | { ok: false; status: SessionStatus | null; reason: string }

export class SessionLifecycle {
  readonly #sql: Sql
  readonly #now: () => number
  #state: LifecycleState | null | undefined

  constructor(sql: Sql, now: () => number = Date.now) {
    this.#sql = sql
    this.#now = now
  }

  state(): LifecycleState | null {
    if (this.#state === undefined) {
      const row = this.#sql.first<{ value: string }>("SELECT value FROM rg_meta WHERE key = 'lifecycle'")
      this.#state = row ? (JSON.parse(row.value) as LifecycleState) : null
    }
    return this.#state
  }

  /** Register once; a second call returns the stored state unchanged. */
  register(spec: LifecycleSpec): { state: LifecycleState; created: boolean } {
    const existing = this.state()
    if (existing) return { state: existing, created: false }
    const now = this.#now()
    const state: LifecycleState = {
      spec,
      status: 'REGISTERED',
      runner_id: null,
      route: null,
      runner_upstream: null,
      dispatch_attempts: 0,
      times: { registered_at: now, init_at: null, ready_at: null, running_at: null, postrun_at: null, finished_at: null },
      session_deadline: now + spec.timeout_seconds * 1000,
      agent_deadline: null,
      build: false,
      agent_result: null,
      eval_result: null,
      built_through_seq: null,
      final_status: null,
      error: null,
      notify: { task: false, hub: false, attempts: 0, next_at: null },
    }
    this.#save(state)
    return { state, created: true }
  }

  /** The runner hub picked a runner (REGISTERED only). */
  assign(runnerId: string, upstream: RunnerUpstream | null): LifecycleOutcome {
    const state = this.#require()
    if (state.status !== 'REGISTERED') return refuse(state, `session is ${state.status}, not REGISTERED`)
    if (state.runner_id !== null && state.runner_id !== runnerId)
      return refuse(state, `session is already assigned to runner ${state.runner_id}`)
    if (state.dispatch_attempts >= MAX_DISPATCH_ATTEMPTS) return refuse(state, 'dispatch attempts exhausted')
    const route = state.spec.route === 'auto' ? (upstream ? 'runner' : 'direct') : state.spec.route
    if (route === 'runner' && !upstream) return refuse(state, 'runner serves no model and the task requires route "runner"')
    state.runner_id = runnerId
    state.route = route
    state.runner_upstream = route === 'runner' ? upstream : null
    state.dispatch_attempts += 1
    this.#save(state)
    return { ok: true, transitions: [], route }
  }

  /** A runner reports INITIALIZING / READY / RUNNING. Forward moves only, from the assigned runner. */
  report(runnerId: string, status: RunnerSessionStatus): LifecycleOutcome {
    const state = this.#require()
    if (state.runner_id !== runnerId) return refuse(state, `session is not assigned to runner ${runnerId}`)
    if (ORDER[status] <= ORDER[state.status]) {
      return state.status === status ? { ok: true, transitions: [] } : refuse(state, `session is already ${state.status}`)
    }
    if (ORDER[state.status] >= ORDER.POST_RUN) return refuse(state, `session is ${state.status}`)
    const now = this.#now()
    const previous = state.status
    if (state.times.init_at === null) {
      // The session budget starts when INIT begins (Polar `_start_execution_deadline`).
      state.times.init_at = now
      state.session_deadline = now + state.spec.timeout_seconds * 1000
    }
    if (status === 'READY' || status === 'RUNNING') state.times.ready_at ??= now
    if (status === 'RUNNING') {
      state.times.running_at = now
      state.build = true
      const agentBudget = state.spec.agent_timeout_seconds
      state.agent_deadline = agentBudget === null ? null : now + agentBudget * 1000
    }
    state.status = status
    this.#save(state)
    return { ok: true, transitions: [{ previous, status, reason: null }] }
  }

  /** The runner lost the session before RUNNING: back to REGISTERED for another runner, or ERROR when out of attempts. */
  requeue(reason: string): LifecycleOutcome {
    const state = this.#require()
    if (!ACTIVE_BEFORE_RUN.includes(state.status)) return refuse(state, `session is ${state.status}`)
    if (state.dispatch_attempts >= MAX_DISPATCH_ATTEMPTS) {
      return this.end({ status: 'ERROR', error: `${reason}; dispatch attempts exhausted (${MAX_DISPATCH_ATTEMPTS})` })
    }
    const previous = state.status
    const now = this.#now()
    state.status = 'REGISTERED'
    state.runner_id = null
    state.route = null
    state.runner_upstream = null
    state.times.init_at = null
    state.times.ready_at = null
    state.session_deadline = now + state.spec.timeout_seconds * 1000
    this.#save(state)
    return { ok: true, transitions: previous === 'REGISTERED' ? [] : [{ previous, status: 'REGISTERED', reason }] }
  }

  /**
   * The run is over. From RUNNING: POST_RUN with the agent outcome (the shell then builds).
   * Before RUNNING: the session ends without a build (`status` ERROR unless given).
   */
  finishRun(agentResult: RecordedAgentResult | null, evalResult: EvalResult | null, error: string | null): LifecycleOutcome {
    const state = this.#require()
    if (state.status === 'RUNNING') {
      const now = this.#now()
      state.agent_result = agentResult ?? {
        status: 'failed',
        return_code: null,
        error: error ?? 'runner reported no agent result',
        timeout_stage: null,
        timeout_source: null,
      }
      state.eval_result = evalResult
      state.error = error ?? state.agent_result.error
      state.status = 'POST_RUN'
      state.times.postrun_at = now
      state.agent_deadline = null
      this.#save(state)
      return { ok: true, transitions: [{ previous: 'RUNNING', status: 'POST_RUN', reason: agentResult?.status ?? error }] }
    }
    if (ACTIVE_BEFORE_RUN.includes(state.status)) {
      const timedOut = agentResult?.status === 'timeout'
      return this.end({ status: timedOut ? 'TIMEOUT' : 'ERROR', error: error ?? agentResult?.error ?? 'session failed before RUNNING' })
    }
    return refuse(state, `session is ${state.status}`)
  }

  /** End a session that never ran (or record the terminal status after a build): via POST_RUN to terminal. */
  end(final: { status: TrajectoryStatus; error: string | null }): LifecycleOutcome {
    const state = this.#require()
    if (TERMINAL.includes(state.status)) return refuse(state, `session is already ${state.status}`)
    const now = this.#now()
    const transitions: Transition[] = []
    if (!CONCLUDING.includes(state.status)) {
      transitions.push({ previous: state.status, status: 'POST_RUN', reason: final.error })
      state.times.postrun_at = now
      state.build = false
    }
    transitions.push({ previous: transitions.length ? 'POST_RUN' : state.status, status: final.status, reason: final.error })
    state.status = final.status
    state.final_status = final.status
    state.error = final.error
    state.times.finished_at = now
    state.session_deadline = null
    state.agent_deadline = null
    state.notify = { task: true, hub: true, attempts: 0, next_at: now }
    this.#save(state)
    return { ok: true, transitions }
  }

  /**
   * The terminal result cannot be handed off (it cannot be built or serialized, on every attempt): the
   * session ends ERROR with `error` instead. Returns the transition, or null when it already says so.
   */
  failTerminal(error: string): Transition | null {
    const state = this.#require()
    if (!TERMINAL.includes(state.status) || (state.status === 'ERROR' && state.error === error)) return null
    const previous = state.status
    state.status = 'ERROR'
    state.final_status = 'ERROR'
    state.error = error
    this.#save(state)
    return { previous, status: 'ERROR', reason: error }
  }

  /** POST_RUN → BUILDING → EVALUATING (the shell builds in between). */
  advance(status: 'BUILDING' | 'EVALUATING', builtThroughSeq?: number): Transition {
    const state = this.#require()
    const previous = state.status
    state.status = status
    if (builtThroughSeq !== undefined) state.built_through_seq = builtThroughSeq
    this.#save(state)
    return { previous, status, reason: null }
  }

  /** Which budget ran out by `at` (default now), if any. */
  expired(at?: number): { source: 'agent' | 'session' } | null {
    const state = this.state()
    if (!state) return null
    const now = at ?? this.#now()
    if (state.status === 'RUNNING' && state.agent_deadline !== null && now >= state.agent_deadline) return { source: 'agent' }
    if (
      (ACTIVE_BEFORE_RUN.includes(state.status) || state.status === 'RUNNING') &&
      state.session_deadline !== null &&
      now >= state.session_deadline
    ) {
      return { source: 'session' }
    }
    return null
  }

  notified(target: 'task' | 'hub'): void {
    const state = this.#require()
    state.notify[target] = false
    if (!state.notify.task && !state.notify.hub) state.notify.next_at = null
    this.#save(state)
  }

  notifyFailed(): void {
    const state = this.#require()
    state.notify.attempts += 1
    state.notify.next_at = this.#now() + Math.min(NOTIFY_BASE_DELAY_MS * 2 ** (state.notify.attempts - 1), NOTIFY_MAX_DELAY_MS)
    this.#save(state)
  }

  /** When the shell's alarm must fire next (epoch ms), or null. */
  nextAlarm(): number | null {
    const state = this.state()
    if (!state) return null
    const candidates: number[] = []
    if (CONCLUDING.includes(state.status)) candidates.push(this.#now())
    if (state.status === 'RUNNING' && state.agent_deadline !== null) candidates.push(state.agent_deadline)
    if ((ACTIVE_BEFORE_RUN.includes(state.status) || state.status === 'RUNNING') && state.session_deadline !== null) {
      candidates.push(state.session_deadline)
    }
    if (state.notify.next_at !== null && (state.notify.task || state.notify.hub)) candidates.push(state.notify.next_at)
    return candidates.length ? Math.min(...candidates) : null
  }

  /** Polar `SessionTiming` (milliseconds between stage starts). */
  timing(): SessionTiming {
    const { times } = this.#require()
    const span = (from: number | null, to: number | null) => (from !== null && to !== null ? Math.max(0, to - from) : 0)
    return {
      register_to_init_queue_ms: span(times.registered_at, times.init_at),
      init_ms: span(times.init_at, times.running_at),
      run_ms: span(times.running_at, times.postrun_at),
      postrun_ms: span(times.postrun_at, times.finished_at),
    }
  }

  #require(): LifecycleState {
    const state = this.state()
    if (!state) throw new Error('session has no rollout lifecycle')
    return state
  }

  #save(state: LifecycleState): void {
    this.#sql.run("INSERT OR REPLACE INTO rg_meta (key, value) VALUES ('lifecycle', ?)", JSON.stringify(state))
    this.#state = state
  }
}

function refuse(state: LifecycleState, reason: string): LifecycleOutcome {
  return { ok: false, status: state.status, reason }
}
