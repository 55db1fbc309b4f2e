/**
 * @module
 * Aligns a new prompt `Q` against a chain tip (its prompt `P` and sampled response `R`) and
 * decides whether `Q` can continue the chain.
 *
 * Exact case (what Polar accepts): `P` is a prefix of `Q` and `Q` continues with `R` itself; the
 * interstitial is the rest of `Q`. Tolerant cases:
 * - a rewrite of `P`'s last tokens (≤ `boundaryWindow`), e.g. Qwen3's empty-think generation
 *   scaffold `<think>\n\n</think>\n\n` that the template drops when it replays the turn;
 * - `Q` re-renders `R` differently (reasoning stripped, BPE re-tokenization of the sampled text):
 *   the re-rendered turn ends at the first end-of-turn token;
 * - bounded edits earlier in the prompt (a system-prompt nonce): after a mismatch the two prompts
 *   re-synchronize within `resyncWindow` tokens on an `anchor`-token match.
 * The caller measures the resulting context drift (`drift-regions.ts`) and applies the bound.
 *
 * Cost: O(1) for the prefix check when a lower bound on the common prefix covers `P` (from
 * `prompt_delta`), plus O(|R| + tail + interstitial) — the new tokens. Edits cost the tokens
 * compared after them.
 */
import type { BreakReason } from '../contract/trajectory.ts'
import { commonPrefixFrom, commonRunAt, indexOfFrom, matchesAt, resynchronize, type Tokens } from './token-ops.ts'

/** Minimum extra tokens a replayed turn may have over the raw one when searching its end. */
const MIN_REPLAY_SLACK_TOKENS = 16

/** `P[ps, pe)` was replaced by `Q[qs, qe)`; text around it matches. */
export interface PromptEdit {
  ps: number
  pe: number
  qs: number
  qe: number
}

/** How the end of `P`, then `R`, maps onto `Q`. */
export interface BoundaryTail {
  /** Start of `P`'s unmatched tail (`P.length` when fully matched). */
  p: number
  /** Position in `Q` matching `P[p]`. */
  q: number
  /** End in `Q` of the replayed previous turn: `P[p:] + R` corresponds to `Q[q, newEnd)`. */
  newEnd: number
  /** Start of the interstitial in `Q` (mask-0 context appended before the next response). */
  interStart: number
  /** `P[p:]` is empty and `Q` replays `R` token for token: no drift at this boundary. */
  exact: boolean
}

export type Alignment =
  /** The same prompt again, possibly modulo bounded edits (a fresh nonce on a client retry). */
  | { kind: 'retry'; lcp: number; edits: PromptEdit[] }
  | {
      kind: 'continue'
      lcp: number
      edits: PromptEdit[]
      tail: BoundaryTail
      strictRuleMerge: boolean
    }
  | { kind: 'break'; lcp: number; reason: BreakReason; related: boolean }

export interface AlignOptions {
  eot: number | null
  /**
   * Index of the first end-of-turn token in `P` (end of its first turn, normally the system
   * message), or -1 when `P` has none. Kept per segment so it is never rescanned.
   */
  previousFirstEot: number
  /** Where the tip turn's interstitial starts in `P` (`P.length` minus its length). */
  previousInterStart: number
  boundaryWindow: number
  resyncWindow: number
  anchor: number
  maxEdits: number
  /** Extra tokens a replayed turn may have beyond `|R|` + the rewritten tail. */
  maxDrift: number
}

/**
 * Whether the prompts agree (up to the edits found) through the end of `P`'s first turn (its
 * system message): then `Q` belongs to the same conversation. A prompt without turns must agree
 * on at least half of its tokens.
 */
function sameConversation(P: Tokens, matchedUpTo: number, firstEot: number): boolean {
  return firstEot >= 0 ? matchedUpTo > firstEot : matchedUpTo * 2 >= P.length
}

function breakAt(P: Tokens, R: Tokens, Q: Tokens, lcp: number, failedAt: number, firstEot: number) {
  const related = sameConversation(P, failedAt, firstEot)
  // History rewritten into a shorter context than the one it replaces: summarized / compacted.
  const reason: BreakReason = related && Q.length < P.length + R.length ? 'compaction' : 'prefix_mismatch'
  return { kind: 'break', lcp, reason, related } as const
}

