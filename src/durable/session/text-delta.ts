/**
 * @module
 * Parse-free linear delta for JSON bodies: consecutive requests of one conversation share a long
 * prefix (earlier history) and suffix (tools, params), so a body is stored as the middle that differs.
 */

export interface TextDelta {
  prefix: number
  suffix: number
  middle: string
}

/** First compared block; blocks double while they match (few slices for a long common part). */
const CHUNK = 4096
/** Below this a mismatching block is scanned char by char. */
const SCAN = 64

export function isLowSurrogate(code: number): boolean {
  return code >= 0xdc00 && code <= 0xdfff
}

/**
 * Common prefix length of two strings. Blocks are compared as slices (string equality is a memcmp in V8),
 * doubling while they match; a mismatching block is halved down to a short scan.
 */
export function commonPrefix(a: string, b: string): number {
  const limit = Math.min(a.length, b.length)
  let i = 0
  let block = CHUNK
  let narrowing = false
  while (limit - i > SCAN) {
    const n = Math.min(block, limit - i)
    if (a.slice(i, i + n) === b.slice(i, i + n)) {
      i += n
      if (!narrowing) block *= 2
    } else if (n <= SCAN) break
    else {
      narrowing = true
      block = n >>> 1
    }
  }
  while (i < limit && a.charCodeAt(i) === b.charCodeAt(i)) i++
  return i
}

/** Common suffix length of two strings, at most `max` (same block strategy as `commonPrefix`). */
export function commonSuffix(a: string, b: string, max: number): number {
  let n = 0
  let block = CHUNK
  let narrowing = false
  while (max - n > SCAN) {
    const size = Math.min(block, max - n)
    if (a.slice(a.length - n - size, a.length - n) === b.slice(b.length - n - size, b.length - n)) {
      n += size
      if (!narrowing) block *= 2
    } else if (size <= SCAN) break
    else {
      narrowing = true
      block = size >>> 1
    }
  }
  while (n < max && a.charCodeAt(a.length - 1 - n) === b.charCodeAt(b.length - 1 - n)) n++
  return n
}

/** Delta of `text` against `base`; never splits a surrogate pair (the middle must be valid UTF-16). */
export function diffText(base: string, text: string): TextDelta {
  let prefix = commonPrefix(base, text)
  if (prefix > 0 && prefix < text.length && isLowSurrogate(text.charCodeAt(prefix))) prefix--
  let suffix = commonSuffix(base, text, Math.min(base.length, text.length) - prefix)
  if (suffix > 0 && suffix < text.length - prefix && isLowSurrogate(text.charCodeAt(text.length - suffix))) suffix--
  return { prefix, suffix, middle: text.slice(prefix, text.length - suffix) }
}

/**
 * `text` in a string of its own. V8 keeps a slice (13 characters or more) as a view of the string it was cut
 * from, so a short slice kept in a cache keeps a whole body alive (`base-heap.test.ts` found two).
 */
export function detached(text: string): string {
  // The concatenation is copied flat on the first slice; the slice then views that copy, not the source.
  return `${text} `.slice(0, -1)
}

export function applyTextDelta(base: string, delta: TextDelta): string {
  return base.slice(0, delta.prefix) + delta.middle + base.slice(base.length - delta.suffix)
}

/**
 * A text coded as copies of ranges of a *source* text plus the characters no copy covers (`literals`, in
 * order). `ops` holds three numbers per copy: the literal characters before it, its source start, its length;
 * the literals left after the last copy end the text. Used for the body sent upstream against the harness's
 * own text of the same turn: they differ by a few renamed or moved keys (`reasoning_content` → `reasoning`).
 */
export interface CopyCode {
  ops: number[]
  literals: string
}

/** Units hashed per source position. */
const BLOCK = 16
/**
 * Source positions indexed at most: every position of a source up to this long (a turn's new messages), so the
 * match found first is also where the last copy's neighbourhood continues; a longer source every few units.
 */
