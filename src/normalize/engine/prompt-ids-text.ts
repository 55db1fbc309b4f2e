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
 * The cut text leaves as its UTF-8 bytes (one a character: ids are ASCII), which the session holds as its
 * next call's base: over RPC a byte array is copied off the V8 heap, where a 1.6 MB string was one more large
 * string in the session's isolate per call, promoted with the base that kept it (`docs/hot-path.md`, "Prompt
 * texts off the V8 heap"). Bytes have no width either: a slice of an answer with a character past Latin-1,
 * which V8 holds at two bytes a character, encodes to the same bytes.
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
  /** The answer parsed; when `promptIdsText` is set its prompt ids field holds the placeholder. */
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

/** Where the one `"prompt_token_ids": [ … ]` array of `text` is, or null (absent, twice, or not an array). */
export function findPromptIds(text: string): { start: number; end: number } | null {
  const at = text.indexOf(KEY)
  if (at < 0) return null
  let i = at + KEY.length
  while (i < text.length && isSpace(text.charCodeAt(i))) i++
  if (text.charCodeAt(i) !== 0x3a /* : */) return null
  i++
  while (i < text.length && isSpace(text.charCodeAt(i))) i++
  if (text.charCodeAt(i) !== 0x5b /* [ */) return null
  const close = text.indexOf(']', i)
  if (close < 0) return null
  // Scalars only up to the first `]` (no string, array or object inside): then it closes this array.
  const inside = text.slice(i + 1, close)
  if (inside.includes('"') || inside.includes('[') || inside.includes('{')) return null
  // The key once, and no SGLang ids: looked for outside the array only (its text holds no quote).
  if (text.indexOf(KEY, close) >= 0 || text.indexOf(SGLANG_KEY, close) >= 0 || text.slice(0, at).includes(SGLANG_KEY)) return null
  return { start: i, end: close + 1 }
}

/**
 * Parse an engine answer, leaving its prompt ids as text when they are large and the cut is proven.
 * Throws what `JSON.parse` throws for an unreadable answer.
 */
export function parseEngineAnswerText(text: string): EngineAnswerText {
  if (text.length >= MIN_CUT_CHARS) {
    const cut = findPromptIds(text)
    if (cut) {
      const rest = text.slice(0, cut.start) + PLACEHOLDER_JSON + text.slice(cut.end)
      let json: unknown
      try {
        json = JSON.parse(rest)
      } catch {
        json = undefined
      }
      if (json !== undefined && placeholderInPlace(json)) {
        return { json, promptIdsBytes: UTF8_ENCODER.encode(text.slice(cut.start, cut.end)) }
      }
    }
  }
  return { json: JSON.parse(text), promptIdsBytes: null }
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
