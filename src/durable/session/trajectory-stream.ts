/**
 * @module
 * A session's trajectory (and its trainer exports) as a sequence of text chunks, never one string of
 * the whole trajectory: finalize writes the chunks to R2 in parts, `GET …/trajectory` streams them.
 *
 * - `per_request` is built incrementally from the log: the metadata comes first from every record's small
 *   fields (`CompletionLog.headers`), then one trace per trainable record, read a few records at a time.
 *   Memory holds one page of records and one trace, at any session length. The text is exactly
 *   `JSON.stringify(buildPerRequest(records))`.
 * - `prefix_merging` (tolerant) runs the same algorithm as the in-memory builder (`startPrefixMerging`) over
 *   records read lazily from the log (`log-records.ts`): each record's request is loaded just before it is
 *   routed and reduced to its tools after; prompts go through a cache bounded in tokens. Then the planned
 *   traces are built and written one at a time. The Polar-strict port (`strict: true`) plans its chains from
 *   the prompts alone, then builds one chain's trace at a time, loading each record's request just before.
 * - A trace is written as chunks too: its long arrays (`prompt_ids`, `response_ids`, …) in slices, so the
 *   largest string is a slice, never a trace or the trajectory. The text is exactly `JSON.stringify`'s.
 *
 * Every format starts with one space at once (valid JSON; in NDJSON it leads the first row's line) so the
 * first byte leaves before the build (`buildHooks` lets a test hold the build to prove it).
 */
import type { CompletionRecord } from '../../contract/completion-record.ts'
import type { BuilderName, Trace, Trajectory } from '../../contract/trajectory.ts'
import { excludedEntry, exclusionReason, traceFromRecord } from '../../reconstruct/extract-trace.ts'
import {
  applyMergePreset,
  checkBuilderConfig,
  type PrefixMergingConfig,
  prefixMergingConfigSchema,
  toNemoGymRows,
  toSftRows,
  toSftTokenRows,
  UNKNOWN_TASK_ID,
} from '../../reconstruct/index.ts'
import { type SessionInfo, trajectoryMetadata } from '../../reconstruct/trajectory-metadata.ts'
import { startPrefixMerging } from '../../reconstruct/prefix-merging.ts'
import { startPrefixMergingStrict, strictTraceSteps } from '../../reconstruct/polar-strict.ts'
import type { CompletionLog } from './completion-log.ts'
import { LogReadError, LogRecords } from './log-records.ts'
import { SliceMemo } from './slice-memo.ts'

export const TRAJECTORY_FORMATS = ['trajectory', 'session_result', 'nemo-gym', 'sft', 'sft-tokens'] as const
export type TrajectoryFormat = (typeof TRAJECTORY_FORMATS)[number]

export interface StreamRequest {
  builder: BuilderName
  config?: Record<string, unknown>
  format?: TrajectoryFormat
}

/** Filled in while the chunks are produced. */
export interface StreamSummary {
  trace_count: number
}

/** A trajectory whose traces come one at a time: everything else is known before the first trace. */
export interface Shell {
  status: Trajectory['status']
  metadata: Trajectory['metadata']
  error: string | null
  /** How many traces `traces` gives. */
  count: number
  /** Records after `throughSeq`, left out of the build. */
  late: number
  /** Traces in output order (built lazily, one at a time). */
  traces: AsyncIterable<Trace>
}

export function contentTypeOf(format: TrajectoryFormat): string {
  return format === 'trajectory' || format === 'session_result' ? 'application/json' : 'application/x-ndjson'
}

/**
 * How often the build gives the event loop a turn. `reader`: a client reads the chunks as they come (a GET):
 * its first byte leaves before the build and what was written is flushed while the routing pass runs.
 * `background`: nobody reads before the end (finalize writes to R2): a turn now and then only so the object
 * serves other requests during a long build (each turn costs wall time in workerd: ~10 % of a 200-turn finalize).
 */
export type BuildPace = 'reader' | 'background'