const MAX_INDEXED = 1 << 16
/** A shorter match costs about what its literal text would (three numbers of JSON): not copied. */
const MIN_COPY = 24
/** Source blocks with the same hash compared at most per position (repeated text: the longest match wins). */
const MAX_CANDIDATES = 8
/** A match this long where the last copy would continue is taken without looking for a longer one elsewhere. */
const LONG_ENOUGH = 256
/** Polynomial rolling hash base, and base^(BLOCK − 1) mod 2^32. */
const HASH_BASE = 0x01000193
const HASH_TOP = (() => {
  let power = 1
  for (let i = 1; i < BLOCK; i++) power = Math.imul(power, HASH_BASE)
  return power
})()

function blockHash(text: string, at: number): number {
  let hash = 0
  for (let i = at; i < at + BLOCK; i++) hash = (Math.imul(hash, HASH_BASE) + text.charCodeAt(i)) | 0
  return hash
}

/** Length of the common run of `a` from `ai` and `b` from `bi` (block compares, as `commonPrefix`). */
function matchLength(a: string, ai: number, b: string, bi: number): number {
  const limit = Math.min(a.length - ai, b.length - bi)
  let n = 0
  let block = SCAN
  while (limit - n > SCAN) {
    const size = Math.min(block, limit - n)
    if (a.slice(ai + n, ai + n + size) === b.slice(bi + n, bi + n + size)) {
      n += size
      block *= 2
    } else break
  }
  while (n < limit && a.charCodeAt(ai + n) === b.charCodeAt(bi + n)) n++
  return n
}

/** Characters one copy costs in the stored ops (three numbers as JSON), about. */
function opCost(literal: number, start: number, length: number): number {
  return String(literal).length + String(start).length + String(length).length + 3
}

/**
 * `target` as copies of `source` and literals, or null when that would store more than `budget` characters
 * (literals plus ops as JSON, about): then the caller keeps the plain text. One pass over `target` with a
 * rolling hash over the source's positions (chained like zlib's), each position trying the place the last copy
 * would continue at and a few positions with its hash, keeping the longest match, and of equally long ones
 * the nearest after the last copy (JSON repeats its keys in every message; the right one is usually next):
 * O(|source| + |target|) but for the matches compared. Copies never start or end inside a surrogate pair, so
 * the literals are valid UTF-16 whenever `target` is.
 */
