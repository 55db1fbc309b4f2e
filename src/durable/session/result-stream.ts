/**
 * @module
 * A rollout session's terminal `SessionResult` as text chunks, built from the durable log one trace at a
 * time (`trajectoryShell`), so a result of any size (a 1,000-turn session's is tens of MB, past the 32 MiB
 * a Durable Object RPC may carry) is written to R2 by the session itself and the task only gets its key
 * and a few small fields (`StoredResult`).
 *
 * The result is the one `session-result.ts` builds in memory (agent outcome → evaluation → training
 * filter → `toSessionResult`), with each trace run through the same functions on its own: a trajectory
 * whose only trace sits at its own index (a sparse array of the right length, so `trace_rewards` and
 * lengths check as for the whole). The trajectory's `metadata` is written after its traces (JSON key order
 * carries no meaning): the training filter's counts are known only once every trace went through it.
 * Every trace is validated with Polar's trace schema, as `toSessionResult` validates the whole.
 */
import { type SessionResult, type SessionTiming, type Trace, type Trajectory, traceSchema } from '../../contract/trajectory.ts'
import { exceedsJsonDepth } from '../../normalize/json-depth.ts'
import { applyTrainingFilter, reconstructTrajectory } from '../../reconstruct/index.ts'
import type { CompletionLog } from './completion-log.ts'
import { LogReadError } from './log-records.ts'
import { agentStatus, evaluate } from './session-result.ts'
import type { LifecycleState } from './session-lifecycle.ts'
import { jsonChunks, rowChunks, rowsOf, type Shell, type TrajectoryFormat, trajectoryShell } from './trajectory-stream.ts'

/** What the task keeps of a session's result (the result itself is the R2 object at `key`). */
export interface StoredResult {
  session_id: string
  status: SessionResult['status']
  error: string | null
  node_id: string | null
  /** Mean of the non-null trace rewards; null when none. */
  reward: number | null
  trace_count: number
  key: string
  bytes: number
}

/** A result about to be written: its head is known before its traces are built. */
export interface ResultStream {
  status: SessionResult['status']
  error: string | null
  /** Filled in while `chunks` runs. */
  summary: { reward: number | null; trace_count: number }
  chunks: AsyncGenerator<string>
}

/** A run's evaluated trajectory: its head known before its traces, which come one at a time. */
interface EvaluatedRun {
  /** Status, error and metadata of the evaluated trajectory (the training filter's counts come with `end`). */
  head: Trajectory
  /** Each trace evaluated, filtered and checked with Polar's trace schema, in order. */
  traces: AsyncGenerator<Trace>
  /** Once `traces` ran out: the trajectory's metadata (the filter's counts), the mean reward, the count. */
  end(): { metadata: Trajectory['metadata']; reward: number | null; trace_count: number }
}

/**
 * The run of `state` evaluated as `sessionResult(…, evaluate(buildRunTrajectory(…)))` evaluates it, one
 * trace at a time. Reading the log may fail (`LogReadError`, retried); a builder failure before the traces
 * is this trajectory's error, as in `buildRunTrajectory`.
 */
async function evaluatedRun(
  sessionId: string,
  log: CompletionLog,
  state: LifecycleState,
  /** Deepest result handed on (Polar's bridges parse it): a deeper trace fails the build. */
  maxDepth: number,
): Promise<EvaluatedRun> {
  const { spec } = state
  const through = state.built_through_seq ?? Number.POSITIVE_INFINITY
  const session = { session_id: sessionId, task_id: spec.task_id, metadata: spec.metadata }
  const request = { builder: spec.builder.strategy, ...(spec.builder.config ? { config: spec.builder.config } : {}) }
  let shell: Shell
  try {
    shell = state.build
      ? await trajectoryShell(log, request, session, through)
      : emptyShell(reconstructTrajectory([], { ...request, session }))
  } catch (error) {
    if (error instanceof LogReadError) throw error
    shell = emptyShell({
      status: 'ERROR',
      metadata: { builder: spec.builder.strategy, session_id: sessionId, task_id: spec.task_id, task_metadata: spec.metadata },
      traces: [],
      error: `trajectory build failed: ${(error as Error).message}`,
    })
  }
  const status = state.build ? agentStatus(state) : (state.final_status ?? 'ERROR')
  const base: Trajectory = {
    status,
    error: status === 'COMPLETED' ? null : (state.error ?? shell.error),
    metadata: { ...shell.metadata, agent_result: state.agent_result, ...(shell.late ? { late_completions: shell.late } : {}) },
    traces: new Array<Trace>(shell.count),
  }
  const filter = spec.training_filter
  // The head: evaluated over the right number of (absent) traces; the filter's counts come at the end.
  const head = applyTrainingFilter(evaluate(base, state), filter)
  let index = 0
  let masked = 0
  let rewardSum = 0
  let rewards = 0
  async function* traces(): AsyncGenerator<Trace> {
    for await (const built of shell.traces) {
      const one = new Array<Trace>(shell.count)
      one[index] = built
      const trace = traceSchema.parse(applyTrainingFilter(evaluate({ ...base, traces: one }, state), filter).traces[index])
      // A trace sits at level 4 of the result (result, trajectory, traces, trace).
      if (exceedsJsonDepth(trace, maxDepth - 3)) throw new Error(`it nests deeper than ${maxDepth} levels`)
      if ((trace.metadata.training_filter as { masked?: boolean } | undefined)?.masked) masked++
      if (trace.reward !== null) {
        rewardSum += trace.reward
        rewards++
      }
      index++
      yield trace
    }
  }
  const end = () => {
    const metadata = { ...head.metadata }
    if (metadata.training_filter) metadata.training_filter = { rule: filter, masked_traces: masked, trainable_traces: index - masked }
    return { metadata, reward: rewards ? rewardSum / rewards : null, trace_count: index }
  }
  return { head, traces: traces(), end }
}

