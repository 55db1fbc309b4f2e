/**
 * @module
 * Independent checks of a reconstructed trajectory against its input records. They use only the
 * records and the trace token arrays (plus `metadata.turns` to know which record a run claims to
 * be, which is then verified token for token):
 * - every mask-1 token is exactly a sampled token of the claimed record, at the right position,
 *   with its recorded logprob; mask-1 positions are exactly the union of the turns;
 * - every mask-0 token in a trace comes from a real prompt (the first record's prompt, or the
 *   suffix of the next record's prompt);
 * - each trainable completion appears exactly once (as one contiguous mask-1 run); every record
 *   is either in a trace or in `excluded_completions`;
 * - reported context drift is 0 exactly when the training context equals the real prompt, is at
 *   least their length difference, and respects the configured bound.
 */
import { expect } from 'vitest'
import type { CompletionRecord } from '../../../src/contract/completion-record.ts'
import { traceSchema, type Trajectory } from '../../../src/contract/trajectory.ts'

interface Turn {
  completion_id: string
  response_offset: number
  response_length: number
  interstitial_length: number
  context_drift_tokens?: number
}

function sameTokens(a: readonly number[], b: readonly number[]): boolean {
  if (a.length !== b.length) return false
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false
  return true
}

function aligned(record: CompletionRecord): readonly number[] | null {
  const lp = record.response_logprobs
  return lp !== null && lp.length === record.response_token_ids.length ? lp : null
}

export interface InvariantOptions {
  /** Tolerant builder: nothing may be dropped; drift must respect this bound. */
  maxContextDrift?: number
  /** Strict builder: completions after a break may be listed as `dropped_after_break`. */
  strict?: boolean
  /** Skip the drift-exactness check (inputs with deliberately wrong `prompt_delta`). */
  untrustedDeltas?: boolean
}

export function checkInvariants(records: readonly CompletionRecord[], trajectory: Trajectory, options: InvariantOptions = {}): void {
  const byId = new Map(records.map((r) => [r.completion_id, r]))
  const seen = new Map<string, number>()
  for (const trace of trajectory.traces) {
    expect(() => traceSchema.parse(trace)).not.toThrow()
    const turns = trace.metadata.turns as Turn[]
    expect(Array.isArray(turns) && turns.length > 0).toBe(true)
    const first = byId.get(turns[0]?.completion_id ?? '')
    expect(first).toBeDefined()
    expect(sameTokens(trace.prompt_ids, (first as CompletionRecord).prompt_token_ids)).toBe(true)

    const covered = new Array<boolean>(trace.response_ids.length).fill(false)
    let cursor = 0
    let allLogprobs = true
    turns.forEach((turn, index) => {
      const record = byId.get(turn.completion_id)
      expect(record, `unknown completion ${turn.completion_id}`).toBeDefined()
      const r = record as CompletionRecord
      seen.set(r.completion_id, (seen.get(r.completion_id) ?? 0) + 1)
      expect(r.status).toBe('ok')
      expect(r.trainable).toBe(true)
      // Context before this turn: the interstitial is the suffix of the record's real prompt.
      expect(turn.response_offset).toBe(cursor + turn.interstitial_length)
      if (index === 0) expect(turn.interstitial_length).toBe(0)
      const inter = trace.response_ids.slice(cursor, turn.response_offset)
      const prompt = r.prompt_token_ids
      expect(sameTokens(inter, prompt.slice(prompt.length - inter.length))).toBe(true)
      for (let i = cursor; i < turn.response_offset; i++) expect(trace.loss_mask[i]).toBe(0)
      // The sampled tokens, all mask 1, in place.
      const end = turn.response_offset + turn.response_length
      expect(turn.response_length).toBe(r.response_token_ids.length)
      expect(sameTokens(trace.response_ids.slice(turn.response_offset, end), r.response_token_ids)).toBe(true)
      for (let i = turn.response_offset; i < end; i++) {
        expect(trace.loss_mask[i]).toBe(1)
        covered[i] = true
      }
      const lp = aligned(r)
      if (lp === null && r.response_token_ids.length > 0) allLogprobs = false
      if (trace.response_logprobs !== null) {
        expect(lp).not.toBeNull()
        expect(trace.response_logprobs.slice(turn.response_offset, end)).toEqual([...(lp ?? [])])
      }
      // Drift: compare the trainer's context for this turn with the prompt the model saw.
      if (turn.context_drift_tokens !== undefined && !options.untrustedDeltas) {
        const context = [...trace.prompt_ids, ...trace.response_ids.slice(0, turn.response_offset)]
        const equal = sameTokens(context, prompt)
        expect(turn.context_drift_tokens === 0, `drift ${turn.context_drift_tokens} equal=${equal}`).toBe(equal)
        expect(turn.context_drift_tokens).toBeGreaterThanOrEqual(Math.abs(context.length - prompt.length))
        if (options.maxContextDrift !== undefined) {
          expect(turn.context_drift_tokens).toBeLessThanOrEqual(options.maxContextDrift)
        }
      }
      cursor = end
    })
    expect(cursor).toBe(trace.response_ids.length)
    // No mask-1 token outside a turn.
    trace.loss_mask.forEach((value, i) => {
      if (value === 1) expect(covered[i]).toBe(true)
    })
    const anyTrainable = trace.loss_mask.some((value) => value === 1)
    if (trace.response_logprobs !== null) {
      trace.response_logprobs.forEach((value, i) => {
        if (trace.loss_mask[i] === 0) expect(value).toBe(0)
      })
    } else if (anyTrainable) {
      expect(allLogprobs).toBe(false)
    }
    if (anyTrainable && allLogprobs) expect(trace.response_logprobs).not.toBeNull()
  }

  const excluded = (trajectory.metadata.excluded_completions ?? []) as {
    completion_id: string
    reason: string
  }[]
  const excludedIds = new Map(excluded.map((entry) => [entry.completion_id, entry.reason]))
  for (const record of records) {
    const count = seen.get(record.completion_id) ?? 0
    const reason = excludedIds.get(record.completion_id)
    const trainable = record.status === 'ok' && record.trainable
    if (trainable && !options.strict) {
      expect(count, `trainable ${record.completion_id} placed ${count} times`).toBe(1)
      expect(reason).toBeUndefined()
    } else if (trainable) {
      expect(count + (reason === 'dropped_after_break' ? 1 : 0)).toBe(1)
    } else {
      expect(count).toBe(0)
      expect(reason).toBeDefined()
    }
  }
  expect(excluded.length + [...seen.values()].reduce((a, b) => a + b, 0)).toBe(records.length)
}
