/**
 * @module
 * A text held as another text with one edit (`base[0:prefix] + middle + base[base.length - suffix:]`), read
 * in slices of its parts and never copied whole. V8 copies a string built by concatenation (`applyTextDelta`)
 * into one flat string the first time it is sliced or compared: 0.6 ms for a 524 KB body, most of it the
 * fresh pages of the copy. A delta base holds its upstream body as an edit of its original body (the two
 * differ by a few capture keys), so the next turn compares and slices it here, and nothing grows the base.
 */
import type { Sliceable } from './message-layout.ts'
import { commonPrefix, commonSuffix, isLowSurrogate, type TextDelta } from './text-delta.ts'

/** `base` with `delta` applied (`applyTextDelta(base, delta)`), unbuilt. */
export interface EditedText {
  readonly base: Text
  readonly delta: TextDelta
}

export type Text = string | EditedText

export function textLength(text: Text): number {
  return typeof text === 'string' ? text.length : text.delta.prefix + text.delta.middle.length + text.delta.suffix
}

/** Flat pieces `[string, start, end]` of `text[from:to]`, in order (empty ones left out). */
function parts(text: Text, from: number, to: number, out: [string, number, number][]): [string, number, number][] {
  if (to <= from) return out
  if (typeof text === 'string') {
    out.push([text, from, to])
    return out
  }
  const { base, delta } = text
  const middleEnd = delta.prefix + delta.middle.length
  if (from < delta.prefix) parts(base, from, Math.min(to, delta.prefix), out)
  if (to > delta.prefix && from < middleEnd) {
    out.push([delta.middle, Math.max(from, delta.prefix) - delta.prefix, Math.min(to, middleEnd) - delta.prefix])
  }
  if (to > middleEnd) {
    const shift = textLength(base) - delta.suffix - middleEnd
    parts(base, Math.max(from, middleEnd) + shift, to + shift, out)
  }
  return out
}

/** `text.slice(start, end)`, built from slices of its parts. */
export function textSlice(text: Text, start: number, end = textLength(text)): string {
  if (typeof text === 'string') return text.slice(start, end)
  let out = ''
  for (const [piece, from, to] of parts(text, Math.max(0, start), Math.min(end, textLength(text)), [])) out += piece.slice(from, to)
  return out
}

/** The text as one string (copied whole when it is sliced: reads, a chain walk's base). */
export function flatText(text: Text): string {
  return typeof text === 'string' ? text : textSlice(text, 0)
}

export function textCharCodeAt(text: Text, at: number): number {
  const [piece] = parts(text, at, at + 1, [])
  return piece ? piece[0].charCodeAt(piece[1]) : Number.NaN
}

/** `text` as `mapCoded` reads a base (slices of its parts). */
export function sliceable(text: Text): Sliceable {
  return typeof text === 'string' ? text : { length: textLength(text), slice: (start, end) => textSlice(text, start, end) }
}

/** `commonPrefix` of two texts, compared part against part. */
export function textCommonPrefix(a: Text, b: Text): number {
  if (typeof a === 'string' && typeof b === 'string') return commonPrefix(a, b)
  const limit = Math.min(textLength(a), textLength(b))
  const pa = parts(a, 0, limit, [])
  const pb = parts(b, 0, limit, [])
  let shared = 0
  let ka = 0
  let kb = 0
  while (ka < pa.length && kb < pb.length) {
    const [sa, fa, ta] = pa[ka] as [string, number, number]
    const [sb, fb, tb] = pb[kb] as [string, number, number]
    const n = Math.min(ta - fa, tb - fb)
    const x = sa.slice(fa, fa + n)
    const y = sb.slice(fb, fb + n)
    const same = x === y ? n : commonPrefix(x, y)
    shared += same
    if (same < n) return shared
    if (fa + n === ta) ka++
    else (pa[ka] as [string, number, number])[1] = fa + n
    if (fb + n === tb) kb++
    else (pb[kb] as [string, number, number])[1] = fb + n
  }
  return shared
}

/** `commonSuffix` of two texts (at most `max`), compared part against part from their ends. */
export function textCommonSuffix(a: Text, b: Text, max: number): number {
  if (typeof a === 'string' && typeof b === 'string') return commonSuffix(a, b, max)
  const la = textLength(a)
  const lb = textLength(b)
  const pa = parts(a, la - max, la, [])
  const pb = parts(b, lb - max, lb, [])
  let shared = 0
  let ka = pa.length - 1
  let kb = pb.length - 1
  while (ka >= 0 && kb >= 0) {
    const [sa, fa, ta] = pa[ka] as [string, number, number]
    const [sb, fb, tb] = pb[kb] as [string, number, number]
    const n = Math.min(ta - fa, tb - fb)
    const x = sa.slice(ta - n, ta)
    const y = sb.slice(tb - n, tb)
    const same = x === y ? n : commonSuffix(x, y, n)
    shared += same
    if (same < n) return shared
    if (ta - n === fa) ka--
    else (pa[ka] as [string, number, number])[2] = ta - n
    if (tb - n === fb) kb--
    else (pb[kb] as [string, number, number])[2] = tb - n
  }
  return shared
}

/** `diffText(flatText(base), flatText(text))`, without building either text. */
export function diffTexts(base: Text, text: Text): TextDelta {
  const length = textLength(text)
  let prefix = textCommonPrefix(base, text)
  if (prefix > 0 && prefix < length && isLowSurrogate(textCharCodeAt(text, prefix))) prefix--
  let suffix = textCommonSuffix(base, text, Math.min(textLength(base), length) - prefix)
  if (suffix > 0 && suffix < length - prefix && isLowSurrogate(textCharCodeAt(text, length - suffix))) suffix--
  return { prefix, suffix, middle: textSlice(text, prefix, length - suffix) }
}
