/**
 * @module engine/logprobs
 * Seeded, deterministic logprobs for sampled tokens. Values are negative and exactly
 * representable as float32 (`Math.fround`), like vLLM's float32 logprob tensors, and the top-k
 * alternatives form a coherent distribution (their probabilities never sum above 1).
 */

import { combineHashes, unitFloat } from './rng.ts'

/** Closest a sampled logprob gets to 0 (keeps every value strictly negative after rounding). */
const MIN_NEGATIVE_LOGPROB = 1e-4
/** Spread of sampled logprobs; cubing a uniform keeps most tokens confident, like real models. */
const LOGPROB_SPAN = 6
/** Halving shares of the remaining mass: alternatives take 1/2, 1/4, … (always below 1 in total). */
const ALTERNATIVE_SHARE = 0.5
const ALTERNATIVE_LABEL = 0x616c74 // 'alt'

export interface LogprobCandidate {
  id: number
  logprob: number
}

export interface TokenLogprob extends LogprobCandidate {
  /** Top candidates sorted by descending logprob (empty when not requested). */
  top: LogprobCandidate[]
}

export interface LogprobOptions {
  seed: number
  promptHash: number
  /** Alternatives to compute per position (chat `top_logprobs`, completions `logprobs`). */
  topCount: number
  /** Ids alternatives are drawn from: `[0, regularVocabSize)`. */
  regularVocabSize: number
  /** Distinguishes choices of an `n > 1` request. */
  choiceIndex?: number
}

/** float32 logprob of the token sampled at `position`. */
export function sampledLogprob(seed: number, promptHash: number, position: number, id: number): number {
  const uniform = unitFloat(seed, promptHash, position, id)
  return Math.fround(-(MIN_NEGATIVE_LOGPROB + LOGPROB_SPAN * uniform * uniform * uniform))
}

export function computeLogprobs(ids: readonly number[], options: LogprobOptions): TokenLogprob[] {
  const seed = combineHashes(options.seed, options.choiceIndex ?? 0)
  return ids.map((id, position) => {
    const logprob = sampledLogprob(seed, options.promptHash, position, id)
    return {
      id,
      logprob,
      top: options.topCount > 0 ? topCandidates(id, logprob, position, seed, options) : [],
    }
  })
}

function topCandidates(id: number, logprob: number, position: number, seed: number, options: LogprobOptions): LogprobCandidate[] {
  const remaining = 1 - Math.exp(logprob)
  const candidates: LogprobCandidate[] = [{ id, logprob }]
  const seen = new Set<number>([id])
  let share = ALTERNATIVE_SHARE
  for (let rank = 0; candidates.length <= options.topCount && rank < options.topCount * 4; rank++) {
    const draw = unitFloat(seed, options.promptHash, position, ALTERNATIVE_LABEL, rank)
    const alternative = Math.floor(draw * options.regularVocabSize)
    if (seen.has(alternative)) continue
    seen.add(alternative)
    const probability = Math.max(remaining * share, Number.MIN_VALUE)
    candidates.push({
      id: alternative,
      logprob: Math.fround(Math.max(Math.log(probability), -9999)),
    })
    share *= ALTERNATIVE_SHARE
  }
  candidates.sort((left, right) => right.logprob - left.logprob)
  return candidates.slice(0, options.topCount)
}
