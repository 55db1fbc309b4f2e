/**
 * @module
 * Context-drift bookkeeping for one segment.
 *
 * The trainer conditions turn k on `C_k`, the segment's tokens before turn k's first sampled
 * token. The model saw `P_k` (turn k's real prompt). A segment keeps an alignment of `C_k` to
 * `P_k`: they are identical except inside *regions*, each a pair of ranges `C[cs, ce)` ↔
 * `P_k[qs, qe)` that differ at both ends. Between regions the two sequences match token for
 * token, shifted by a constant offset.
 *
 * Drift measure (documented in README): `context_drift_tokens(k) = Σ max(ce − cs, qe − qs)` over
 * the regions — per region the length of the non-shared middle after longest-common-prefix and
 * -suffix trimming (split further at common anchor runs, `diffRegions`), an upper bound of the
 * token edit distance. It is 0 exactly when `C_k === P_k`.
 *
 * When turn k+1 arrives, `P_k → P_{k+1}` is known as a list of edits plus the boundary (where the
 * previous raw response `R_k` is replayed). Regions touching an edit or the boundary are merged
 * into one and re-trimmed against the real tokens; untouched regions after the first edit are
 * shifted. Work is proportional to the edited tokens plus the regions after the first edit (at
 * most one per boundary in practice), so a segment stays linear in its new tokens.
 */
import type { DriftReason } from '../contract/trajectory.ts'
import type { BoundaryTail, PromptEdit } from './align-boundary.ts'
import { diffRegions, type Tokens } from './token-ops.ts'

export interface DriftRegion {
  /** Range in the segment stream (`prompt_ids ++ response_ids`). */
  cs: number
  ce: number
  /** Range in the current tip prompt. */
  qs: number
  qe: number
  drift: number
  reason: DriftReason
}

export interface DriftState {
  regions: readonly DriftRegion[]
  total: number
  byReason: Readonly<Record<string, number>>
}

export const EMPTY_DRIFT: DriftState = { regions: [], total: 0, byReason: {} }

export interface BoundaryDriftInput {
  /** Previous tip prompt `P` and the new prompt `Q`. */
  P: Tokens
  Q: Tokens
  /** Stream position of the previous raw response `R` and its length. */
  rStart: number
  rLength: number
  edits: readonly PromptEdit[]
  tail: BoundaryTail
  /** Tokens of the segment stream in `[start, end)`. */
  streamSlice: (start: number, end: number) => number[]
  classify: (stream: Tokens, prompt: Tokens, at: 'boundary' | 'edit', qStart: number) => DriftReason
}

export interface BoundaryDriftResult {
  state: DriftState
  /** Drift of the regions created or rewritten at this boundary. */
  boundaryDrift: number
  /** Reason of the largest region created or rewritten at this boundary. */
  boundaryReason: DriftReason | null
}

/** C − P offset of the gap after the last of `regions` (or `fallback` when there is none). */
function offsetAfter(regions: readonly DriftRegion[], fallback: number): number {
  const last = regions[regions.length - 1]
  return last === undefined ? fallback : last.ce - last.qe
}

interface Interval {
  start: number
  end: number
  edit: PromptEdit | null
  region: DriftRegion | null
  tail: boolean
}

function addReason(byReason: Record<string, number>, reason: string, amount: number) {
  const next = (byReason[reason] ?? 0) + amount
  if (next === 0) delete byReason[reason]
  else byReason[reason] = next
}