/** The trajectory of `log` as text chunks in `format`. */
export async function* trajectoryChunks(
  log: CompletionLog,
  request: StreamRequest,
  session: SessionInfo & { session_id: string; task_id: string | null },
  summary: StreamSummary = { trace_count: 0 },
  pace: BuildPace = 'reader',
): AsyncGenerator<string> {
  const format = request.format ?? 'trajectory'
  // One space first, valid in every format (JSON allows leading whitespace; in NDJSON it starts the first
  // row's line), then a macrotask, so the first byte leaves before the build: reading the log is
  // synchronous (SQLite), and without it the stream's next pull would run the whole routing pass first.
  yield ' '
  if (pace === 'reader') await macrotask()
  const shell = await trajectoryShell(log, request, session, Number.POSITIVE_INFINITY, pace)
  if (format === 'trajectory' || format === 'session_result') {
    if (format === 'session_result') {
      yield `{"session_id":${JSON.stringify(session.session_id)},"task_id":${JSON.stringify(session.task_id ?? UNKNOWN_TASK_ID)},"status":${JSON.stringify(shell.status)},"trajectory":`
    }
    yield `{"status":${JSON.stringify(shell.status)},"metadata":${JSON.stringify(shell.metadata)},"traces":[`
    let index = 0
    const memo = new SliceMemo()
    for await (const trace of shell.traces) {
      if (index++ > 0) yield ','
      yield* jsonChunks(trace, memo)
    }
    summary.trace_count = index
    yield `],"error":${JSON.stringify(shell.error)}}`
    if (format === 'session_result') {
      const taskMetadata = shell.metadata.task_metadata
      const metadata = taskMetadata !== null && typeof taskMetadata === 'object' ? taskMetadata : {}
      // Outside a task there are no lifecycle stages: run_ms is the span of the model calls (as `toSessionResult`).
      const wall = (shell.metadata.capture_timing as { wall_ms?: number } | null | undefined)?.wall_ms ?? 0
      yield `,"timing":{"register_to_init_queue_ms":0,"init_ms":0,"run_ms":${wall},"postrun_ms":0},"node_id":null,"error":${JSON.stringify(shell.error)},"metadata":${JSON.stringify(metadata)}}`
    }
    return
  }
  summary.trace_count = yield* rowChunks(format, shell, shell.traces)
}

/** A row format's rows of a whole trajectory. */
export function rowsOf(format: Exclude<TrajectoryFormat, 'trajectory' | 'session_result'>, trajectory: Trajectory): object[] {
  return format === 'nemo-gym' ? toNemoGymRows(trajectory) : format === 'sft' ? toSftRows(trajectory) : toSftTokenRows(trajectory)
}

/**
 * Row exports (NDJSON) of `traces`, one trace at a time: each trace's rows are built from a trajectory whose
 * only trace sits at its own index (a sparse array: the export functions map over it, so row indices and ids
 * are those of the whole trajectory). Returns how many traces went through.
 */
export async function* rowChunks(
  format: Exclude<TrajectoryFormat, 'trajectory' | 'session_result'>,
  head: Pick<Trajectory, 'status' | 'metadata' | 'error'>,
  traces: AsyncIterable<Trace>,
): AsyncGenerator<string, number> {
  let index = 0
  for await (const trace of traces) {
    const one: Trace[] = []
    one[index++] = trace
    const rows = rowsOf(format, { status: head.status, metadata: head.metadata, traces: one, error: head.error })
    for (const row of rows) if (row !== undefined) yield `${JSON.stringify(row)}\n`
  }
  return index
}

/**
 * The trajectory of the records through `throughSeq` as a `Shell`: tolerant prefix_merging and per_request
 * read the log lazily (bounded memory), Polar-strict too (in two passes). Failures reading the log are
 * `LogReadError`s; anything else is the builder's.
 */
export async function trajectoryShell(
  log: CompletionLog,
  request: StreamRequest,
  session: SessionInfo,
  throughSeq = Number.POSITIVE_INFINITY,
  pace: BuildPace = 'reader',
): Promise<Shell> {
  return request.builder === 'per_request'
    ? perRequestShell(log, request, session, throughSeq)
    : prefixMergingShell(log, request, session, throughSeq, pace === 'reader' ? YIELD_EVERY_RECORDS : BACKGROUND_YIELD_EVERY_RECORDS)
}

