/**
 * @module
 * `prefix_merging` builder. `strict: true` runs Polar's reference algorithm (`polar-strict.ts`);
 * otherwise the tolerant, linear-time builder: chain (`chain-records.ts`), label
 * (`classify-branch.ts`), finalize each segment into a trace, and report
 * `metadata.reconstruction_stats` (Polar's counters first).
 */
import type { CompletionRecord } from '../contract/completion-record.ts'
import type { BranchLabel, Trace, Trajectory } from '../contract/trajectory.ts'
import { createChainer } from './chain-records.ts'
import { labelBranches } from './classify-branch.ts'
import type { PrefixMergingConfig } from './config.ts'
import { detectEotSession } from './end-of-turn.ts'
import { partitionRecords } from './extract-trace.ts'
import { buildPrefixMergingStrict } from './polar-strict.ts'
import { finalizeSegment, type Segment, tip } from './segment.ts'
import { mergeRatios, type SessionInfo, trajectoryMetadata } from './trajectory-metadata.ts'

export interface PrefixMergingOptions {
  config: PrefixMergingConfig
  session?: SessionInfo
  /** Optional detokenizer used only to label drift as `retokenization` exactly. */
  decode?: (ids: number[]) => string
}

function increment(counts: Record<string, number>, key: string, amount = 1) {
  counts[key] = (counts[key] ?? 0) + amount
}

function reconstructionStats(
  segments: readonly Segment[],
  trainableCount: number,
  recordCount: number,
  excludedByReason: Record<string, number>,
) {
  const chainSizes = new Map<number, number>()
  const breaks: Record<string, number> = {}
  const branches: Record<string, number> = {}
  const driftByReason: Record<string, number> = {}
  let continued = 0
  let roots = 0
  let strictRuleMerges = 0
  let turnsWithDrift = 0
  let driftMax = 0
  let boundaryDriftTotal = 0
  let contextDriftSum = 0
  let retries = 0
  let trainedTokens = 0
  let trainedUnderDrift = 0
  for (const segment of segments) {
    // A segment's first turn is never a merge and has no drift (zero in each sum below).
    for (const turn of segment.turns) {
      trainedTokens += turn.responseLength
      if (turn.contextDrift > 0) {
        trainedUnderDrift += turn.responseLength
        turnsWithDrift++
      }
      if (turn.strictRuleMerge) strictRuleMerges++
      driftMax = Math.max(driftMax, turn.contextDrift)
      contextDriftSum += turn.contextDrift
      boundaryDriftTotal += turn.boundaryDrift
    }
    chainSizes.set(segment.chain, (chainSizes.get(segment.chain) ?? 0) + 1)
    if (segment.breakReason !== null) increment(breaks, segment.breakReason)
    // Every segment is labelled (`labelBranches`) before the stats are taken.
    increment(branches, segment.branch as BranchLabel)
    if (segment.origin === 'retry' || segment.origin === 'superseded') retries++
    continued += segment.turns.length - 1
    if (segment.origin === 'root') roots++
    for (const [reason, value] of Object.entries(tip(segment).driftByReason)) {
      increment(driftByReason, reason, value)
    }
  }
  let full = 0
  for (const size of chainSizes.values()) if (size === 1) full++
  return {
    // Polar's counters. A chain is "truncated" when it needed more than one trace (nothing is
    // dropped here); every trainable completion is merged into some trace.
    chains_total: chainSizes.size,
    chains_reconstructed_full: full,
    chains_reconstructed_truncated: chainSizes.size - full,
    completions_total: trainableCount,
    completions_merged: segments.reduce((sum, segment) => sum + segment.turns.length, 0),
    // Rollgate's.
    records_total: recordCount,
    completions_excluded: recordCount - trainableCount,
    excluded_by_reason: excludedByReason,
    traces_total: segments.length,
    turns_continued: continued,
    /**
     * `turns_mergeable` (every turn after the first of its conversation), `merged_turn_ratio` (continued ÷
     * trainable completions, 0 = per_request, at most (n−1)/n) and `mergeable_merged_ratio` (continued ÷
     * mergeable turns, 1 = every conversation one trace).
     */
    ...mergeRatios(trainableCount, roots, continued),
    /** Continued turns that Polar's strict rule would also have merged. */
    strict_rule_merges: strictRuleMerges,
    breaks,
    branches,
    retries,
    drift: {
      turns_with_drift: turnsWithDrift,
      context_drift_tokens_max: driftMax,
      context_drift_tokens_sum: contextDriftSum,
      boundary_drift_tokens_total: boundaryDriftTotal,
      /** Sampled tokens trained (mask 1) in all traces. */
      trained_tokens_total: trainedTokens,
      /** Of those, tokens of turns whose training context differs from the prompt they were sampled under. */
      trained_tokens_under_drift: trainedUnderDrift,
      /** Drift of each trace's last turn, summed per reason. */
      final_drift_by_reason: driftByReason,
    },
  }
}

