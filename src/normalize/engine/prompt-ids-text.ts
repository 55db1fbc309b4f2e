/**
 * @module
 * The engine's `prompt_token_ids` kept as JSON text: a long agent context is 100k+ ids (≈ 1 MB of the
 * answer), the answer is read once, and consecutive calls of a session share all but the newest ids.
 * So the edge cuts the array's text out of the answer before `JSON.parse` (the rest is small), and the
 * session parses only the part that differs from its cached previous prompt
 * (`src/durable/session/prompt-ids.ts`).
 *
 * The cut is proven, not guessed: the array is replaced by a placeholder string and the rest is parsed;
 * the cut stands only when the placeholder lands exactly where the ids belong (top-level or `choices[0]`
 * `prompt_token_ids`, no `input_token_ids`, the usage's `prompt_tokens` given). A JSON parser reads the
 * text left to right, so the same prefix puts the parser in the same state at the cut: the placeholder is
 * the value of that key exactly when the cut text was (it holds no string, array or object, so its first
 * `]` closes it). Anything else falls back to parsing it all. The cut text itself is read by the session:
 * an engine that sends invalid JSON inside the array gets its call recorded without prompt ids (warned),
 * not refused.
 *
 * The answer is read as bytes and only the rest is decoded (`parseEngineAnswerBytes`): the cut leaves as a view
 * of the answer's bytes (one a character: ids are ASCII), which the session holds as its
 * next call's base: over RPC a byte array is copied off the V8 heap, where a 1.6 MB string was one more large
 * string in the session's isolate per call, promoted with the base that kept it (`docs/hot-path.md`, "Prompt
 * texts off the V8 heap", "The engine answer as bytes"). Bytes have no width either: the ids of an answer with a
 * character past Latin-1 are the same bytes as any other's.
 */

const KEY = '"prompt_token_ids"'
const SGLANG_KEY = '"input_token_ids"'
/**
 * Not worth cutting below this size: finding and proving the cut scans the answer several times and the
 * session then reads the ids as text, where a short answer's few thousand ids parse in microseconds (a 2 KB
 * chat's 18 KB answer spent more on the cut than on parsing its 512 ids; `docs/hot-path.md`).
 */
export const MIN_CUT_CHARS = 32 * 1024
/** Stands in for the cut array; a NUL cannot appear raw in JSON text, so only the cut can put it there. */
export const PROMPT_IDS_PLACEHOLDER = '\u0000rollgate:prompt_token_ids'
const PLACEHOLDER_JSON = JSON.stringify(PROMPT_IDS_PLACEHOLDER)
const UTF8_ENCODER = new TextEncoder()

export interface EngineAnswerText {
  /** The answer parsed; when `promptIdsBytes` is set its prompt ids field holds the placeholder. */
  json: unknown
  /** The JSON text of the prompt ids array, from `[` to `]`, as UTF-8 bytes, not yet parsed (null: parsed in `json`). */
  promptIdsBytes: Uint8Array | null
}

function isSpace(code: number): boolean {
  return code === 0x20 || code === 0x0a || code === 0x0d || code === 0x09
}

type Json = Record<string, unknown>
const asObject = (value: unknown): Json | null =>
  value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Json) : null

/** The placeholder stands exactly where the prompt ids belong, and nothing else needs their count. */
function placeholderInPlace(json: unknown): boolean {
  const body = asObject(json)
  if (!body || !Array.isArray(body.choices)) return false
  const choice = asObject(body.choices[0])
  if (!choice || choice.input_token_ids !== undefined) return false
  if (typeof asObject(body.usage)?.prompt_tokens !== 'number') return false
  return (
    choice.prompt_token_ids === PROMPT_IDS_PLACEHOLDER ||
    (choice.prompt_token_ids === undefined && body.prompt_token_ids === PROMPT_IDS_PLACEHOLDER)
  )
}

const KEY_BYTES = UTF8_ENCODER.encode(KEY)
const UTF8_DECODER = new TextDecoder()
/** For text after a cut: a U+FEFF there is a character of the answer, not a byte order mark to drop. */
const UTF8_DECODER_KEEP_BOM = new TextDecoder('utf-8', { fatal: false, ignoreBOM: true })

/** Where `needle` first occurs in `bytes` at or after `from`, or -1 (the needle's first byte by `indexOf`). */
function indexOfBytes(bytes: Uint8Array, needle: Uint8Array, from: number): number {
  const first = needle[0] as number
  for (let at = bytes.indexOf(first, from); at >= 0 && at + needle.length <= bytes.length; at = bytes.indexOf(first, at + 1)) {
    let i = 1
    while (i < needle.length && bytes[at + i] === needle[i]) i++
    if (i === needle.length) return at
  }
  return -1
}

/**
 * The first byte at or after `from` that can end or break an ids array (`"`, or any byte from 0x40 up:
 * `[`, `]`, `{`, letters, non-ASCII), or -1. Ids text is digits, commas and spaces (all below 0x40 and not
 * `"`), so four bytes are tested at once: `Uint8Array.indexOf` is a byte-by-byte loop, about 0.65 ms per
 * megabyte and a half of ids, 30 times slower than a one-byte string's `indexOf`.
 */
