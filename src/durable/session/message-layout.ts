/**
 * @module
 * Where a request body's `messages` lie, worked out at capture so a build never re-reads a whole body.
 *
 * A body's *layout* is its top-level `messages` array (`[`, `]`) and the end of each element. The next
 * turn's body usually repeats the previous one up to some message and appends new ones: its layout is
 * the base's first `kept` elements plus the elements scanned past them (the new text only). What the log
 * stores per completion (`MessageIndex`, column `request_messages`):
 *
 * - `n`: how many messages the body holds; `k` (kept): its first `k` messages are its delta parent's (same
 *   text at the same place); `same`: the body outside the array is the parent's too (same tools, same keys);
 * - `tail`: where the text of messages `k…n-1` (from the end of message `k-1`, or the `[`, to the `]`) lies
 *   in what this row stores: slices of its own two middles, plus the few characters the delta took from
 *   its parent's text (literals). Null when those literals would be long (a history edit): the build then
 *   reads the whole body.
 *
 * So a streamed build gets a completion's messages as its parent's first `k` plus one small parse
 * (`readTail`), and its other keys as its parent's (`same`).
 */
import { locateMessages, valueEnd } from './request-messages.ts'
import { detached, type TextDelta } from './text-delta.ts'

const QUOTE = 34
const OPEN_BRACKET = 91
const OPEN_BRACE = 123
const CLOSE_BRACKET = 93
const COMMA = 44

export interface MessageLayout {
  /** `[` and `]` of the top-level `messages` array. */
  open: number
  close: number
  /** End (exclusive) of each element. */
  ends: Int32Array
  /** Every element is an object, array or string (its end is known without the next character). */
  containers: boolean
  /**
   * The body after the `]`, a copy of its own: a slice of the body would keep the whole body alive in V8 (a
   * cached delta base's layout held a 524 KB copy of the upstream body that way: `base-heap.test.ts`).
   */
  after: string
}

/**
 * A tail piece: a literal, or a slice of this row's request middle (`q`) or original middle (`o`). On a row whose
 * request middle is coded (`request_edits`), `q` slices its stored literals: the tail never needs the edits.
 */
export type TailPiece = string | ['q' | 'o', number, number]

/** What the log stores about a body's messages (JSON in `request_messages`). */
export interface MessageIndex {
  n: number
  k: number
  same: boolean
  tail: TailPiece[] | null
}

function isContainer(code: number): boolean {
  return code === OPEN_BRACE || code === OPEN_BRACKET || code === QUOTE
}

function skipSpace(text: string, at: number): number {
  for (;;) {
    const code = text.charCodeAt(at)
    if (code !== 32 && code !== 10 && code !== 13 && code !== 9) return at
    at++
  }
}

/** The layout of a whole body (scans its structure once), or null when it has no `messages` array. */
export function layoutOf(text: string): MessageLayout | null {
  const located = locateMessages(text)
  if (located === null) return null
  const ends: number[] = []
  let containers = true
  let at = skipSpace(text, located.open + 1)
  if (at !== located.close) {
    for (;;) {
      containers &&= isContainer(text.charCodeAt(at))
      const end = valueEnd(text, at)
      if (end < 0) return null
      ends.push(end)
      at = skipSpace(text, end)
      if (text.charCodeAt(at) === COMMA) at = skipSpace(text, at + 1)
      else if (at === located.close) break
      else return null
    }
  }
  return { open: located.open, close: located.close, ends: Int32Array.from(ends), containers, after: detached(text.slice(located.close)) }
}

/** Elements of `layout` whose text lies inside the first `shared` characters (a number could go on: strictly inside). */
function keptWithin(layout: MessageLayout, shared: number): number {
  let low = 0
  let high = layout.ends.length
  while (low < high) {
    const mid = (low + high) >>> 1
    if ((layout.ends[mid] as number) <= shared) low = mid + 1
    else high = mid
  }
  if (low > 0 && layout.ends[low - 1] === shared && !layout.containers) low--
  return low
}

/**
 * The layout of `text` given its base's (sharing at least its first `shared` characters with it), how many
 * leading messages it keeps from the base, and whether the body outside the array is the base's.
 * `textFrom(start)` is `text.slice(start)` as a flat string (the caller builds it from the delta, so a body
 * held as a concatenation is never flattened whole). Costs the new elements and the rest of the body when
 * the body appends to the base's messages and keeps the rest; else one scan of the body.
 */
