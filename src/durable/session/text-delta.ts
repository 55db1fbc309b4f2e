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

const CHUNK = 4096

function isLowSurrogate(code: number): boolean {
  return code >= 0xdc00 && code <= 0xdfff
}

/** Common prefix length, compared in chunks (string equality is a memcmp in V8). */
function commonPrefix(a: string, b: string): number {
  const limit = Math.min(a.length, b.length)
  let i = 0
  while (i + CHUNK <= limit && a.slice(i, i + CHUNK) === b.slice(i, i + CHUNK)) i += CHUNK
  while (i < limit && a.charCodeAt(i) === b.charCodeAt(i)) i++
  return i
}

function commonSuffix(a: string, b: string, max: number): number {
  let n = 0
  while (n + CHUNK <= max && a.slice(a.length - n - CHUNK, a.length - n) === b.slice(b.length - n - CHUNK, b.length - n)) {
    n += CHUNK
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