function firstStructural(bytes: Uint8Array, from: number): number {
  const stops = (code: number) => code === 0x22 || code >= 0x40
  let i = from
  const head = Math.min(bytes.length, (bytes.byteOffset + i + 3) & ~3) - bytes.byteOffset
  for (; i < head; i++) if (stops(bytes[i] as number)) return i
  const words = new Uint32Array(bytes.buffer, bytes.byteOffset + i, (bytes.length - i) >>> 2)
  for (let w = 0; w < words.length; w++) {
    const word = words[w] as number
    const quote = word ^ 0x22222222
    // Some byte is `"` (a zero byte of `quote`) or has bit 0x40 or 0x80 set: look at the four one by one.
    if (((quote - 0x01010101) & ~quote & 0x80808080) | (word & 0xc0c0c0c0)) {
      const at = i + w * 4
      for (let k = at; k < at + 4; k++) if (stops(bytes[k] as number)) return k
    }
  }
  for (i += words.length * 4; i < bytes.length; i++) if (stops(bytes[i] as number)) return i
  return -1
}

/** Where the one `"prompt_token_ids": [ … ]` array of the answer's bytes is, or null (absent, or not an array of scalars). */
export function findPromptIds(bytes: Uint8Array): { at: number; start: number; end: number } | null {
  const at = indexOfBytes(bytes, KEY_BYTES, 0)
  if (at < 0) return null
  let i = at + KEY_BYTES.length
  while (i < bytes.length && isSpace(bytes[i] as number)) i++
  if (bytes[i] !== 0x3a /* : */) return null
  i++
  while (i < bytes.length && isSpace(bytes[i] as number)) i++
  if (bytes[i] !== 0x5b /* [ */) return null
  // Scalars only up to the first `]` (no string, array or object inside): then it closes this array.
  const close = firstStructural(bytes, i + 1)
  if (close < 0 || bytes[close] !== 0x5d /* ] */) {
    // Not digits alone (an exponent, `true`…): the first `]` still closes it if no string, array or object comes first.
    const end = close < 0 ? -1 : bytes.indexOf(0x5d, close)
    if (end < 0) return null
    const inside = bytes.subarray(i + 1, end)
    if (inside.includes(0x22) || inside.includes(0x5b) || inside.includes(0x7b)) return null
    return { at, start: i, end: end + 1 }
  }
  return { at, start: i, end: close + 1 }
}

/**
 * Parse an engine answer held as text: `parseEngineAnswerBytes` of its UTF-8 bytes (the edge reads bytes; this is
 * for callers that hold text). Throws what `JSON.parse` throws for an unreadable answer.
 */
export function parseEngineAnswerText(text: string): EngineAnswerText {
  return parseEngineAnswerBytes(UTF8_ENCODER.encode(text))
}

/**
 * Parse an engine answer from its bytes as read (`Response.arrayBuffer()`), leaving its prompt ids unparsed when
 * they are large and the cut is proven: the ids' bytes are a view of them,
 * and only the rest is decoded, so the answer is never a string in the isolate (`docs/hot-path.md`).
 * Bytes that are not UTF-8 read as `Response.text()` reads them (U+FFFD).
 */
export function parseEngineAnswerBytes(bytes: Uint8Array): EngineAnswerText {
  if (bytes.length >= MIN_CUT_CHARS) {
    const cut = findPromptIds(bytes)
    if (cut) {
      const before = UTF8_DECODER.decode(bytes.subarray(0, cut.start))
      const after = UTF8_DECODER_KEEP_BOM.decode(bytes.subarray(cut.end))
      // The key once, and no SGLang ids: looked for outside the array only (its text holds no quote).
      if (!after.includes(KEY) && !after.includes(SGLANG_KEY) && !before.includes(SGLANG_KEY)) {
        let json: unknown
        try {
          json = JSON.parse(before + PLACEHOLDER_JSON + after)
        } catch {
          json = undefined
        }
        // A view, no copy: over RPC it carries the whole answer's bytes and the ids' offset in them; the session
        // copies them only when it holds them as they came (`holdText`, `prompt-ids.ts`).
        if (json !== undefined && placeholderInPlace(json)) return { json, promptIdsBytes: bytes.subarray(cut.start, cut.end) }
      }
    }
  }
  return { json: JSON.parse(UTF8_DECODER.decode(bytes)), promptIdsBytes: null }
}

/**
 * The ids of a JSON array text exactly as the engine response normalizer reads them (integers, stored as
 * uint32): null when the value is not an array of integers. Throws on text that is not JSON.
 */
export function promptIdsFromText(text: string): Uint32Array | null {
  const value: unknown = JSON.parse(text)
  if (!Array.isArray(value)) return null
  for (const item of value) if (!Number.isInteger(item)) return null
  return Uint32Array.from(value as number[])
}
