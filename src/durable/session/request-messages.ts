/**
 * @module
 * A request body's `messages` and other fields, parsed incrementally along a conversation: the next
 * turn's body is usually the previous one with messages appended, so when the new text starts with the
 * previous text up to the end of its `messages` array, only the appended elements are parsed (and the
 * rest of the body only when it changed). Anything else is parsed whole. The result equals
 * `JSON.parse(text)` for `messages` and every other top-level key.
 *
 * The structural scan (`valueEnd`) jumps over strings with `indexOf`, so it costs the structure, not the
 * text; it runs on the appended elements only, or once over a body parsed whole.
 */

const QUOTE = 34
const BACKSLASH = 92
const OPEN_BRACKET = 91
const CLOSE_BRACKET = 93
const OPEN_BRACE = 123
const CLOSE_BRACE = 125
const COMMA = 44
const COLON = 58

function isSpace(code: number): boolean {
  return code === 32 || code === 10 || code === 13 || code === 9
}

function skipSpace(text: string, at: number): number {
  // Stryker disable next-line ConditionalExpression,EqualityOperator: past the end `charCodeAt` is NaN, no space
  while (at < text.length && isSpace(text.charCodeAt(at))) at++
  return at
}

/** End (exclusive) of the string starting with the quote at `at`. */
function stringEnd(text: string, at: number): number {
  let from = at + 1
  for (;;) {
    const quote = text.indexOf('"', from)
    // Stryker disable next-line EqualityOperator: the search starts after the opening quote, so a quote is never at 0
    if (quote < 0) return -1
    let backslashes = 0
    while (text.charCodeAt(quote - 1 - backslashes) === BACKSLASH) backslashes++
    if (backslashes % 2 === 0) return quote + 1
    from = quote + 1
  }
}

/** End (exclusive) of the JSON value starting at `at` (no leading space), or -1 when the text is not JSON. */
export function valueEnd(text: string, at: number): number {
  const first = text.charCodeAt(at)
  if (first === QUOTE) return stringEnd(text, at)
  if (first !== OPEN_BRACKET && first !== OPEN_BRACE) {
    // A number or a literal: up to the next structural character or space.
    let end = at
    while (end < text.length) {
      const code = text.charCodeAt(end)
      if (code === COMMA || code === CLOSE_BRACKET || code === CLOSE_BRACE || code === COLON || isSpace(code)) break
      end++
    }
    return end > at ? end : -1
  }
  let depth = 0
  // Stryker disable next-line EqualityOperator: at the end `charCodeAt` is NaN, which no branch takes
  for (let i = at; i < text.length; i++) {
    const code = text.charCodeAt(i)
    if (code === QUOTE) {
      const end = stringEnd(text, i)
      // Stryker disable next-line EqualityOperator: a string ends at least two past its quote, never at 0
      if (end < 0) return -1
      i = end - 1
    } else if (code === OPEN_BRACKET || code === OPEN_BRACE) depth++
    else if (code === CLOSE_BRACKET || code === CLOSE_BRACE) {
      depth--
      if (depth === 0) return i + 1
    }
  }
  return -1
}

/** Where the top-level `messages` array of an object text lies: its `[` and `]`, or null. */
export function locateMessages(text: string): { open: number; close: number } | null {
  let at = skipSpace(text, 0)
  if (text.charCodeAt(at) !== OPEN_BRACE) return null
  at = skipSpace(text, at + 1)
  let found: { open: number; close: number } | null = null
  // Stryker disable next-line LogicalOperator,ConditionalExpression,EqualityOperator: re-entered only after a comma, where an object text has a quote; anything else is not JSON and `RequestParser.parse` throws on it either way
  while (at < text.length && text.charCodeAt(at) === QUOTE) {
    const keyEnd = stringEnd(text, at)
    // Stryker disable next-line ConditionalExpression,EqualityOperator: an unterminated key (-1) fails the colon check next (`charCodeAt(-1)` is NaN)
    if (keyEnd < 0) return null
    const key = text.slice(at + 1, keyEnd - 1)
    at = skipSpace(text, keyEnd)
    if (text.charCodeAt(at) !== COLON) return null
    at = skipSpace(text, at + 1)
    const end = valueEnd(text, at)
    // Stryker disable next-line EqualityOperator: a value ends after its first character, never at 0
    if (end < 0) return null
    // The last one wins, as in JSON.parse.
    if (key === 'messages') found = text.charCodeAt(at) === OPEN_BRACKET ? { open: at, close: end - 1 } : null
    at = skipSpace(text, end)
    if (text.charCodeAt(at) !== COMMA) break
    at = skipSpace(text, at + 1)
  }
  return found
}