/** Recompute the alignment of the context for the next turn against its prompt `Q`. */
export function applyBoundary(state: DriftState, input: BoundaryDriftInput): BoundaryDriftResult {
  const { P, Q, edits, tail } = input
  const firstChange = edits[0]?.ps ?? tail.p
  const regions = state.regions
  // Regions ending before the first change keep their coordinates and content.
  let keep = regions.length
  while (keep > 0 && (regions[keep - 1] as DriftRegion).qe >= firstChange) keep--

  if (keep === regions.length && edits.length === 0 && tail.exact) {
    return { state, boundaryDrift: 0, boundaryReason: null }
  }

  const intervals: Interval[] = []
  let editIndex = 0
  let regionIndex = keep
  while (editIndex < edits.length || regionIndex < regions.length) {
    const edit = edits[editIndex]
    const region = regions[regionIndex]
    if (edit !== undefined && (region === undefined || edit.ps <= region.qs)) {
      intervals.push({ start: edit.ps, end: edit.pe, edit, region: null, tail: false })
      editIndex++
    } else if (region !== undefined) {
      intervals.push({ start: region.qs, end: region.qe, edit: null, region, tail: false })
      regionIndex++
    }
  }
  intervals.push({ start: tail.p, end: P.length, edit: null, region: null, tail: true })
  // Regions may lie inside the rewritten tail; clusters are built in start order.
  intervals.sort((a, b) => a.start - b.start)

  const next: DriftRegion[] = regions.slice(0, keep)
  const byReason: Record<string, number> = { ...state.byReason }
  let total = state.total
  let boundaryDrift = 0
  let boundaryReason: DriftReason | null = null
  let boundaryReasonDrift = -1
  // Offset C − P of the gap before the current cluster, and shift Q − P of edits before it.
  let gapOffset = offsetAfter(regions.slice(keep - 1, keep), 0)
  let shift = 0

  let index = 0
  while (index < intervals.length) {
    const first = intervals[index] as Interval
    let end = first.end
    let clusterEdits = 0
    let editDelta = 0
    let hasTail = false
    const merged: DriftRegion[] = []
    let cursor = index
    // Touching intervals form one cluster (an insertion next to a substitution is one change).
    while (cursor < intervals.length) {
      const item = intervals[cursor] as Interval
      if (cursor > index && item.start > end) break
      end = Math.max(end, item.end)
      if (item.edit !== null) {
        clusterEdits++
        editDelta += item.edit.qe - item.edit.qs - (item.edit.pe - item.edit.ps)
      }
      if (item.region !== null) merged.push(item.region)
      if (item.tail) hasTail = true
      cursor++
    }
    const start = first.start
    for (const region of merged) {
      total -= region.drift
      addReason(byReason, region.reason, -region.drift)
    }

    if (clusterEdits === 0 && !hasTail) {
      // Untouched region after an edit: same content, shifted in the new prompt.
      for (const region of merged) {
        const moved = { ...region, qs: region.qs + shift, qe: region.qe + shift }
        next.push(moved)
        total += moved.drift
        addReason(byReason, moved.reason, moved.drift)
      }
    } else {
      const cStart = start + gapOffset
      const qStart = start + shift
      const cEnd = hasTail ? input.rStart + input.rLength : end + offsetAfter(merged, gapOffset)
      const qEnd = hasTail ? tail.newEnd : end + shift + editDelta
      const streamTokens = input.streamSlice(cStart, cEnd)
      const promptTokens = Q.slice(qStart, qEnd)
      for (const part of diffRegions(streamTokens, promptTokens)) {
        const streamMiddle = streamTokens.slice(part.aStart, part.aEnd)
        const promptMiddle = promptTokens.slice(part.bStart, part.bEnd)
        const drift = Math.max(streamMiddle.length, promptMiddle.length)
        const reason = input.classify(streamMiddle, promptMiddle, hasTail ? 'boundary' : 'edit', qStart + part.bStart)
        next.push({
          cs: cStart + part.aStart,
          ce: cStart + part.aEnd,
          qs: qStart + part.bStart,
          qe: qStart + part.bEnd,
          drift,
          reason,
        })
        total += drift
        addReason(byReason, reason, drift)
        boundaryDrift += drift
        if (drift > boundaryReasonDrift) {
          boundaryReason = reason
          boundaryReasonDrift = drift
        }
      }
    }

    // Past this cluster the old alignment's C − P offset is the one after its last old region,
    // and every edit in it has shifted the new prompt by its length change.
    gapOffset = offsetAfter(merged, gapOffset)
    shift += editDelta
    index = cursor
  }

  return { state: { regions: next, total, byReason }, boundaryDrift, boundaryReason }
}