/** Align `Q` to the tip; `lowerBound` tokens of `P` and `Q` are known to be equal. */
export function alignToTip(P: Tokens, R: Tokens, Q: Tokens, lowerBound: number, options: AlignOptions): Alignment {
  const pLength = P.length
  const bound = Math.max(0, Math.min(lowerBound, pLength, Q.length))
  // An identical prompt keeps the tip's interstitial: verify it instead of trusting the hint.
  const lcp = commonPrefixFrom(P, Q, Q.length === pLength && bound === pLength ? 0 : bound)
  if (lcp === pLength && Q.length === pLength) return { kind: 'retry', lcp, edits: [] }

  const edits: PromptEdit[] = []
  const firstEot = options.previousFirstEot
  let p = lcp
  let q = lcp
  while (p < pLength) {
    // A mismatch near the end of P, inside its last turn header (no end-of-turn after it) and past
    // its first turn, is the generation-prompt rewrite handled at the boundary; anywhere else it
    // must be a bounded edit after which the prompts re-synchronize.
    if (
      pLength - p <= options.boundaryWindow &&
      sameConversation(P, p, firstEot) &&
      (options.eot === null || indexOfFrom(P, options.eot, p, pLength) < 0)
    ) {
      break
    }
    if (edits.length >= options.maxEdits) return breakAt(P, R, Q, lcp, p, firstEot)
    const sync = resynchronize(P, p, Q, q, options.resyncWindow, options.anchor)
    if (sync === null) return breakAt(P, R, Q, lcp, p, firstEot)
    edits.push({ ps: p, pe: p + sync.skipA, qs: q, qe: q + sync.skipB })
    p += sync.skipA
    q += sync.skipB
    const run = commonRunAt(P, p, Q, q)
    p += run
    q += run
  }

  const tailLength = pLength - p
  // Same prompt up to edits before the tip's interstitial (which the re-send then shares).
  const lastEdit = edits[edits.length - 1]
  if (tailLength === 0 && q === Q.length && (lastEdit?.pe ?? 0) <= options.previousInterStart) {
    return { kind: 'retry', lcp, edits }
  }
  // A rewritten tail or earlier edits are only tolerated inside the same conversation.
  if ((tailLength > 0 || edits.length > 0) && !sameConversation(P, p, firstEot)) {
    return breakAt(P, R, Q, lcp, p, firstEot)
  }
  if (tailLength === 0 && matchesAt(Q, q, R)) {
    const interStart = q + R.length
    const eot = options.eot
    const strictRuleMerge = edits.length === 0 && eot !== null && (R[R.length - 1] === eot || indexOfFrom(Q, eot, q, Q.length) >= 0)
    return {
      kind: 'continue',
      lcp,
      edits,
      tail: { p, q, newEnd: interStart, interStart, exact: true },
      strictRuleMerge,
    }
  }

  const eot = options.eot
  if (eot === null) return { kind: 'break', lcp, reason: 'eot_unavailable', related: true }
  // The replayed turn may be longer than the raw one by the drift it causes; past a generous bound
  // the EOT found would belong to a later turn.
  const slack = Math.max(options.maxDrift, options.boundaryWindow, MIN_REPLAY_SLACK_TOKENS)
  const searchLimit = q + tailLength + R.length + slack + 1
  const closing = indexOfFrom(Q, eot, q, searchLimit)
  if (closing < 0) return { kind: 'break', lcp, reason: 'interstitial_split_failed', related: true }
  // A raw turn that ends with the EOT is replaced up to and including the canonical EOT; a
  // truncated one keeps the canonical EOT as context so the turn is still closed (Polar's rule).
  const newEnd = R.length > 0 && R[R.length - 1] === eot ? closing + 1 : closing
  return {
    kind: 'continue',
    lcp,
    edits,
    tail: { p, q, newEnd, interStart: newEnd, exact: false },
    // Polar only checks that P is a prefix of Q and that the tail holds an EOT: it merges
    // re-tokenized or reasoning-stripped replays too, without noticing the drift.
    strictRuleMerge: edits.length === 0 && tailLength === 0,
  }
}
