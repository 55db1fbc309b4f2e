/**
 * @module
 * The per-session acceptance checks of `npm run test:harnesses` (issue #9.3), as plain functions over
 * what the engine served (an engine tap), what the edge captured (completion records) and the two
 * trajectories the edge rebuilt:
 * - every generation call the engine served is captured, and every captured completion is one the engine
 *   served (same prompt ids, same sampled ids, same logprobs);
 * - streaming answers were accepted (every record `ok`; which were streamed is reported);
 * - `prefix_merging`: a chain's later segments each carry a named `break_reason`; branches are labelled;
 * - every mask-1 token of every `prefix_merging` trace is, at its turn's place, exactly a token the engine
 *   sampled for that completion, with its logprob, and no other token has mask 1.
 */
import type { Trajectory } from '../../src/contract/trajectory.ts'
import type { ServedCall } from './engine-tap.ts'

export interface CapturedRecord {
  completion_id: string
  seq: number
  status: string
  trainable: boolean
  stream: boolean
  agent: string
  api: string
  prompt_token_ids: number[]
  response_token_ids: number[]
  response_logprobs: number[] | null
}

export interface SessionCheck {
  /** Generation calls the engine served for the session. */
  calls: number
  /** Completions the edge captured. */
  captured: number
  streamed: number
  traces_per_request: number
  traces_prefix_merging: number
  /** Continued turns ÷ completions (at most (n−1)/n for one trace). */
  merged_turn_ratio: number | null
  /** Turns after the first of their conversation (agent branch or side call). */
  turns_mergeable: number
  /** Of those, continued into the trace of the turn before. */
  turns_continued: number
  /** `turns_continued ÷ turns_mergeable` (1 = every conversation one trace). */
  mergeable_merged_ratio: number | null
  /** Tokens or logprobs (mask 1, or captured) that differ from what the engine sampled, plus unmatched calls. */
  mismatches: number
  breaks: string[]
  branches: Record<string, number>
  /** Human-readable reasons the session fails the checks (empty = passes). */
  problems: string[]
}

function sampled(call: ServedCall): { prompt: number[]; response: number[]; logprobs: number[] | null } | null {
  const choice = call.answer?.choices?.[0]
  if (!call.answer?.prompt_token_ids || !choice?.token_ids) return null
  const content = choice.logprobs?.content
  return {
    prompt: call.answer.prompt_token_ids,
    response: choice.token_ids,
    logprobs: content ? content.map((entry) => entry.logprob) : null,
  }
}

const sameIds = (a: readonly number[], b: readonly number[]) => a.length === b.length && a.every((value, index) => value === b[index])
/** Logprobs compare as float32 (what the edge stores unless a value needs float64). */
const sameLogprob = (a: number, b: number) => a === b || Math.fround(a) === Math.fround(b)