/**
 * The result of `state`'s run as chunks (the same object `sessionResult(…, evaluate(buildRunTrajectory(…)))`
 * gives, with the trajectory's metadata after its traces). Reading the log may fail (`LogReadError`,
 * retried); a builder failure before the traces is this trajectory's error, as in `buildRunTrajectory`.
 */
export async function streamRunResult(
  sessionId: string,
  log: CompletionLog,
  state: LifecycleState,
  timing: SessionTiming,
  /** Deepest result handed on (Polar's bridges parse it): a deeper trace fails the build. */
  maxDepth = Number.POSITIVE_INFINITY,
): Promise<ResultStream> {
  const { spec } = state
  const run = await evaluatedRun(sessionId, log, state, maxDepth)
  const { head } = run
  const summary = { reward: null as number | null, trace_count: 0 }
  async function* chunks(): AsyncGenerator<string> {
    yield `{"session_id":${JSON.stringify(sessionId)},"task_id":${JSON.stringify(spec.task_id)},"status":${JSON.stringify(head.status)},"trajectory":`
    yield* trajectoryJson(run, summary)
    yield `,"timing":${JSON.stringify(timing)},"node_id":${JSON.stringify(state.runner_id)},"error":${JSON.stringify(head.error)},"metadata":${JSON.stringify(spec.metadata ?? {})}}`
  }
  return { status: head.status, error: head.error, summary, chunks: chunks() }
}

/** The evaluated trajectory as JSON chunks (its metadata after its traces); `summary` filled in at the end. */
async function* trajectoryJson(run: EvaluatedRun, summary: { reward: number | null; trace_count: number }): AsyncGenerator<string> {
  yield `{"status":${JSON.stringify(run.head.status)},"traces":[`
  let first = true
  for await (const trace of run.traces) {
    if (!first) yield ','
    first = false
    yield* jsonChunks(trace)
  }
  const end = run.end()
  summary.trace_count = end.trace_count
  summary.reward = end.reward
  yield `],"metadata":${JSON.stringify(end.metadata)},"error":${JSON.stringify(run.head.error)}}`
}

/**
 * An evaluated rollout session's export in `format`, from the same evaluated run as its stored result:
 * `session_result` is that result, `trajectory` its trajectory, the row formats its traces' rows (each
 * trace carrying its reward). Starts with one space, as every export (`trajectoryChunks`).
 */
export async function* evaluatedExportChunks(
  format: TrajectoryFormat,
  sessionId: string,
  log: CompletionLog,
  state: LifecycleState,
  timing: SessionTiming,
): AsyncGenerator<string> {
  yield ' '
  // A macrotask, so the first byte leaves before the build (as `trajectoryChunks`: reading the log is synchronous).
  await new Promise((resolve) => setTimeout(resolve, 0))
  if (format === 'session_result') {
    yield* (await streamRunResult(sessionId, log, state, timing)).chunks
    return
  }
  const run = await evaluatedRun(sessionId, log, state, Number.POSITIVE_INFINITY)
  if (format === 'trajectory') {
    yield* trajectoryJson(run, { reward: null, trace_count: 0 })
    return
  }
  yield* rowChunks(format, run.head, run.traces)
}

/** The stand-in `SessionResult` of a session whose result could not be handed off, in `format`. */
export function* resultExportChunks(format: TrajectoryFormat, result: SessionResult): Generator<string> {
  yield ' '
  if (format === 'session_result') yield JSON.stringify(result)
  else if (format === 'trajectory') yield JSON.stringify(result.trajectory)
  else for (const row of rowsOf(format, result.trajectory)) yield `${JSON.stringify(row)}\n`
}

function emptyShell(trajectory: Trajectory): Shell {
  const traces = trajectory.traces
  return {
    status: trajectory.status,
    metadata: trajectory.metadata,
    error: trajectory.error,
    count: traces.length,
    late: 0,
    traces: (async function* () {
      yield* traces
    })(),
  }
}