/** per_request without holding the session: metadata from the headers, traces from the log one by one. */
function perRequestShell(log: CompletionLog, request: StreamRequest, session: SessionInfo, throughSeq: number): Shell {
  const { warnings } = checkBuilderConfig('per_request', request.config)
  let all: CompletionRecord[]
  try {
    all = log.headers() as unknown as CompletionRecord[]
  } catch (error) {
    throw new LogReadError(error)
  }
  const headers = all.filter((header) => header.seq <= throughSeq)
  let trainable = 0
  const excluded = []
  for (const header of headers) {
    const reason = exclusionReason(header)
    if (reason === null) trainable++
    else excluded.push(excludedEntry(header, reason))
  }
  const metadata: Record<string, unknown> = {
    ...trajectoryMetadata('per_request', headers, session, trainable),
    excluded_completions: excluded,
  }
  // As `reconstructTrajectory` reports them (same key, same place).
  if (warnings.length > 0) metadata.builder_warnings = warnings
  const empty = trainable === 0
  return {
    status: empty ? 'ERROR' : 'COMPLETED',
    metadata,
    error: empty ? (headers.length === 0 ? 'no completions' : 'no trainable completions') : null,
    count: trainable,
    late: all.length - headers.length,
    traces: (async function* () {
      let step = 0
      await buildHooks.beforeRecord?.(step++)
      // One record at a time: late records of a long session are MBs each (a 1,000-turn session's
      // per_request finalize grew the heap by 69 MB reading four at a time, 57 MB reading one).
      const records = log.stream({ withoutOriginal: true }, 1)
      for (;;) {
        let next: IteratorResult<CompletionRecord>
        try {
          next = await records.next()
        } catch (error) {
          throw new LogReadError(error)
        }
        const record = next.value as CompletionRecord | undefined
        if (next.done || !record || record.seq > throughSeq) {
          await records.return(undefined)
          break
        }
        if (exclusionReason(record) === null) yield traceFromRecord(record)
        if (buildHooks.beforeRecord) await buildHooks.beforeRecord(step)
        step++
      }
    })(),
  }
}

/**
 * Test seam: awaited before each record the build reads (`step` counts from 0; the in-memory builders
 * call it once, before reading the log). A test holds the build here to prove that the bytes already
 * written reach the client while the build waits (`test/worker/trajectory-first-byte.test.ts`).
 */
export const buildHooks: { beforeRecord: ((step: number) => void | Promise<void>) | null } = { beforeRecord: null }

/** Records routed between two turns of the event loop (a reader waits: `BuildPace`). */
const YIELD_EVERY_RECORDS = 8
/** The same when nobody reads before the end. */
const BACKGROUND_YIELD_EVERY_RECORDS = 256

function macrotask(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, 0))
}

/** Array elements per chunk when a trace is written (≈ 100 KB of JSON for token ids). */
export const JSON_ARRAY_SLICE = 16_384
/** The same for arrays of anything else (messages: a few KB each). */
export const JSON_OBJECT_SLICE = 64

function sliceSize(values: readonly unknown[]): number {
  return typeof values[0] === 'number' ? JSON_ARRAY_SLICE : JSON_OBJECT_SLICE
}

/**
 * `JSON.stringify(value)` of a plain object (a trace) as chunks: arrays of numbers longer than
 * `JSON_ARRAY_SLICE` (other arrays: `JSON_OBJECT_SLICE`) are written a slice at a time, everything else as
 * one piece. `memo`: slices the previous object of the
 * stream wrote are reused (`slice-memo.ts`).
 */
export function* jsonChunks(value: object, memo: SliceMemo = new SliceMemo()): Generator<string> {
  let out = '{'
  let first = true
  for (const key of Object.keys(value)) {
    const field = (value as Record<string, unknown>)[key]
    if (field === undefined || typeof field === 'function' || typeof field === 'symbol') continue
    out += `${first ? '' : ','}${JSON.stringify(key)}:`
    first = false
    const size = Array.isArray(field) ? sliceSize(field) : 0
    if (Array.isArray(field) && field.length > size) {
      yield `${out}[`
      for (let start = 0, index = 0; start < field.length; start += size, index++) {
        const slice = memo.slice(key, field, index, start, Math.min(field.length, start + size))
        yield start === 0 ? slice : `,${slice}`
      }
      out = ']'
    } else {
      out += JSON.stringify(field)
    }
  }
  memo.next()
  yield `${out}}`
}

/** prefix_merging over lazily read records (bounded memory): tolerant, or Polar-strict. */
async function prefixMergingShell(
  log: CompletionLog,
  request: StreamRequest,
  session: SessionInfo,
  throughSeq: number,
  yieldEvery: number,
): Promise<Shell> {
  const config = prefixMergingConfig(request)
  if (config.strict) return strictShell(log, session, throughSeq, config.end_of_turn_token_id, config.warnings, yieldEvery)
  const source = new LogRecords(log)
  const all = await source.open()
  const records = all.filter((record) => record.seq <= throughSeq)
  return { ...(await tolerantShell(source, records, config, session, yieldEvery)), late: all.length - records.length }
}