export function checkSession(input: {
  served: readonly ServedCall[]
  records: readonly CapturedRecord[]
  perRequest: Trajectory
  prefixMerging: Trajectory
}): SessionCheck {
  const problems: string[] = []
  let mismatches = 0
  const served = input.served.filter((call) => call.status >= 200 && call.status < 300)
  const samples = served.map(sampled)
  const used = new Set<number>()
  const byId = new Map<string, { record: CapturedRecord; sample: NonNullable<ReturnType<typeof sampled>> }>()

  for (const record of input.records) {
    if (record.status !== 'ok') problems.push(`completion ${record.seq} is ${record.status}`)
    const index = samples.findIndex(
      (sample, i) =>
        !used.has(i) &&
        sample !== null &&
        sameIds(sample.prompt, record.prompt_token_ids) &&
        sameIds(sample.response, record.response_token_ids),
    )
    if (index < 0) {
      mismatches++
      problems.push(`completion ${record.seq}: no engine call served these prompt and response ids`)
      continue
    }
    used.add(index)
    const sample = samples[index]!
    byId.set(record.completion_id, { record, sample })
    if (sample.logprobs && record.response_logprobs) {
      const differing = sample.logprobs.filter((value, i) => !sameLogprob(value, record.response_logprobs![i]!)).length
      if (differing > 0 || sample.logprobs.length !== record.response_logprobs.length) {
        mismatches += Math.max(differing, 1)
        problems.push(`completion ${record.seq}: ${differing} logprobs differ from the engine's`)
      }
    } else if (sample.logprobs && !record.response_logprobs) {
      mismatches++
      problems.push(`completion ${record.seq}: logprobs not captured`)
    }
  }
  const unmatchedServed = served.length - used.size
  if (unmatchedServed > 0) {
    mismatches += unmatchedServed
    problems.push(`${unmatchedServed} engine generation call(s) not captured`)
  }
  if (served.length !== input.records.length) problems.push(`engine served ${served.length} calls, edge captured ${input.records.length}`)

  // prefix_merging: mask-1 tokens are exactly the sampled ones, at their turns' places.
  const breaks: string[] = []
  const branches: Record<string, number> = {}
  input.prefixMerging.traces.forEach((trace, traceIndex) => {
    const metadata = trace.metadata as {
      branch?: string
      agent?: string
      chain_index?: number
      chain_segment_index?: number
      break_reason?: string | null
      turns?: { completion_id: string; response_offset: number; response_length: number }[]
    }
    const branch = metadata.branch ?? 'unlabelled'
    branches[branch] = (branches[branch] ?? 0) + 1
    if (!metadata.branch) problems.push(`trace ${traceIndex} has no branch label`)
    if ((metadata.chain_segment_index ?? 0) > 0) {
      if (!metadata.break_reason) problems.push(`trace ${traceIndex} continues chain ${metadata.chain_index} without a break_reason`)
      else breaks.push(metadata.break_reason)
    }
    const turns = metadata.turns ?? []
    let covered = 0
    for (const turn of turns) {
      const entry = byId.get(turn.completion_id)
      if (!entry) {
        mismatches += turn.response_length
        problems.push(`trace ${traceIndex}: turn ${turn.completion_id} is not a completion the engine served`)
        continue
      }
      const ids = trace.response_ids.slice(turn.response_offset, turn.response_offset + turn.response_length)
      const mask = trace.loss_mask.slice(turn.response_offset, turn.response_offset + turn.response_length)
      const wrongIds =
        entry.sample.response.filter((value, i) => ids[i] !== value).length + Math.abs(ids.length - entry.sample.response.length)
      const wrongMask = mask.filter((value) => value !== 1).length
      let wrongLogprobs = 0
      if (trace.response_logprobs && entry.sample.logprobs) {
        const logprobs = trace.response_logprobs.slice(turn.response_offset, turn.response_offset + turn.response_length)
        wrongLogprobs = entry.sample.logprobs.filter((value, i) => logprobs[i] === undefined || !sameLogprob(value, logprobs[i]!)).length
      }
      if (wrongIds + wrongMask + wrongLogprobs > 0) {
        mismatches += wrongIds + wrongMask + wrongLogprobs
        problems.push(
          `trace ${traceIndex}, completion ${entry.record.seq}: ${wrongIds} ids, ${wrongMask} mask, ${wrongLogprobs} logprobs differ from the engine's sample`,
        )
      }
      covered += turn.response_length
    }
    const maskOnes = trace.loss_mask.reduce((sum, value) => sum + value, 0)
    if (maskOnes !== covered) {
      mismatches += Math.abs(maskOnes - covered)
      problems.push(`trace ${traceIndex}: ${maskOnes} mask-1 tokens but its turns sampled ${covered}`)
    }
  })

  const stats = input.prefixMerging.metadata.reconstruction_stats as
    | { merged_turn_ratio?: number; mergeable_merged_ratio?: number; turns_mergeable?: number; turns_continued?: number }
    | undefined
  return {
    calls: served.length,
    captured: input.records.length,
    streamed: input.records.filter((record) => record.stream).length,
    traces_per_request: input.perRequest.traces.length,
    traces_prefix_merging: input.prefixMerging.traces.length,
    merged_turn_ratio: stats?.merged_turn_ratio ?? null,
    turns_mergeable: stats?.turns_mergeable ?? 0,
    turns_continued: stats?.turns_continued ?? 0,
    mergeable_merged_ratio: stats?.mergeable_merged_ratio ?? null,
    mismatches,
    breaks,
    branches,
    problems,
  }
}