/** What the log knows about a body: it starts with the first `length` characters of completion `seq`'s body. */
export interface SharedPrefix {
  seq: number
  length: number
}

interface Parsed {
  seq: number
  text: string
  /** `[` and `]` of `messages` in `text`. */
  open: number
  close: number
  messages: unknown[]
  /** The body without its messages (`text` with the array replaced by `0`), and its parse. */
  restText: string
  rest: Record<string, unknown>
}

export class RequestParser {
  #last: Parsed | null = null
  /** Bodies parsed whole (not as an extension of the previous one). */
  wholeParses = 0

  /**
   * `JSON.parse(text)` (as far as `messages` and the other top-level keys go) of completion `seq`'s body.
   * `shared` (from the delta coding) spares comparing the text with the previous body.
   */
  parse(text: string, seq: number, shared: SharedPrefix | null = null): Record<string, unknown> {
    let parsed = this.#extend(text, seq, shared)
    if (parsed === null) {
      this.wholeParses++
      parsed = this.#whole(text, seq)
    }
    if (parsed === null) {
      this.#last = null
      return JSON.parse(text) as Record<string, unknown>
    }
    this.#last = parsed
    return { ...parsed.rest, messages: parsed.messages }
  }

  /** The previous body's messages plus the elements appended to them, when `text` extends it. */
  #extend(text: string, seq: number, shared: SharedPrefix | null): Parsed | null {
    const last = this.#last
    // Stryker disable next-line ConditionalExpression,EqualityOperator: a text no longer than the previous array's end is a prefix of it at most (the hint never claims more than the text holds), so the extension fails anyway
    if (last === null || text.length <= last.close) return null
    const known = shared !== null && shared.seq === last.seq && shared.length >= last.close
    // String equality of flat strings is a memcmp in V8 (`startsWith` compares character by character).
    if (!known && text.slice(0, last.close) !== last.text.slice(0, last.close)) return null
    // Same text up to the previous array's end: same state there (inside the array, after its last element).
    const added: unknown[] = []
    let at = skipSpace(text, last.close)
    let code = text.charCodeAt(at)
    const start = at
    while (code === COMMA || (code !== CLOSE_BRACKET && at === start && last.messages.length === 0)) {
      if (code === COMMA) at = skipSpace(text, at + 1)
      const end = valueEnd(text, at)
      // Stryker disable next-line ConditionalExpression,EqualityOperator: an element without an end starts at a structural character, so parsing its text throws as JSON.parse of the body does
      if (end < 0) return null
      added.push(JSON.parse(text.slice(at, end)))
      at = skipSpace(text, end)
      code = text.charCodeAt(at)
    }
    if (code !== CLOSE_BRACKET) return null
    const restText = `${text.slice(0, last.open)}0${text.slice(at + 1)}`
    const rest = restText === last.restText ? last.rest : this.#rest(restText)
    if (rest === null) return null
    return { seq, text, open: last.open, close: at, messages: added.length ? last.messages.concat(added) : last.messages, restText, rest }
  }

  #whole(text: string, seq: number): Parsed | null {
    const located = locateMessages(text)
    if (located === null) return null
    const messages = JSON.parse(text.slice(located.open, located.close + 1)) as unknown[]
    const restText = `${text.slice(0, located.open)}0${text.slice(located.close + 1)}`
    const rest = this.#rest(restText)
    if (rest === null) return null
    return { seq, text, open: located.open, close: located.close, messages, restText, rest }
  }

  /** The body without its messages; null when another `messages` key overrides the placeholder. */
  #rest(restText: string): Record<string, unknown> | null {
    const rest = JSON.parse(restText) as Record<string, unknown>
    if (rest.messages !== 0) return null
    delete rest.messages
    return rest
  }
}
