/**
 * @module
 * Reading a completion back through its delta chain without copying the whole context per hop.
 *
 * Every completion is stored against its parent (the recent completion whose prompt shares the longest
 * prefix): prompt = parent prompt[0:shared] + suffix tokens; each of the two bodies = the parent's text
 * with a different middle. Chains are never cut, so storage stays linear at any session length; a read
 * walks the chain *backwards*, carrying only what is still missing:
 *
 * - tokens: the still-needed prefix length shrinks to `shared` at each hop, and each hop copies only its
 *   own suffix tokens into the output (every stored token is copied at most once);
 * - texts: a piece list of literal middles and ranges of the ancestor's text; each hop maps the ranges
 *   through its delta (prefix → parent range, middle → literal, suffix → parent range).
 *
 * So a read touches its own size plus one small row per hop; rows are fetched in batches by one
 * recursive query per batch (see `CompletionLog`).
 */
import type { TextDelta } from './text-delta.ts'

/** Which body a text range refers to: the harness's original body or the body sent upstream. */
export const ORIGINAL = 0
export const REQUEST = 1
type TextKind = typeof ORIGINAL | typeof REQUEST

/** One stored level of the chain, as the walk needs it. */
export interface ChainLevel {
  shared: number
  /** Prompt length of this level (0 when it has no prompt). */
  promptLength: number
  suffix: Uint32Array
  original: TextDelta
  request: TextDelta
  /** The request body is a delta of the parent's request body (else of this level's own original). */
  requestFromParent: boolean
  originalLength: number
  requestLength: number
}

/** The ancestor the walk stopped at, fully materialized. */
export interface ChainBase {
  prompt: Uint32Array
  originalText: string
  requestText: string
}

type Piece = string | { kind: TextKind; start: number; end: number }

/** Map a range of a delta-coded text onto its base text (pieces pushed to `out`). */
function mapRange(
  start: number,
  end: number,
  delta: TextDelta,
  baseLength: number,
  kind: TextKind,
  out: Piece[],
  literal: (text: string) => void,
): void {
  const middleEnd = delta.prefix + delta.middle.length
  if (start < delta.prefix) pushRange(out, kind, start, Math.min(end, delta.prefix))
  if (end > delta.prefix && start < middleEnd) {
    literal(delta.middle.slice(Math.max(start, delta.prefix) - delta.prefix, Math.min(end, middleEnd) - delta.prefix))
  }
  if (end > middleEnd) {
    const shift = baseLength - delta.suffix - middleEnd
    pushRange(out, kind, Math.max(start, middleEnd) + shift, end + shift)
  }
}

function pushRange(out: Piece[], kind: TextKind, start: number, end: number): void {
  if (end <= start) return
  const last = out[out.length - 1]
  if (last !== undefined && typeof last !== 'string' && last.kind === kind && last.end === start) last.end = end
  else out.push({ kind, start, end })
}

function pushLiteral(out: Piece[], text: string): void {
  if (!text) return
  const last = out.length - 1
  if (last >= 0 && typeof out[last] === 'string') out[last] = (out[last] as string) + text
  else out.push(text)
}

/**
 * Materialize `levels[0]` from its chain: `levels[i + 1]` is the parent of `levels[i]`, and `base` is the
 * parent of the last level (null when the last level is a root).
 */
export function resolveChain(levels: readonly ChainLevel[], base: ChainBase | null): ChainBase {
  const target = levels[0]
  if (target === undefined) throw new Error('resolveChain needs at least one level')
  // Tokens: walk back, each hop filling [shared, need).
  const prompt = new Uint32Array(target.promptLength)
  let need = target.promptLength
  for (const level of levels) {
    if (need > level.shared) prompt.set(level.suffix.subarray(0, need - level.shared), level.shared)
    need = Math.min(need, level.shared)
    if (need === 0) break
  }
  if (need > 0) {
    if (!base || base.prompt.length < need) throw new Error('delta chain is broken: the base prompt is too short')
    prompt.set(base.prompt.subarray(0, need), 0)
  }

  // Texts: a piece list per body, resolved level by level.
  const resolveText = (kind: TextKind): string => {
    let pieces: Piece[] = [{ kind, start: 0, end: kind === ORIGINAL ? target.originalLength : target.requestLength }]
    for (let i = 0; i < levels.length; i++) {
      const level = levels[i] as ChainLevel
      const parent = levels[i + 1]
      const parentOriginalLength = parent ? parent.originalLength : (base?.originalText.length ?? 0)
      const parentRequestLength = parent ? parent.requestLength : (base?.requestText.length ?? 0)
      const hasParent = parent !== undefined || base !== null
      // Request ranges coded against this level's own original become original ranges of this level first.
      const sameLevel: Piece[] = []
      for (const piece of pieces) {
        if (typeof piece === 'string' || piece.kind === ORIGINAL || (level.requestFromParent && hasParent)) {
          if (typeof piece === 'string') pushLiteral(sameLevel, piece)
          else pushRange(sameLevel, piece.kind, piece.start, piece.end)
          continue
        }
        mapRange(piece.start, piece.end, level.request, level.originalLength, ORIGINAL, sameLevel, (text) => pushLiteral(sameLevel, text))
      }
      const next: Piece[] = []
      for (const piece of sameLevel) {
        if (typeof piece === 'string') {
          pushLiteral(next, piece)
          continue
        }
        const delta = piece.kind === ORIGINAL ? level.original : level.request
        const parentLength = piece.kind === ORIGINAL ? parentOriginalLength : parentRequestLength
        mapRange(piece.start, piece.end, delta, parentLength, piece.kind, next, (text) => pushLiteral(next, text))
      }
      pieces = next
      if (pieces.every((piece) => typeof piece === 'string')) break
    }
    let out = ''
    for (const piece of pieces) {
      if (typeof piece === 'string') out += piece
      else {
        if (!base) throw new Error('delta chain is broken: a text range reaches past the root')
        out += (piece.kind === ORIGINAL ? base.originalText : base.requestText).slice(piece.start, piece.end)
      }
    }
    return out
  }
  return { prompt, originalText: resolveText(ORIGINAL), requestText: resolveText(REQUEST) }
}
