/**
 * @module
 * Read a prompt's ids from the engine's JSON text against the session's previous prompt: the text is
 * compared first (a memcmp), the ids whose text (and the separator after it) lies in the common prefix are
 * copied from the base, and only the rest is parsed. A 100k-token context then costs a text comparison and
 * two copies, not a parse of a megabyte of numbers (`src/normalize/engine/prompt-ids-text.ts` cuts the text
 * out of the answer). Whatever cannot be matched exactly is parsed whole, the way the engine response
 * normalizer reads ids (integers, stored as uint32).
 *
 * Where each id's text ends is kept for every `SEP_STRIDE`-th id only (`PromptText.marks`); the others are
 * found from the nearest mark by scanning at most `SEP_STRIDE` commas. A separator for every id was 4 bytes
 * an id, as much as the ids themselves (1 MiB of a 262k-id base: `docs/hot-path.md`, "slimmer bases").
 *
 * The text is held as its UTF-8 bytes (ASCII when it is ids), off the V8 heap: a base's 1.6 MB prompt text
 * kept as a string outlived a scavenge, was promoted and died in the old generation a few calls later, which
 * is what filled the edge isolate's old generation and paid full collections (`docs/hot-path.md`, "Prompt
 * texts off the V8 heap"). A buffer's bytes are freed off the pause and cost no marking.
 */
import { promptIdsFromText } from '../../normalize/engine/prompt-ids-text.ts'

/**
 * Ids and separators of prompts that extend one another, in buffers with room to grow: a prompt that extends
 * the last one stored appends its new ids in place (views of earlier prompts stay as they were), so a long
 * session's next prompt costs its new ids, not a copy of its context.
 */
export interface PromptStore {
  ids: Uint32Array
  /** Marks (`PromptText.marks`) of the ids in `ids`. */
  marks: Uint32Array
  /** Positions written so far (the longest prompt viewing these buffers). */
  used: number
  /**
   * The newest prompt's text bytes, in a buffer the next text extending it is written into from the
   * newest's closing bracket on (`appendText`); null until a text is held.
   */
  text: Uint8Array | null
  /** Bytes of `text` written so far. */
  textUsed: number
}

const COMMA = 0x2c
const CLOSE = 0x5d

/** Ids per separator mark: a separator is found by scanning at most this many commas from a mark. */
export const SEP_STRIDE = 64

/** A prompt's ids as JSON text (UTF-8 bytes), and where every `SEP_STRIDE`-th id's text ends. */
export interface PromptText {
  bytes: Uint8Array
  /** Ids in `bytes`. */
  count: number
  /**
   * `marks[k]`: index in `bytes` of the `,` or `]` (after any whitespace) that ends id `(k + 1) * SEP_STRIDE - 1`,
   * for each such id (`separatorAt` finds any id's).
   */
  marks: Uint32Array
  /** The buffers `marks` (and the prompt's ids) view, when they may grow in place. */
  store?: PromptStore
}

/** Marks of `count` ids. */
function markCount(count: number): number {
  return Math.floor(count / SEP_STRIDE)
}

/** Whether id `j` ends a group of `SEP_STRIDE` (its separator is marked). */
function marked(j: number): boolean {
  return (j + 1) % SEP_STRIDE === 0
}

/**
 * Spare room a new store keeps for later prompts to append in place (an eighth: ~10 turns of a 262k-id
 * context before a copy). Cached bases are charged for their store's whole buffer.
 */
function newStore(length: number): PromptStore {
  const capacity = length + Math.max(1024, length >>> 3)
  return { ids: new Uint32Array(capacity), marks: new Uint32Array(markCount(capacity)), used: length, text: null, textUsed: 0 }
}

/** Room for `length` positions (a bigger copy when full; views of the old buffers stay valid). */
function reserve(store: PromptStore, length: number): void {
  if (length <= store.ids.length) return
  const grown = newStore(length)
  grown.ids.set(store.ids.subarray(0, store.used))
  grown.marks.set(store.marks.subarray(0, markCount(store.used)))
  store.ids = grown.ids
  store.marks = grown.marks
}

