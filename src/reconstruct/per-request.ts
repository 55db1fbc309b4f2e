/**
 * @module
 * `per_request` builder (Polar `builder/per_request.py`, §16.2): one trace per trainable completion
 * in arrival order. Non-trainable records are listed in `metadata.excluded_completions`.
 */
import type { CompletionRecord } from '../contract/completion-record.ts'
import type { Trajectory } from '../contract/trajectory.ts'
import { partitionRecords, traceFromRecord } from './extract-trace.ts'
import { type SessionInfo, trajectoryMetadata } from './trajectory-metadata.ts'

export function buildPerRequest(records: readonly CompletionRecord[], session?: SessionInfo): Trajectory {
  const { trainable, excluded } = partitionRecords(records)
  const traces = trainable.map(traceFromRecord)
  const metadata = {
    ...trajectoryMetadata('per_request', records, session, traces.length),
    excluded_completions: excluded,
  }
  if (traces.length === 0) {
    return {
      status: 'ERROR',
      metadata,
      traces,
      error: records.length === 0 ? 'no completions' : 'no trainable completions',
    }
  }
  return { status: 'COMPLETED', metadata, traces, error: null }
}
