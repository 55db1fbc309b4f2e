/**
 * @module
 * A finished task's session results, one at a time, reduced to what a caller decides on (ids, status,
 * error, the evaluator's metadata, each trace's reward), read from the edge's streamed `TaskStatus`
 * (`GET /rollout/task/:id`) without holding it: a long session's result is tens of MB (a per_request one
 * hundreds), and the task's results together more; the traces' token arrays and messages are skipped,
 * never parsed (`json-select.ts`).
 */
import type { SessionResult } from '../../src/contract/trajectory.ts'
import type { EdgeClient } from './edge-client.ts'
import { type Selection, selectJson } from './json-select.ts'

/** A `SessionResult` with only these fields; each trace holds only its `reward`. */
export interface ResultSummary {
  session_id: string
  task_id: string
  status: SessionResult['status']
  error: string | null
  trajectory: { metadata: { evaluation?: unknown }; traces: { reward?: number | null }[] }
}

const CAPTURE = { capture: true } as const
const RESULT_FIELDS: Selection = {
  fields: {
    results: {
      each: {
        emit: true,
        fields: {
          session_id: CAPTURE,
          task_id: CAPTURE,
          status: CAPTURE,
          error: CAPTURE,
          trajectory: {
            fields: {
              metadata: { fields: { evaluation: CAPTURE } },
              traces: { each: { fields: { reward: CAPTURE } } },
            },
          },
        },
      },
    },
  },
}

/** The summaries of `chunks` (a `TaskStatus` with results, as JSON bytes), in the task's order. */
export async function* resultSummaries(chunks: AsyncIterable<Uint8Array>): AsyncGenerator<ResultSummary> {
  for await (const value of selectJson(chunks, RESULT_FIELDS)) {
    const result = value as Partial<ResultSummary>
    const trajectory = result.trajectory ?? { metadata: {}, traces: [] }
    yield {
      session_id: result.session_id ?? '',
      task_id: result.task_id ?? '',
      status: result.status ?? 'ERROR',
      error: result.error ?? null,
      trajectory: { metadata: trajectory.metadata ?? {}, traces: trajectory.traces ?? [] },
    }
  }
}

/** The results of the finished task `taskId`, one summary at a time. */
export function taskResultSummaries(client: EdgeClient, taskId: string): AsyncGenerator<ResultSummary> {
  return resultSummaries(client.taskResultStream(taskId))
}
