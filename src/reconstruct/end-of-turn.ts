/**
 * @module
 * End-of-turn (EOT) token detection. The EOT closes an assistant turn in the chat template
 * (`<|im_end|>` on Qwen/ChatML); the first EOT after the re-rendered previous turn separates it
 * from the interstitial (tool results, template glue, next generation prompt).
 */
import type { CompletionRecord } from '../contract/completion-record.ts'

/** Finish reasons where the model emitted its natural end-of-turn token itself. */
export const NATURAL_STOP_REASONS: ReadonlySet<string> = new Set(['stop', 'tool_calls', 'stop_sequence'])

function naturalLastToken(record: CompletionRecord): number | null {
  const ids = record.response_token_ids
  if (ids.length === 0) return null
  if (record.finish_reason === null || !NATURAL_STOP_REASONS.has(record.finish_reason)) return null
  return ids[ids.length - 1] ?? null
}

/**
 * Polar's rule, per chain: the last response token of the first completion with a natural stop
 * and a non-empty response (`PrefixMergingBuilder._resolve_eot_id`).
 */
export function detectEotPolar(chain: readonly CompletionRecord[]): number | null {
  for (const record of chain) {
    const token = naturalLastToken(record)
    if (token !== null) return token
  }
  return null
}

/**
 * Tolerant rule, per session: the most frequent last token among natural stops, ignoring
 * completions stopped by a matched stop *string* (vLLM `stop_reason` is then a string and the last
 * token is ordinary text). Ties go to the earliest. A single odd completion (e.g. a stop string
 * the engine did not report) cannot hijack the id.
 */
export function detectEotSession(records: readonly CompletionRecord[]): number | null {
  const counts = new Map<number, number>()
  let best: number | null = null
  let bestCount = 0
  for (const record of records) {
    if (typeof record.stop_reason === 'string') continue
    const token = naturalLastToken(record)
    if (token === null) continue
    const count = (counts.get(token) ?? 0) + 1
    counts.set(token, count)
    if (count > bestCount) {
      best = token
      bestCount = count
    }
  }
  return best
}