/**
 * Break reasons a harness may still show under the default `exact` preset, each named with what forces it
 * (docs/harness-matrix.md). Every other break (a `retokenization`, say) fails the variant.
 */
export const ALLOWED_EXACT_BREAKS: Record<string, readonly string[]> = {
  // None today: every harness's history rewrites that split a chain are restored at the edge (replayed turns,
  // Claude Code's tool-input defaults, its mid-conversation system message). Side calls are branches, not breaks.
}

/** Problems for exact-preset breaks the harness is not known to force. */
export function unexpectedBreaks(harness: string, breaks: readonly string[]): string[] {
  const allowed = ALLOWED_EXACT_BREAKS[harness] ?? []
  const unexpected = [...new Set(breaks.filter((reason) => !allowed.includes(reason)))]
  return unexpected.map(
    (reason) =>
      `prefix_merging (exact preset) broke with ${reason} (${breaks.filter((b) => b === reason).length}×); allowed for ${harness}: ${allowed.join(', ') || 'none'}`,
  )
}

/** The matrix targets (issue #9): sequences per_request ÷ prefix_merging and the share of mergeable turns merged. */
export const MATRIX_TARGETS = { compression: 5.4, mergeableMergedRatio: 0.95 } as const

export interface MatrixTotals {
  calls: number
  traces_per_request: number
  traces_prefix_merging: number
  /** per_request ÷ prefix_merging sequences. */
  compression: number
  turns_mergeable: number
  turns_continued: number
  /** Continued ÷ mergeable turns over all sessions. */
  mergeable_merged_ratio: number
  /** Continued turns ÷ completions over all sessions. */
  merged_turn_ratio: number
  mismatches: number
}

export function matrixTotals(checks: readonly SessionCheck[]): MatrixTotals {
  const sum = (pick: (check: SessionCheck) => number) => checks.reduce((total, check) => total + pick(check), 0)
  const perRequest = sum((c) => c.traces_per_request)
  const merged = sum((c) => c.traces_prefix_merging)
  const mergeable = sum((c) => c.turns_mergeable)
  const continued = sum((c) => c.turns_continued)
  return {
    calls: sum((c) => c.calls),
    traces_per_request: perRequest,
    traces_prefix_merging: merged,
    compression: merged === 0 ? 0 : perRequest / merged,
    turns_mergeable: mergeable,
    turns_continued: continued,
    mergeable_merged_ratio: mergeable === 0 ? 1 : continued / mergeable,
    merged_turn_ratio: perRequest === 0 ? 0 : continued / perRequest,
    mismatches: sum((c) => c.mismatches),
  }
}

/** Problems when the totals miss the targets. */
export function totalsProblems(totals: MatrixTotals): string[] {
  const problems: string[] = []
  if (totals.compression < MATRIX_TARGETS.compression)
    problems.push(`${totals.compression.toFixed(2)}× fewer sequences under prefix_merging, target ≥ ${MATRIX_TARGETS.compression}×`)
  if (totals.mergeable_merged_ratio < MATRIX_TARGETS.mergeableMergedRatio)
    problems.push(
      `${(totals.mergeable_merged_ratio * 100).toFixed(1)} % of mergeable turns merged, target ≥ ${MATRIX_TARGETS.mergeableMergedRatio * 100} %`,
    )
  if (totals.mismatches > 0) problems.push(`${totals.mismatches} mask-1 mismatches`)
  return problems
}
