/**
 * @module engine/policy/drift
 * Drift mode: wraps another policy and "samples" a non-canonical tokenization of the same text,
 * like real models do — some multi-byte vocabulary tokens are replaced by two valid tokens whose
 * bytes concatenate to the original, so `decode(token_ids)` is the text but `encode(text)` is
 * not `token_ids`. At least one split lands after `</think>` (content / tool-call markup, which
 * the chat template re-renders), so the next turn's prompt really differs from the sampled ids.
 * Choices are deterministic from the request's seeded rng.
 */

import type { Qwen3 } from '../qwen3.ts'
import type { Policy, PolicyOutput } from './policy.ts'

/** Share of eligible tokens that get split. */
export const DEFAULT_DRIFT_RATE = 0.2

export interface DriftOptions {
  rate?: number
}

type Split = readonly [number, number]

export function createDriftPolicy(inner: Policy, qwen3: Qwen3, options: DriftOptions = {}): Policy {
  const rate = options.rate ?? DEFAULT_DRIFT_RATE
  const splits = new Map<number, Split | null>()

  const splitOf = (id: number): Split | null => {
    let split = splits.get(id)
    if (split === undefined) {
      split = findSplit(qwen3, id)
      splits.set(id, split)
    }
    return split
  }

  return {
    name: `drift(${inner.name})`,
    generate(input): PolicyOutput {
      const output = inner.generate(input)
      const canonical = output.tokenIds ?? qwen3.encode(output.text)
      const rng = input.rng.fork('drift')
      const eligible = canonical.flatMap((id, index) => (splitOf(id) === null ? [] : [index]))
      const chosen = new Set(eligible.filter(() => rng.next() < rate))
      const thinkEnd = canonical.lastIndexOf(qwen3.specialTokens.thinkEnd)
      const afterThinking = eligible.filter((index) => index > thinkEnd)
      if (afterThinking.length > 0 && !afterThinking.some((index) => chosen.has(index))) {
        chosen.add(rng.pick(afterThinking))
      }
      const tokenIds: number[] = []
      canonical.forEach((id, index) => {
        const split = chosen.has(index) ? splitOf(id) : null
        if (split === null) tokenIds.push(id)
        else tokenIds.push(split[0], split[1])
      })
      return { text: output.text, tokenIds }
    },
  }
}

/** Two regular tokens whose byte strings concatenate to token `id`'s, split near the middle. */
function findSplit(qwen3: Qwen3, id: number): Split | null {
  if (qwen3.isAddedToken(id)) return null
  const token = qwen3.tokenString(id)
  if (token === undefined || token.length < 2) return null
  const middle = Math.floor(token.length / 2)
  for (let distance = 0; distance < token.length; distance++) {
    for (const cut of [middle - distance, middle + distance]) {
      if (cut <= 0 || cut >= token.length) continue
      const left = qwen3.tokenId(token.slice(0, cut))
      const right = qwen3.tokenId(token.slice(cut))
      if (left === undefined || right === undefined) continue
      if (qwen3.isAddedToken(left) || qwen3.isAddedToken(right)) continue
      return [left, right]
    }
  }
  return null
}