type MergeConfig = PrefixMergingConfig & { warnings: ReturnType<typeof checkBuilderConfig>['warnings'] }

/** The prefix_merging config of `request` and the warnings `checkBuilderConfig` gives. */
function prefixMergingConfig(request: StreamRequest): MergeConfig {
  const { config: checked, warnings } = checkBuilderConfig('prefix_merging', request.config)
  return { ...prefixMergingConfigSchema.parse(applyMergePreset(checked)), warnings }
}

/** Route every trainable record (its request loaded only while it is routed), then hand the traces out one by one. */
async function tolerantShell(
  source: LogRecords,
  records: readonly CompletionRecord[],
  { warnings, ...config }: MergeConfig,
  session: SessionInfo,
  yieldEvery: number,
): Promise<Omit<Shell, 'late'>> {
  const run = startPrefixMerging(records, { config, session })
  for (const [index, record] of run.trainable.entries()) {
    // Reading the log is synchronous: give the event loop a turn now and then, so what was already
    // written (the first byte of a GET) is flushed while the routing pass runs.
    if (index % yieldEvery === yieldEvery - 1) await macrotask()
    if (buildHooks.beforeRecord) await buildHooks.beforeRecord(index)
    await source.load(record)
    // A record that opens a trace keeps its request for the build (while the budget lasts).
    source.reduce(record, run.route(record))
  }
  const plan = run.finish()
  // As `reconstructTrajectory` reports them (same key, same place).
  if (warnings.length > 0) plan.metadata.builder_warnings = warnings
  return {
    status: plan.status,
    metadata: plan.metadata,
    error: plan.error,
    count: plan.entries.length,
    traces: (async function* () {
      for (const entry of plan.entries) {
        await source.load(entry.first)
        const trace = entry.build()
        source.reduce(entry.first)
        yield trace
      }
    })(),
  }
}

/**
 * The trajectory of the records through `throughSeq` as one object, and how many records came later
 * (a small session's rollout result read over RPC; the hand-off to the task streams: `result-stream.ts`).
 */
export async function buildTrajectory(
  log: CompletionLog,
  request: StreamRequest,
  session: SessionInfo,
  throughSeq = Number.POSITIVE_INFINITY,
): Promise<{ trajectory: Trajectory; late: number }> {
  const shell = await trajectoryShell(log, request, session, throughSeq)
  const traces: Trace[] = []
  for await (const trace of shell.traces) traces.push(trace)
  return { trajectory: { status: shell.status, metadata: shell.metadata, traces, error: shell.error }, late: shell.late }
}

/**
 * Polar-strict over records read lazily (`LogRecords`), in two passes (`polar-strict.ts`): the plan reads
 * every prompt once (through the bounded token cache) and no request; then each chain's trace is built
 * with its records' requests loaded one at a time, in the chain's order (a turn's messages extend its
 * parent's and share their objects), and dropped after. Memory holds the records' small fields and one trace.
 */
async function strictShell(
  log: CompletionLog,
  session: SessionInfo,
  throughSeq: number,
  endOfTurnTokenId: number | null,
  warnings: ReturnType<typeof checkBuilderConfig>['warnings'],
  yieldEvery: number,
): Promise<Shell> {
  const source = new LogRecords(log)
  const all = await source.open()
  const records = all.filter((record) => record.seq <= throughSeq)
  const planning = startPrefixMergingStrict(records, session, endOfTurnTokenId)
  for (const [index, record] of planning.trainable.entries()) {
    // Reading the log is synchronous: give the event loop a turn now and then (as `tolerantShell`).
    if (index % yieldEvery === yieldEvery - 1) await macrotask()
    if (buildHooks.beforeRecord) await buildHooks.beforeRecord(index)
    planning.place(record)
  }
  const plan = planning.finish()
  // As `reconstructTrajectory` reports them (same key, same place).
  if (warnings.length > 0) plan.metadata.builder_warnings = warnings
  return {
    status: plan.status,
    metadata: plan.metadata,
    error: plan.error,
    count: plan.chains.length,
    late: all.length - records.length,
    traces: (async function* () {
      for (const chain of plan.chains) {
        // Each record's request is loaded just before the build reads it and dropped once it went on.
        const steps = strictTraceSteps(chain)
        let next = steps.next()
        let previous: CompletionRecord | null = null
        while (!next.done) {
          const record = next.value
          await source.load(record)
          if (previous) source.reduce(previous)
          previous = record
          next = steps.next()
        }
        if (previous) source.reduce(previous)
        yield next.value
      }
    })(),
  }
}