/** Hold `text` as the store's newest text, as it came (no copy: a later extension copies it with spare room). */
function holdText(store: PromptStore, text: Uint8Array): Uint8Array {
  // A view into a larger buffer (the edge sends the ids as a view of the engine's answer): a copy of its own,
  // so the rest of that answer is not held and a later prompt can append in place (`appendText` wants offset 0).
  if (text.byteOffset !== 0 || text.byteLength !== text.buffer.byteLength) text = text.slice()
  store.text = text
  store.textUsed = text.length
  return text
}

/**
 * Hold `text`, which extends `base` (their bytes agree up to the base's closing bracket, where `text` has its
 * separator), by writing its new bytes into the store's buffer over that bracket when the base is the store's
 * newest text: a long session's next prompt then holds its new bytes, not a copy of its context, and its
 * RPC copy dies young. The base's view then ends in that separator, not `]`: every reader treats any
 * separator ending the last id alike (`sharedPromptIds`, `separatorAt`). Else the text is held as it came.
 */
function appendText(store: PromptStore, base: Uint8Array, text: Uint8Array): Uint8Array {
  const from = base.length - 1
  const held = store.text
  if (
    held === null ||
    base.buffer !== held.buffer ||
    base.byteOffset !== 0 ||
    store.textUsed !== base.length ||
    text.length <= base.length
  ) {
    return holdText(store, text)
  }
  let buffer = held
  if (text.length > buffer.length) {
    // Grown with spare room (an eighth, as the ids); the old buffer, and the views of earlier prompts, stay.
    buffer = new Uint8Array(text.length + Math.max(4096, text.length >>> 3))
    buffer.set(held.subarray(0, from))
    store.text = buffer
  }
  buffer.set(text.subarray(from), from)
  store.textUsed = text.length
  return buffer.subarray(0, text.length)
}

/** Index in `prompt.bytes` of the separator (`,` or the closing `]`) that ends id `j` (`0 <= j < count`). */
export function separatorAt(prompt: PromptText, j: number): number {
  if (j === prompt.count - 1) return prompt.bytes.length - 1
  const mark = markCount(j + 1)
  let at = mark > 0 ? (prompt.marks[mark - 1] as number) : 0
  for (let i = mark * SEP_STRIDE; i <= j; i++) at = prompt.bytes.indexOf(COMMA, at + 1)
  return at
}

/**
 * Length of the common prefix of two byte arrays, four bytes a step (a 1.6 MB prompt text in well under a
 * millisecond; byte by byte took 3 ms). `a` is brought to a 4-byte boundary first; `b` is read through a
 * `DataView` when it is not on one too: the edge sends a view of the engine answer's bytes, which starts where
 * the ids did in the answer, and an RPC copy keeps that offset.
 */
export function bytesCommonPrefix(a: Uint8Array, b: Uint8Array): number {
  const limit = Math.min(a.length, b.length)
  let i = 0
  while (i < limit && (a.byteOffset + i) % 4 !== 0) {
    if (a[i] !== b[i]) return i
    i++
  }
  const words = (limit - i) >>> 2
  const wa = new Uint32Array(a.buffer, a.byteOffset + i, words)
  let w = 0
  if ((b.byteOffset + i) % 4 === 0) {
    const wb = new Uint32Array(b.buffer, b.byteOffset + i, words)
    while (w < words && wa[w] === wb[w]) w++
  } else {
    const vb = new DataView(b.buffer, b.byteOffset + i, words * 4)
    while (w < words && wa[w] === vb.getUint32(w << 2, LITTLE_ENDIAN)) w++
  }
  i += w << 2
  while (i < limit && a[i] === b[i]) i++
  return i
}

/** The platform's byte order, which `Uint32Array` reads in (the `DataView` above must read alike). */
const LITTLE_ENDIAN = new Uint8Array(Uint32Array.of(1).buffer)[0] === 1

/** UTF-8 bytes of a prompt text handed over as a string (callers other than the edge, tests). */
export function promptTextBytes(text: string | Uint8Array): Uint8Array {
  return typeof text === 'string' ? UTF8.encode(text) : text
}

