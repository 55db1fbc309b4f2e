/**
 * @module
 * Read a prompt's ids from the engine's JSON text against the session's previous prompt: the text is
 * compared first (a memcmp), the ids whose text (and the separator after it) lies in the common prefix are
 * copied from the base, and only the rest is parsed. A 100k-token context then costs a text comparison and
 * two copies, not a parse of a megabyte of numbers (`src/normalize/engine/prompt-ids-text.ts` cuts the text
 * out of the answer). Whatever cannot be matched exactly is parsed whole, the way the engine response
 * normalizer reads ids (integers, stored as uint32).
 */
import { promptIdsFromText } from '../../normalize/engine/prompt-ids-text.ts'
import { commonPrefix } from './text-delta.ts'

/**
 * Ids and separators of prompts that extend one another, in buffers with room to grow: a prompt that extends
 * the last one stored appends its new ids in place (views of earlier prompts stay as they were), so a long
 * session's next prompt costs its new ids, not a copy of its context.
 */
export interface PromptStore {
  ids: Uint32Array
  seps: Uint32Array
  /** Positions written so far (the longest prompt viewing these buffers). */
  used: number
}

/** A prompt's ids as JSON text, and where each id's text ends. */
export interface PromptText {
  text: string
  /** `seps[j]`: index in `text` of the `,` or `]` that ends id j (after any whitespace). */
  seps: Uint32Array
  /** The buffers `seps` (and the prompt's ids) view, when they may grow in place. */
  store?: PromptStore
}

function newStore(length: number): PromptStore {
  const capacity = length + Math.max(1024, length >>> 2)
  return { ids: new Uint32Array(capacity), seps: new Uint32Array(capacity), used: length }
}

/** Room for `length` positions (a bigger copy when full; views of the old buffers stay valid). */
function reserve(store: PromptStore, length: number): void {
  if (length <= store.ids.length) return
  const grown = newStore(length)
  grown.ids.set(store.ids.subarray(0, store.used))
  grown.seps.set(store.seps.subarray(0, store.used))
  store.ids = grown.ids
  store.seps = grown.seps
}

export interface ParsedPrompt {
  /** Null: the text is not an array of integers (as the normalizer reads it), or not JSON. */
  ids: Uint32Array | null
  text: PromptText | null
  /** Ids copied from the base without parsing. */
  copied: number
  /** Characters of `text` parsed. */
  parsedChars: number
  /** The text is not JSON (an engine bug): recorded without prompt ids. */
  unreadable: boolean
}

const COMMA = 0x2c
const CLOSE = 0x5d

function isSpace(code: number): boolean {
  return code === 0x20 || code === 0x0a || code === 0x0d || code === 0x09
}

/** The text is ASCII: UTF-8 decoding is a copy. */
const ASCII = new TextDecoder()
/** Bytes of the longest id's text (a uint32 has at most 10 digits) and its separator. */
const MAX_ID_BYTES = 11

/**
 * The text `JSON.stringify` writes for `ids`, with its separators found on the way; `ids` is not copied.
 * Digits are written into a byte buffer decoded once (a session object rebuilding a 131k-id prompt's text
 * after a wake: `ids.join(',')` on a typed array took 8–15 ms, this 2–4 ms).
 */
export function canonicalPromptText(ids: Uint32Array): PromptText {
  const seps = new Uint32Array(ids.length)
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
    seps[j] = end
    bytes[end] = COMMA
    at = end + 1
  }
  // The last separator is the closing bracket (`[]` when empty).
  if (ids.length > 0) bytes[at - 1] = CLOSE
  else bytes[at++] = CLOSE
  return { text: ASCII.decode(bytes.subarray(0, at)), seps }
}

/** Separators of a JSON array of `count` numbers: its commas, then the closing bracket. */
function separators(text: string, count: number): Uint32Array {
  const seps = new Uint32Array(count)
  let at = 0
  for (let j = 0; j < count - 1; j++) {
    at = text.indexOf(',', at + 1)
    seps[j] = at
  }
  if (count > 0) seps[count - 1] = text.length - 1
  return seps
}

/**
 * How many leading ids `text` certainly shares with `base`: those whose text and following separator lie
 * in the common text prefix (so `[1,2,3` shares two ids with `[1,2,34`, not three).
 */
export function sharedPromptIds(base: PromptText, text: string): number {
  const prefix = commonPrefix(base.text, text)
  const seps = base.seps
  let lo = 0
  let hi = seps.length
  while (lo < hi) {
    const mid = (lo + hi) >>> 1
    if ((seps[mid] as number) < prefix) lo = mid + 1
    else hi = mid
  }
  // The texts part at the base's separator: the id still ends there if the new text has a separator too.
  if (lo < seps.length && seps[lo] === prefix) {
    const code = text.charCodeAt(prefix)
    if (code === COMMA || code === CLOSE || isSpace(code)) lo++
  }
  return lo
}

/** Parse `text` whole (no usable base). */
export function parsePromptText(text: string): ParsedPrompt {
  let parsed: Uint32Array | null
  try {
    parsed = promptIdsFromText(text)
  } catch {
    return { ids: null, text: null, copied: 0, parsedChars: text.length, unreadable: true }
  }
  if (!parsed) return { ids: null, text: null, copied: 0, parsedChars: text.length, unreadable: false }
  const store = newStore(parsed.length)
  store.ids.set(parsed)
  store.seps.set(separators(text, parsed.length))
  return {
    ids: store.ids.subarray(0, parsed.length),
    text: { text, seps: store.seps.subarray(0, parsed.length), store },
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
export function parsePromptTextAgainst(text: string, base: { ids: Uint32Array; text: PromptText }, shared: number): ParsedPrompt {
  if (shared <= 0 || shared > base.ids.length) return parsePromptText(text)
  let at = base.text.seps[shared - 1] as number
  while (at < text.length && isSpace(text.charCodeAt(at))) at++
  const code = text.charCodeAt(at)
  let tail: unknown = null
  if (code === CLOSE && at === text.length - 1) tail = []
  else if (code === COMMA) {
    try {
      tail = JSON.parse(`[${text.slice(at + 1)}`)
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
  const sameEnd = at === base.text.seps[shared - 1]
  if (tail.length === 0 && shared === base.ids.length && sameEnd) {
    return {
      ids: base.ids,
      text: { text, seps: base.text.seps, ...(base.text.store ? { store: base.text.store } : {}) },
      copied: shared,
      parsedChars,
      unreadable: false,
    }
  }
  let store = base.text.store
  if (store && sameEnd && shared === base.ids.length && store.used === shared) reserve(store, length)
  else {
    store = newStore(length)
    store.ids.set(base.ids.subarray(0, shared))
    store.seps.set(base.text.seps.subarray(0, shared))
    store.seps[shared - 1] = at
  }
  const { ids, seps } = store
  for (let j = 0; j < tail.length; j++) ids[shared + j] = tail[j] as number
  for (let j = shared; j < length - 1; j++) {
    at = text.indexOf(',', at + 1)
    seps[j] = at
  }
  seps[length - 1] = text.length - 1
  store.used = length
  return {
    ids: ids.subarray(0, length),
    text: { text, seps: seps.subarray(0, length), store },
    copied: shared,
    parsedChars,
    unreadable: false,
  }
}
