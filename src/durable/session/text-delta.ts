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

function isLowSurrogate(code: number): boolean {
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
function commonSuffix(a: string, b: string, max: number): number {
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

export function applyTextDelta(base: string, delta: TextDelta): string {
  return base.slice(0, delta.prefix) + delta.middle + base.slice(base.length - delta.suffix)
}