const UTF8 = new TextEncoder()

export interface ParsedPrompt {
  /** Null: the text is not an array of integers (as the normalizer reads it), or not JSON. */
  ids: Uint32Array | null
  text: PromptText | null
  /** Ids copied from the base without parsing. */
  copied: number
  /** Bytes of `text` parsed (characters, for ids: ASCII). */
  parsedChars: number
  /** The text is not JSON (an engine bug): recorded without prompt ids. */
  unreadable: boolean
}

function isSpace(code: number): boolean {
  return code === 0x20 || code === 0x0a || code === 0x0d || code === 0x09
}

/** Ids' text is ASCII: UTF-8 decoding is a copy (anything else decodes as it would have been read). */
const ASCII = new TextDecoder()
/** Bytes of the longest id's text (a uint32 has at most 10 digits) and its separator. */
const MAX_ID_BYTES = 11

/**
 * The text `JSON.stringify` writes for `ids`, with its separators found on the way; `ids` is not copied.
 * Digits are written into a byte buffer decoded once (a session object rebuilding a 131k-id prompt's text
 * after a wake: `ids.join(',')` on a typed array took 8–15 ms, this 2–4 ms).
 */
export function canonicalPromptText(ids: Uint32Array): PromptText {
  const marks = new Uint32Array(markCount(ids.length))
  const bytes = new Uint8Array(2 + ids.length * MAX_ID_BYTES)
  bytes[0] = 0x5b
  let at = 1
  for (let j = 0; j < ids.length; j++) {
    let value = ids[j] as number
    let end = at + 1
    for (let rest = value; rest >= 10; rest = (rest / 10) >>> 0) end++
    for (let k = end - 1; k >= at; k--) {
      bytes[k] = 0x30 + (value % 10)
      value = (value / 10) >>> 0
    }
    if (marked(j)) marks[(j + 1) / SEP_STRIDE - 1] = end
    bytes[end] = COMMA
    at = end + 1
  }
  // The last separator is the closing bracket (`[]` when empty).
  if (ids.length > 0) bytes[at - 1] = CLOSE
  else bytes[at++] = CLOSE
  // A copy of its length: the scratch buffer (11 bytes an id) is not kept.
  return { bytes: bytes.slice(0, at), count: ids.length, marks }
}

/**
 * Mark the separators of ids `from`…`count - 1` of a JSON array of numbers (its commas, then the closing
 * bracket), scanning from `at`, the separator ending id `from - 1` (0, the `[`, when `from` is 0).
 */
function markSeparators(marks: Uint32Array, text: Uint8Array, from: number, count: number, at: number): void {
  for (let j = from; j < count - 1; j++) {
    at = text.indexOf(COMMA, at + 1)
    if (marked(j)) marks[(j + 1) / SEP_STRIDE - 1] = at
  }
  if (count > from && marked(count - 1)) marks[count / SEP_STRIDE - 1] = text.length - 1
}

/**
 * How many leading ids `text` certainly shares with `base`: those whose text and following separator lie
 * in the common text prefix (so `[1,2,3` shares two ids with `[1,2,34`, not three).
 */
export function sharedPromptIds(base: PromptText, text: Uint8Array): number {
  const prefix = bytesCommonPrefix(base.bytes, text)
  const marks = base.marks
  let lo = 0
  let hi = Math.min(marks.length, markCount(base.count))
  while (lo < hi) {
    const mid = (lo + hi) >>> 1
    if ((marks[mid] as number) < prefix) lo = mid + 1
    else hi = mid
  }
  // Ids before the first mark at or past the prefix end before it; scan the rest of that group.
  let shared = lo * SEP_STRIDE
  let at = lo > 0 ? (marks[lo - 1] as number) : 0
  let sep = -1
  for (; shared < base.count; shared++) {
    sep = shared === base.count - 1 ? base.bytes.length - 1 : base.bytes.indexOf(COMMA, at + 1)
    if (sep >= prefix) break
    at = sep
  }
  // The texts part at the base's separator: the id still ends there if the new text has a separator too.
  if (shared < base.count && sep === prefix) {
    const code = text[prefix] as number
    if (code === COMMA || code === CLOSE || isSpace(code)) shared++
  }
  return shared
}