/** The trajectory's shell and its traces in output order, each finalized only when asked for. */
export interface PrefixMergingPlan {
  status: Trajectory['status']
  metadata: Trajectory['metadata']
  error: string | null
  entries: PlannedTrace[]
}

export interface PlannedTrace {
  /** The record whose prompt and request (messages, tools) the trace starts with. */
  first: CompletionRecord
  /** Build the trace (its token arrays are allocated here, once). */
  build(): Trace
}

/**
 * One tolerant prefix_merging build, fed one trainable record at a time (`route`, in the order of
 * `trainable`), then `finish`ed into a plan. `buildPrefixMerging` runs it over records in memory; the
 * session object runs it over the durable log, loading each record just before it is routed and
 * streaming the planned traces one by one (`src/durable/session/trajectory-stream.ts`).
 */
export interface PrefixMergingRun {
  trainable: readonly CompletionRecord[]
  /**
   * Route one record. True when it opened a trace: its request (messages, tools) is read again when the
   * trace is built, so a streamed build may keep it rather than read it from the log twice.
   */
  route(record: CompletionRecord): boolean
  finish(): PrefixMergingPlan
}

export function startPrefixMerging(records: readonly CompletionRecord[], options: PrefixMergingOptions): PrefixMergingRun {
  const { config, session } = options
  const { trainable, excluded } = partitionRecords(records)
  const eot = config.end_of_turn_token_id ?? detectEotSession(trainable)
  const chainer = createChainer(records, {
    config,
    eot,
    decode: options.decode,
  })
  const finish = (): PrefixMergingPlan => {
    const segments = chainer.segments
    labelBranches(segments)
    // Position of each segment inside its chain (creation order), then traces in arrival order.
    const chainPositions = new Map<number, number>()
    const positioned = segments.map((segment) => {
      const position = chainPositions.get(segment.chain) ?? 0
      chainPositions.set(segment.chain, position + 1)
      return { segment, position }
    })
    // A stable sort: segments starting at the same record stay in creation order.
    positioned.sort((a, b) => a.segment.firstSeq - b.segment.firstSeq)
    const entries = positioned.map(({ segment, position }) => ({
      first: (segment.turns[0] as Segment['turns'][number]).record,
      build: () => finalizeSegment(segment, position),
    }))

    const excludedByReason: Record<string, number> = {}
    for (const entry of excluded) increment(excludedByReason, entry.reason)
    const metadata = {
      ...trajectoryMetadata('prefix_merging', records, session, entries.length),
      reconstruction_stats: reconstructionStats(segments, trainable.length, records.length, excludedByReason),
      reconstruction: {
        mode: 'tolerant',
        preset: config.preset ?? null,
        end_of_turn_token_id: eot,
        end_of_turn_token_source: config.end_of_turn_token_id === null ? 'auto' : 'config',
        max_context_drift_tokens: config.max_context_drift_tokens,
        retry_policy: config.retry_policy,
      },
      excluded_completions: excluded,
    }
    if (entries.length === 0) {
      return { status: 'ERROR', metadata, entries, error: records.length === 0 ? 'no completions' : 'no trainable completions' }
    }
    return { status: 'COMPLETED', metadata, entries, error: null }
  }
  const route = (record: CompletionRecord): boolean => {
    const before = chainer.segments.length
    chainer.route(record)
    for (let i = before; i < chainer.segments.length; i++) {
      if ((chainer.segments[i] as Segment).promptRecord === record) return true
    }
    return false
  }
  return { trainable, route, finish }
}

export function buildPrefixMerging(records: readonly CompletionRecord[], options: PrefixMergingOptions): Trajectory {
  if (options.config.strict) return buildPrefixMergingStrict(records, options.session, options.config.end_of_turn_token_id)
  const run = startPrefixMerging(records, options)
  for (const record of run.trainable) run.route(record)
  const plan = run.finish()
  return { status: plan.status, metadata: plan.metadata, traces: plan.entries.map((entry) => entry.build()), error: plan.error }
}
