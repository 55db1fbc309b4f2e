/**
 * @module
 * Token-array primitives. Each costs time proportional to the tokens it touches (never a whole
 * prompt unless asked to compare one), which is what keeps prefix merging linear.
 */

export type Tokens = readonly number[]

/** First index `i >= start` with `a[i] !== b[i]` (or the shorter length). */
export function commonPrefixFrom(a: Tokens, b: Tokens, start: number): number {
  const end = Math.min(a.length, b.length)
  let i = Math.min(start, end)
  while (i < end && a[i] === b[i]) i++
  return i
}

/** Length of the common run of `a[aStart…]` and `b[bStart…]`, compared up to `max` tokens. */
export function commonRunAt(a: Tokens, aStart: number, b: Tokens, bStart: number, max = Number.POSITIVE_INFINITY): number {
  const limit = Math.min(a.length - aStart, b.length - bStart, max)
  let n = 0
  while (n < limit && a[aStart + n] === b[bStart + n]) n++
  return n
}

/** Whether `haystack[offset…]` starts with `needle`. */
export function matchesAt(haystack: Tokens, offset: number, needle: Tokens): boolean {
  if (offset + needle.length > haystack.length) return false
  for (let i = 0; i < needle.length; i++) {
    if (haystack[offset + i] !== needle[i]) return false
  }
  return true
}

/** First index of `value` in `tokens[from, limit)`, or -1. */
export function indexOfFrom(tokens: Tokens, value: number, from: number, limit: number): number {
  const end = Math.min(limit, tokens.length)
  for (let i = from; i < end; i++) if (tokens[i] === value) return i
  return -1
}

/** Longest common prefix `x` and suffix `y` of `a` and `b`, with `x + y <= min(|a|, |b|)`. */
export function trimCommon(a: Tokens, b: Tokens): { prefix: number; suffix: number } {
  const prefix = commonPrefixFrom(a, b, 0)
  const room = Math.min(a.length, b.length) - prefix
  let suffix = 0
  while (suffix < room && a[a.length - 1 - suffix] === b[b.length - 1 - suffix]) suffix++
  return { prefix, suffix }
}

export function equalTokens(a: Tokens, b: Tokens): boolean {
  return a.length === b.length && matchesAt(a, 0, b)
}

export function containsAny(tokens: Tokens, values: readonly number[]): boolean {
  for (const token of tokens) if (values.includes(token)) return true
  return false
}

/**
 * Re-synchronize two sequences after a mismatch at `a[aStart]` / `b[bStart]`: the smallest
 * skip pair `(skipA, skipB)` (by `skipA + skipB`, each at most `window`) after which `anchor`
 * tokens match. Bounded work: O(window² · anchor) in the worst case, independent of lengths.
 */
export function resynchronize(
  a: Tokens,
  aStart: number,
  b: Tokens,
  bStart: number,
  window: number,
  anchor: number,
): { skipA: number; skipB: number } | null {
  if (a.length - aStart < anchor || b.length - bStart < anchor) return null
  for (let distance = 1; distance <= 2 * window; distance++) {
    const fromA = Math.max(0, distance - window)
    const toA = Math.min(distance, window)
    for (let skipA = fromA; skipA <= toA; skipA++) {
      const skipB = distance - skipA
      const ia = aStart + skipA
      const ib = bStart + skipB
      if (ia + anchor > a.length || ib + anchor > b.length) continue
      if (commonRunAt(a, ia, b, ib, anchor) >= anchor) return { skipA, skipB }
    }
  }
  return null
}

/** A differing stretch: `a[aStart, aEnd)` vs `b[bStart, bEnd)` (one side may be empty). */
export interface DiffRegion {
  aStart: number
  aEnd: number
  bStart: number
  bEnd: number
}

/** Tokens that must match to split a difference into two (anchor of `diffRegions`). */
export const DIFF_ANCHOR_TOKENS = 4
const DIFF_MAX_DEPTH = 16

function anchorKey(tokens: Tokens, at: number): string {
  let key = ''
  for (let i = 0; i < DIFF_ANCHOR_TOKENS; i++) key += `${tokens[at + i]},`
  return key
}

/**
 * The differing stretches of `a` and `b`: trim the common prefix and suffix, then split what is
 * left around the first run of `DIFF_ANCHOR_TOKENS` tokens common to both (first occurrence in
 * `b`), recursively (bounded depth). Linear per level. Returns nothing exactly when `a` equals `b`.
 * Two separate rewrites (e.g. a dropped think scaffold and a re-tokenized word further on) come
 * out as two small regions instead of one span covering everything between them.
 */
export function diffRegions(a: Tokens, b: Tokens): DiffRegion[] {
  const out: DiffRegion[] = []
  const visit = (aStart: number, aEnd: number, bStart: number, bEnd: number, depth: number) => {
    while (aStart < aEnd && bStart < bEnd && a[aStart] === b[bStart]) {
      aStart++
      bStart++
    }
    while (aEnd > aStart && bEnd > bStart && a[aEnd - 1] === b[bEnd - 1]) {
      aEnd--
      bEnd--
    }
    if (aStart === aEnd && bStart === bEnd) return
    if (depth < DIFF_MAX_DEPTH && aEnd - aStart >= DIFF_ANCHOR_TOKENS && bEnd - bStart >= DIFF_ANCHOR_TOKENS) {
      const firstInB = new Map<string, number>()
      for (let j = bStart; j + DIFF_ANCHOR_TOKENS <= bEnd; j++) {
        const key = anchorKey(b, j)
        if (!firstInB.has(key)) firstInB.set(key, j)
      }
      for (let i = aStart; i + DIFF_ANCHOR_TOKENS <= aEnd; i++) {
        const j = firstInB.get(anchorKey(a, i))
        if (j === undefined) continue
        let run = DIFF_ANCHOR_TOKENS
        while (i + run < aEnd && j + run < bEnd && a[i + run] === b[j + run]) run++
        visit(aStart, i, bStart, j, depth + 1)
        visit(i + run, aEnd, j + run, bEnd, depth + 1)
        return
      }
    }
    out.push({ aStart, aEnd, bStart, bEnd })
  }
  visit(0, a.length, 0, b.length, 0)
  return out
}