/** Parse `text` whole (no usable base). */
export function parsePromptText(text: Uint8Array): ParsedPrompt {
  let parsed: Uint32Array | null
  try {
    parsed = promptIdsFromText(ASCII.decode(text))
  } catch {
    return { ids: null, text: null, copied: 0, parsedChars: text.length, unreadable: true }
  }
  if (!parsed) return { ids: null, text: null, copied: 0, parsedChars: text.length, unreadable: false }
  const store = newStore(parsed.length)
  store.ids.set(parsed)
  markSeparators(store.marks, text, 0, parsed.length, 0)
  return {
    ids: store.ids.subarray(0, parsed.length),
    text: { bytes: holdText(store, text), count: parsed.length, marks: store.marks.subarray(0, markCount(parsed.length)), store },
    copied: 0,
    parsedChars: text.length,
    unreadable: false,
  }
}

/**
 * Parse `text` given that its first `shared` ids are the base's (`sharedPromptIds`): copy those (or, when
 * the text extends the base's, append to its buffers), parse the rest. Falls back to a whole parse when the
 * rest is not a plain continuation.
 */
export function parsePromptTextAgainst(text: Uint8Array, base: { ids: Uint32Array; text: PromptText }, shared: number): ParsedPrompt {
  if (shared <= 0 || shared > base.ids.length) return parsePromptText(text)
  const baseEnd = separatorAt(base.text, shared - 1)
  let at = baseEnd
  while (at < text.length && isSpace(text[at] as number)) at++
  const code = text[at]
  let tail: unknown = null
  if (code === CLOSE && at === text.length - 1) tail = []
  else if (code === COMMA) {
    try {
      tail = JSON.parse(`[${ASCII.decode(text.subarray(at + 1))}`)
    } catch {
      tail = null
    }
  }
  // `,]` is not JSON: a comma needs an id after it.
  if (!Array.isArray(tail) || (code === COMMA && tail.length === 0)) return parsePromptText(text)
  for (const item of tail) if (!Number.isInteger(item)) return parsePromptText(text)
  const length = shared + tail.length
  const parsedChars = text.length - at
  // The last copied id ends at the same place as in the base (not `2,` there and `2 ,` here).
  const sameEnd = at === baseEnd
  if (tail.length === 0 && shared === base.ids.length && sameEnd) {
    // The base's text exactly (its bytes agree up to its last separator, and it ends there too): its bytes are
    // held, not a second copy, unless a later prompt has written its separator over the base's bracket.
    const baseBytes = base.text.bytes
    const same = baseBytes[baseBytes.length - 1] === CLOSE ? baseBytes : text
    return {
      ids: base.ids,
      text: { bytes: same, count: shared, marks: base.text.marks, ...(base.text.store ? { store: base.text.store } : {}) },
      copied: shared,
      parsedChars,
      unreadable: false,
    }
  }
  let store = base.text.store
  let bytes: Uint8Array
  if (store && sameEnd && shared === base.ids.length && store.used === shared) {
    reserve(store, length)
    bytes = appendText(store, base.text.bytes, text)
  } else {
    store = newStore(length)
    store.ids.set(base.ids.subarray(0, shared))
    // Marks before the prefix are at the same places in both texts; the last shared id's is `at`.
    store.marks.set(base.text.marks.subarray(0, markCount(shared)))
    if (marked(shared - 1)) store.marks[shared / SEP_STRIDE - 1] = at
    bytes = holdText(store, text)
  }
  const { ids, marks } = store
  for (let j = 0; j < tail.length; j++) ids[shared + j] = tail[j] as number
  markSeparators(marks, text, shared, length, at)
  store.used = length
  return {
    ids: ids.subarray(0, length),
    text: { bytes, count: length, marks: marks.subarray(0, markCount(length)), store },
    copied: shared,
    parsedChars,
    unreadable: false,
  }
}