export function extendLayout(
  base: MessageLayout | null,
  text: string,
  textFrom: (start: number) => string,
  shared: number,
): { layout: MessageLayout; kept: number; same: boolean; scanned: 'new' | 'whole' } | null {
  if (base !== null) {
    const kept = keptWithin(base, shared)
    if (kept > 0) {
      const start = base.ends[kept - 1] as number
      const tail = textFrom(start)
      const added: number[] = []
      let containers = base.containers
      let at = 0
      for (;;) {
        at = skipSpace(tail, at)
        if (tail.charCodeAt(at) !== COMMA) break
        at = skipSpace(tail, at + 1)
        containers &&= isContainer(tail.charCodeAt(at))
        const end = valueEnd(tail, at)
        if (end < 0) break
        added.push(start + end)
        at = end
      }
      // Same text after the array as the base: the array is still the body's last `messages` key.
      if (tail.charCodeAt(at) === CLOSE_BRACKET && tail.length - at === base.after.length && tail.slice(at) === base.after) {
        const ends = new Int32Array(kept + added.length)
        ends.set(base.ends.subarray(0, kept))
        ends.set(added, kept)
        return { layout: { open: base.open, close: start + at, ends, containers, after: base.after }, kept, same: true, scanned: 'new' }
      }
    }
  }
  const layout = layoutOf(text)
  if (layout === null) return null
  let kept = 0
  let same = false
  if (base !== null && layout.open === base.open && layout.open < shared) {
    const limit = Math.min(keptWithin(base, shared), layout.ends.length)
    while (kept < limit && layout.ends[kept] === base.ends[kept]) kept++
    same = layout.after === base.after
  }
  return { layout, kept, same, scanned: 'whole' }
}

/** What a coding reads of its base text: a string, or a text read in parts (`edited-text.ts`). */
export interface Sliceable {
  readonly length: number
  slice(start: number, end: number): string
}

/** How one stored text is coded: `delta` against `base` (null: no base, the middle is the whole text). */
export interface Coding {
  delta: TextDelta
  base: Sliceable | null
  /** Which stored middle `delta.middle` is. */
  field: 'q' | 'o'
  /** Maps a range of `base` further (a request coded against its own original); else it is a literal. */
  below?: (start: number, end: number, out: TailPiece[]) => void
  /** Maps a range of `delta.middle` (a middle stored as copies of the original middle, schema v4); else one `field` slice. */
  middle?: (start: number, end: number, out: TailPiece[]) => void
}

/** Append a piece, joined to the last one when they are adjacent. */
export function pushPiece(out: TailPiece[], piece: TailPiece): void {
  const last = out[out.length - 1]
  if (typeof piece === 'string') {
    if (piece === '') return
    if (typeof last === 'string') out[out.length - 1] = last + piece
    else out.push(piece)
  } else if (piece[2] > piece[1]) {
    if (last !== undefined && typeof last !== 'string' && last[0] === piece[0] && last[2] === piece[1]) last[2] = piece[2]
    else out.push(piece)
  }
}

/** Pieces of the range [start, end) of a text coded as `coding`. */
export function mapCoded(start: number, end: number, coding: Coding, out: TailPiece[]): void {
  const { delta, base } = coding
  const middleEnd = delta.prefix + delta.middle.length
  const fromBase = (from: number, to: number) => {
    if (to <= from) return
    if (base === null) throw new Error('a delta without a base has no prefix or suffix')
    if (coding.below) coding.below(from, to, out)
    else pushPiece(out, base.slice(from, to))
  }
  if (start < delta.prefix) fromBase(start, Math.min(end, delta.prefix))
  if (end > delta.prefix && start < middleEnd) {
    const from = Math.max(start, delta.prefix) - delta.prefix
    const to = Math.min(end, middleEnd) - delta.prefix
    if (coding.middle) coding.middle(from, to, out)
    else pushPiece(out, [coding.field, from, to])
  }
  if (end > middleEnd) {
    const shift = (base?.length ?? 0) - delta.suffix - middleEnd
    fromBase(Math.max(start, middleEnd) + shift, end + shift)
  }
}

/** Literal characters a tail may carry: the delta took them from the parent (a closing `"}`, a shared word). */
function literalBudget(length: number): number {
  return Math.max(1024, length >> 2)
}

/**
 * The index of a body (`layout`, `kept`, `same` from `extendLayout`) whose text is `request` coded as `coding`.
 * The tail is null when it would carry more literal text than `literalBudget`.
 */
export function messageIndex(layout: MessageLayout, kept: number, same: boolean, coding: Coding): MessageIndex {
  const start = kept === 0 ? layout.open + 1 : (layout.ends[kept - 1] as number)
  const pieces: TailPiece[] = []
  mapCoded(start, layout.close, coding, pieces)
  let literal = 0
  for (const piece of pieces) if (typeof piece === 'string') literal += piece.length
  return { n: layout.ends.length, k: kept, same, tail: literal > literalBudget(layout.close - start) ? null : pieces }
}

/** The messages `k…n-1` of an index whose tail is known, from this row's two middles. */
export function readTail(index: MessageIndex & { tail: TailPiece[] }, requestMiddle: string, originalMiddle: string): unknown[] {
  let text = ''
  for (const piece of index.tail) {
    if (typeof piece === 'string') text += piece
    else text += (piece[0] === 'q' ? requestMiddle : originalMiddle).slice(piece[1], piece[2])
  }
  // From the `[`: the elements; from the end of message k-1: `,` before each new element.
  const messages = (index.k === 0 ? JSON.parse(`[${text}]`) : JSON.parse(`[0${text}]`)) as unknown[]
  return index.k === 0 ? messages : messages.slice(1)
}
