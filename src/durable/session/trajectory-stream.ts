/**
 * @module
 * A session's trajectory (and its trainer exports) as a sequence of text chunks, never one string of
 * the whole trajectory: finalize writes the chunks to R2 in parts, `GET …/trajectory` streams them.
 *
 * - `per_request` is built incrementally from the log: the metadata comes first from every record's small
 *   fields (`CompletionLog.headers`), then one trace per trainable record, read a few records at a time.
 *   Memory holds one page of records and one trace, at any session length. The text is exactly
 *   `JSON.stringify(buildPerRequest(records))`.
 * - `prefix_merging` chains records that may continue any earlier segment, so it is built in memory from
 *   records without `original_request` (the builders never read it), then written out trace by trace.
 *
 * JSON formats start with one space at once (valid JSON) so the first byte leaves before the build.
 */
import type { CompletionRecord } from '../../contract/completion-record.ts'
import type { BuilderName, Trace, Trajectory } from '../../contract/trajectory.ts'
import { excludedEntry, exclusionReason, traceFromRecord } from '../../reconstruct/extract-trace.ts'
import {
  checkBuilderConfig,
  reconstructTrajectory,
  toNemoGymRows,
  toSftRows,
  toSftTokenRows,
  UNKNOWN_TASK_ID,
} from '../../reconstruct/index.ts'
import { type SessionInfo, trajectoryMetadata } from '../../reconstruct/trajectory-metadata.ts'
import type { CompletionLog } from './completion-log.ts'

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

interface Shell {
  status: Trajectory['status']
  metadata: Trajectory['metadata']
  error: string | null
  /** Traces in output order (produced lazily for per_request). */
  traces: AsyncIterable<Trace>
}

export function contentTypeOf(format: TrajectoryFormat): string {
  return format === 'trajectory' || format === 'session_result' ? 'application/json' : 'application/x-ndjson'
}

/** The trajectory of `log` as text chunks in `format`. */
export async function* trajectoryChunks(
  log: CompletionLog,
  request: StreamRequest,
  session: SessionInfo & { session_id: string; task_id: string | null },
  summary: StreamSummary = { trace_count: 0 },
): AsyncGenerator<string> {
  const format = request.format ?? 'trajectory'
  const json = format === 'trajectory' || format === 'session_result'
  if (json) yield ' '
  const shell = request.builder === 'per_request' ? perRequestShell(log, request, session) : await builtShell(log, request, session)
  if (format === 'trajectory' || format === 'session_result') {
    if (format === 'session_result') {
      yield `{"session_id":${JSON.stringify(session.session_id)},"task_id":${JSON.stringify(session.task_id ?? UNKNOWN_TASK_ID)},"status":${JSON.stringify(shell.status)},"trajectory":`
    }
    yield `{"status":${JSON.stringify(shell.status)},"metadata":${JSON.stringify(shell.metadata)},"traces":[`
    let index = 0
    for await (const trace of shell.traces) {
      yield (index++ === 0 ? '' : ',') + JSON.stringify(trace)
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
  // Row exports: each row is built from a trajectory whose only trace sits at its own index (a sparse
  // array: the export functions map over it, so row indices and ids are those of the whole trajectory).
  let index = 0
  for await (const trace of shell.traces) {
    const traces: Trace[] = []
    traces[index++] = trace
    const one: Trajectory = { status: shell.status, metadata: shell.metadata, traces, error: shell.error }
    const rows = format === 'nemo-gym' ? toNemoGymRows(one) : format === 'sft' ? toSftRows(one) : toSftTokenRows(one)
    for (const row of rows) if (row !== undefined) yield `${JSON.stringify(row)}\n`
  }
  summary.trace_count = index
}

/** per_request without holding the session: metadata from the headers, traces from the log one by one. */
function perRequestShell(log: CompletionLog, request: StreamRequest, session: SessionInfo): Shell {
  const { warnings } = checkBuilderConfig('per_request', request.config)
  const headers = log.headers() as unknown as CompletionRecord[]
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
    traces: (async function* () {
      for await (const record of log.stream({ withoutOriginal: true })) {
        if (exclusionReason(record) === null) yield traceFromRecord(record)
      }
    })(),
  }
}

async function builtShell(log: CompletionLog, request: StreamRequest, session: SessionInfo): Promise<Shell> {
  const trajectory = reconstructTrajectory(await log.all({ withoutOriginal: true }), {
    builder: request.builder,
    ...(request.config ? { config: request.config } : {}),
    session,
  })
  return {
    status: trajectory.status,
    metadata: trajectory.metadata,
    error: trajectory.error,
    traces: (async function* () {
      // Hand each trace out once and drop it from the trajectory, so written traces can be collected.
      const traces = trajectory.traces
      for (let i = 0; i < traces.length; i++) {
        const trace = traces[i] as Trace
        ;(traces as (Trace | undefined)[])[i] = undefined
        yield trace
      }
    })(),
  }
}
