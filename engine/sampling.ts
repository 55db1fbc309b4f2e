/**
 * @module engine/sampling
 * Applies vLLM's stopping rules to what a policy "sampled": the EOS `<|im_end|>` is appended,
 * then the earliest of a stop token id, a stop string (text cut at the match, ids re-encoded
 * from the kept text, no EOS, `stop_reason` = the string) or `max_tokens` (ids truncated,
 * `finish_reason: 'length'`, text = decode of the kept ids) ends the completion.
 */

import type { Qwen3 } from './qwen3.ts'

export interface StopRules {
  maxTokens: number
  stop: readonly string[]
  stopTokenIds: readonly number[]
  includeStopStrInOutput: boolean
  skipSpecialTokens: boolean
}

export interface FinishedSample {
  /** Everything "sampled", EOS included when generation ended on it. */
  ids: number[]
  /** `decode(ids)` (special tokens skipped unless `skip_special_tokens: false`). */
  text: string
  finishReason: 'stop' | 'length'
  /** Matched stop string or stop token id; `null` for EOS and length. */
  stopReason: string | number | null
}

export function finishSample(qwen3: Qwen3, sampled: readonly number[], rules: StopRules): FinishedSample {
  const decode = (ids: readonly number[]) => qwen3.decode(ids, { skipSpecialTokens: rules.skipSpecialTokens })
  let ids = [...sampled, qwen3.specialTokens.imEnd]
  let stopReason: string | number | null = null

  const stopTokenAt = rules.stopTokenIds.length === 0 ? -1 : sampled.findIndex((id) => rules.stopTokenIds.includes(id))
  const searched = stopTokenAt >= 0 ? sampled.slice(0, stopTokenAt) : sampled
  const generatedText = qwen3.decode(searched, { skipSpecialTokens: true })
  const stopMatch = findStopString(generatedText, rules.stop)
  if (stopMatch !== null) {
    const cut = stopMatch.index + (rules.includeStopStrInOutput ? stopMatch.stop.length : 0)
    const keptText = generatedText.slice(0, cut)
    const keptIds = qwen3.encode(keptText)
    if (keptIds.length <= rules.maxTokens) {
      return {
        ids: keptIds,
        text: decode(keptIds),
        finishReason: 'stop',
        stopReason: stopMatch.stop,
      }
    }
  } else if (stopTokenAt >= 0) {
    ids = sampled.slice(0, stopTokenAt + 1)
    stopReason = sampled[stopTokenAt] ?? null
  }
  if (ids.length > rules.maxTokens) {
    const kept = ids.slice(0, rules.maxTokens)
    return { ids: kept, text: decode(kept), finishReason: 'length', stopReason: null }
  }
  return { ids, text: decode(ids), finishReason: 'stop', stopReason }
}

function findStopString(text: string, stops: readonly string[]): { index: number; stop: string } | null {
  let best: { index: number; stop: string } | null = null
  for (const stop of stops) {
    const index = text.indexOf(stop)
    if (index >= 0 && (best === null || index < best.index)) best = { index, stop }
  }
  return best
}