export function copyCode(source: string, target: string, budget: number): CopyCode | null {
  if (source.length < BLOCK || target.length < MIN_COPY) return null
  const stride = Math.ceil((source.length - BLOCK + 1) / MAX_INDEXED)
  const indexed = Math.floor((source.length - BLOCK) / stride) + 1
  // A hash table of chains (typed arrays: a Map costs several times more per position): `head[bucket]` is
  // the last indexed position in that bucket, `chain[i]` the one before position i (-1: none).
  const mask = (1 << Math.ceil(Math.log2(indexed * 2))) - 1
  const head = new Int32Array(mask + 1).fill(-1)
  const chain = new Int32Array(indexed)
  let sourceHash = blockHash(source, 0)
  for (let i = 0, from = 0; i < indexed; i++) {
    const bucket = (sourceHash ^ (sourceHash >>> 15)) & mask
    chain[i] = head[bucket] as number
    head[bucket] = i
    // Roll on to the next indexed position (a stride of one unit, or several).
    const next = from + stride
    if (next + BLOCK > source.length) break
    if (stride === 1) {
      sourceHash = (Math.imul(sourceHash - Math.imul(source.charCodeAt(from), HASH_TOP), HASH_BASE) + source.charCodeAt(from + BLOCK)) | 0
    } else sourceHash = blockHash(source, next)
    from = next
  }
  const ops: number[] = []
  const literals: string[] = []
  let stored = 0
  let literalStart = 0
  /** Where in `source` the last copy ended (the next one often continues there, after a few literal units). */
  let sourceEnd = 0
  const last = target.length - BLOCK
  let at = 0
  let hash = last >= 0 ? blockHash(target, 0) : 0
  let bestFrom = -1
  let bestBack = 0
  let bestLength = 0
  /** How far a copy starting at `from` is from where the last one ended (behind it counts as farther). */
  const distance = (from: number) => (from >= sourceEnd ? from - sourceEnd : source.length + sourceEnd - from)
  const consider = (from: number) => {
    if (from < 0 || from + BLOCK > source.length || source.charCodeAt(from) !== target.charCodeAt(at)) return
    if (source.slice(from, from + BLOCK) !== target.slice(at, at + BLOCK)) return
    let back = 0
    while (at - back > literalStart && from - back > 0 && source.charCodeAt(from - back - 1) === target.charCodeAt(at - back - 1)) back++
    const length = back + BLOCK + matchLength(source, from + BLOCK, target, at + BLOCK)
    if (length > bestLength || (length === bestLength && distance(from - back) < distance(bestFrom - bestBack))) {
      bestFrom = from
      bestBack = back
      bestLength = length
    }
  }
  while (at <= last) {
    bestFrom = -1
    bestLength = 0
    const expected = sourceEnd + at - literalStart
    consider(expected)
    let candidate = bestLength >= LONG_ENOUGH ? -1 : (head[(hash ^ (hash >>> 15)) & mask] as number)
    for (let tried = 0; candidate >= 0 && tried < MAX_CANDIDATES; tried++, candidate = chain[candidate] as number) {
      if (candidate * stride !== expected) consider(candidate * stride)
    }
    if (bestFrom >= 0) {
      let start = at - bestBack
      let from = bestFrom - bestBack
      let length = bestLength
      if (isLowSurrogate(target.charCodeAt(start))) {
        start++
        from++
        length--
      }
      if (start + length < target.length && isLowSurrogate(target.charCodeAt(start + length))) length--
      if (length >= MIN_COPY) {
        literals.push(target.slice(literalStart, start))
        ops.push(start - literalStart, from, length)
        stored += start - literalStart + opCost(start - literalStart, from, length)
        if (stored > budget) return null
        at = start + length
        literalStart = at
        sourceEnd = from + length
        if (at <= last) hash = blockHash(target, at)
        continue
      }
    }
    if (at < last) hash = (Math.imul(hash - Math.imul(target.charCodeAt(at), HASH_TOP), HASH_BASE) + target.charCodeAt(at + BLOCK)) | 0
    at++
    if (stored + at - literalStart > budget) return null
  }
  literals.push(target.slice(literalStart))
  stored += target.length - literalStart
  return stored > budget || ops.length === 0 ? null : { ops, literals: literals.join('') }
}

/** The text a `CopyCode` stands for, given its source; throws when the code does not fit the source. */
export function applyCopyCode(code: CopyCode, source: string): string {
  const { ops, literals } = code
  if (ops.length % 3 !== 0) throw new Error('copy code: ops are not triples')
  let out = ''
  let literal = 0
  for (let i = 0; i < ops.length; i += 3) {
    const before = ops[i] as number
    const from = ops[i + 1] as number
    const length = ops[i + 2] as number
    if (literal + before > literals.length || from < 0 || from + length > source.length) {
      throw new Error('copy code: a range lies outside its literals or its source')
    }
    out += literals.slice(literal, literal + before)
    literal += before
    out += source.slice(from, from + length)
  }
  return out + literals.slice(literal)
}

/**
 * The pieces of the range [start, end) of a `CopyCode`'s text, in order: `emit(true, a, b)` for literals[a:b],
 * `emit(false, a, b)` for source[a:b].
 */
export function copyCodePieces(
  ops: readonly number[],
  start: number,
  end: number,
  emit: (literal: boolean, from: number, to: number) => void,
): void {
  let position = 0
  let literal = 0
  const piece = (isLiteral: boolean, from: number, length: number) => {
    const low = Math.max(start, position)
    const high = Math.min(end, position + length)
    if (high > low) emit(isLiteral, from + low - position, from + high - position)
    position += length
  }
  for (let i = 0; i < ops.length && position < end; i += 3) {
    piece(true, literal, ops[i] as number)
    literal += ops[i] as number
    piece(false, ops[i + 1] as number, ops[i + 2] as number)
  }
  if (position < end) emit(true, literal + Math.max(0, start - position), literal + end - position)
}
