/**
 * @module
 * Picks a few small values out of a JSON document as it streams in, without holding the document: the
 * selection is a tree of paths (`Selection`); values it captures are parsed with `JSON.parse`, containers on
 * its paths are walked, and everything else (a trace's token arrays, its messages) is skipped by counting
 * brackets, never built. The objects marked `emit` (e.g. each element of a TaskStatus's `results`) are handed
 * out as they close, holding only what was captured under them, and are not kept: memory is one emitted
 * object plus one captured value, at any document size. `JSON.parse` of each captured value is the whole
 * grammar check of what is captured; skipped values are only checked for balanced brackets and strings.
 * (Not `stream-json`: it parsed a 138 MB TaskStatus at ~9 MB/s where this reads ~157 MB/s, same machine.)
 */

/** What to do with a value: parse it whole (`capture`), or walk into it (`fields` of an object, `each` element of an array). */
export type Selection =
  | { capture: true }
  | {
      fields?: Record<string, Selection>
      each?: Selection
      /** Hand this container out when it closes (it is not attached to its parent). */
      emit?: boolean
    }

type Walk = Exclude<Selection, { capture: true }>

interface Frame {
  array: boolean
  selection: Walk
  value: Record<string, unknown> | unknown[]
  /** The current key (objects). */
  key: string
}

/** What the next character may be. */
const Mode = {
  Value: 0,
  ValueOrEnd: 1,
  KeyOrEnd: 2,
  Key: 3,
  KeyString: 4,
  Colon: 5,
  AfterValue: 6,
  /** Inside a value that is skipped or captured whole. */
  Raw: 7,
  Done: 8,
} as const
type Mode = (typeof Mode)[keyof typeof Mode]

const isSpace = (code: number) => code === 0x20 || code === 0x0a || code === 0x0d || code === 0x09

export class JsonSelect {
  readonly #root: Selection
  readonly #emit: (value: Record<string, unknown> | unknown[]) => void
  readonly #stack: Frame[] = []
  #mode: Mode = Mode.Value
  #key = ''
  #keyEscape = false
  // Raw value (skipped or captured): bracket depth, string state, the captured text.
  #rawCapture = false
  #rawDepth = 0
  #rawString = false
  #rawEscape = false
  /** The raw value is a number or literal (ends at a delimiter, which is not its own). */
  #rawPrimitive = false
  #pieces: string[] = []
  /** Characters read so far (for error messages). */
  #offset = 0
  /** The root value when it was captured whole. */
  root: unknown = undefined

  constructor(selection: Selection, emit: (value: Record<string, unknown> | unknown[]) => void) {
    this.#root = selection
    this.#emit = emit
  }

  /** Read the next piece of the document's text. */
  write(text: string): void {
    let i = 0
    const n = text.length
    while (i < n) {
      if (this.#mode === Mode.Raw) {
        i = this.#raw(text, i)
        continue
      }
      const code = text.charCodeAt(i)
      switch (this.#mode) {
        case Mode.Value:
        case Mode.ValueOrEnd:
          if (isSpace(code)) break
          if (this.#mode === Mode.ValueOrEnd && code === 0x5d) {
            this.#close()
            break
          }
          this.#mode = Mode.Value
          this.#open(code)
          if ((this.#mode as Mode) === Mode.Raw) continue // the raw scan reads this character too
          break
        case Mode.KeyOrEnd:
        case Mode.Key:
          if (isSpace(code)) break
          if (this.#mode === Mode.KeyOrEnd && code === 0x7d) {
            this.#close()
            break
          }
          if (code !== 0x22) this.#fail(text, i, 'a key')
          this.#mode = Mode.KeyString
          this.#key = '"'
          this.#keyEscape = false
          break
        case Mode.KeyString: {
          let end = i
          while (end < n) {
            const c = text.charCodeAt(end)
            if (this.#keyEscape) this.#keyEscape = false
            else if (c === 0x5c) this.#keyEscape = true
            else if (c === 0x22) break
            end++
          }
          this.#key += text.slice(i, end)
          if (end === n) {
            i = n
            continue
          }
          ;(this.#top() as Frame).key = JSON.parse(`${this.#key}"`) as string
          this.#mode = Mode.Colon
          i = end + 1
          continue
        }
        case Mode.Colon:
          if (isSpace(code)) break
          if (code !== 0x3a) this.#fail(text, i, "':'")
          this.#mode = Mode.Value
          break
        case Mode.AfterValue: {
          if (isSpace(code)) break
          const top = this.#top()
          if (top === undefined) this.#fail(text, i, 'the end of the document')
          else if (code === 0x2c) this.#mode = top.array ? Mode.Value : Mode.Key
          else if (code === (top.array ? 0x5d : 0x7d)) this.#close()
          else this.#fail(text, i, top.array ? "',' or ']'" : "',' or '}'")
          break
        }
        case Mode.Done:
          if (!isSpace(code)) this.#fail(text, i, 'the end of the document')
          break
      }
      i++
    }
    this.#offset += n
  }

  /** The document is complete: throws when it is cut short. */
  end(): void {
    if (this.#mode === Mode.Raw && this.#rawPrimitive && this.#rawDepth === 0) this.#finishRaw()
    if (this.#mode !== Mode.Done) throw new Error(`JSON ended early (after ${this.#offset} characters)`)
  }

  #top(): Frame | undefined {
    return this.#stack[this.#stack.length - 1]
  }

  /** The selection of the value about to start. */
  #selection(): Selection | undefined {
    const top = this.#top()
    if (top === undefined) return this.#root
    return top.array ? top.selection.each : top.selection.fields?.[top.key]
  }

  #open(code: number): void {
    const selection = this.#selection()
    const walk = selection !== undefined && !('capture' in selection) ? selection : null
    if (walk !== null && (code === 0x7b || code === 0x5b)) {
      const array = code === 0x5b
      this.#stack.push({ array, selection: walk, value: array ? [] : {}, key: '' })
      this.#mode = array ? Mode.ValueOrEnd : Mode.KeyOrEnd
      return
    }
    // A value to hand out that is not an object or array would be dropped without a word.
    if (walk?.emit) throw new Error(`invalid JSON after character ${this.#offset}: expected an object or array to hand out`)
    this.#rawCapture = selection !== undefined && 'capture' in selection
    this.#rawDepth = 0
    this.#rawString = false
    this.#rawEscape = false
    this.#rawPrimitive = code !== 0x7b && code !== 0x5b && code !== 0x22
    this.#pieces = []
    this.#mode = Mode.Raw
  }

  /** Scan a skipped or captured value from `start`; returns where the caller goes on. */
  #raw(text: string, start: number): number {
    const n = text.length
    let i = start
    let depth = this.#rawDepth
    let inString = this.#rawString
    let escaped = this.#rawEscape
    let done = false
    if (this.#rawPrimitive) {
      while (i < n) {
        const c = text.charCodeAt(i)
        if (c === 0x2c || c === 0x7d || c === 0x5d || isSpace(c)) {
          done = true
          break
        }
        i++
      }
    } else {
      while (i < n) {
        const c = text.charCodeAt(i++)
        if (inString) {
          if (escaped) escaped = false
          else if (c === 0x5c) escaped = true
          else if (c === 0x22) {
            inString = false
            if (depth === 0) {
              done = true
              break
            }
          }
        } else if (c === 0x22) inString = true
        else if (c === 0x7b || c === 0x5b) depth++
        else if (c === 0x7d || c === 0x5d) {
          depth--
          if (depth === 0) {
            done = true
            break
          }
        }
      }
    }
    if (this.#rawCapture) this.#pieces.push(text.slice(start, i))
    this.#rawDepth = depth
    this.#rawString = inString
    this.#rawEscape = escaped
    if (done) this.#finishRaw()
    return i
  }

  #finishRaw(): void {
    this.#mode = Mode.AfterValue
    if (!this.#rawCapture) return
    const text = this.#pieces.join('')
    this.#pieces = []
    let value: unknown
    try {
      value = JSON.parse(text)
    } catch (error) {
      throw new Error(`invalid JSON value (${(error as Error).message})`)
    }
    this.#attach(value)
  }

  #attach(value: unknown): void {
    const top = this.#top()
    if (top === undefined) {
      this.root = value
      this.#mode = Mode.Done
    } else if (top.array) (top.value as unknown[]).push(value)
    else (top.value as Record<string, unknown>)[top.key] = value
  }

  #close(): void {
    const frame = this.#stack.pop() as Frame
    this.#mode = Mode.AfterValue
    if (frame.selection.emit) this.#emit(frame.value)
    else this.#attach(frame.value)
    if (this.#stack.length === 0) this.#mode = Mode.Done
  }

  #fail(text: string, at: number, expected: string): never {
    throw new Error(`invalid JSON at character ${this.#offset + at}: expected ${expected}, got ${JSON.stringify(text.slice(at, at + 20))}`)
  }
}

/**
 * The values `selection` marks `emit`, one at a time, from a byte stream of one JSON document (UTF-8).
 */
export async function* selectJson(
  chunks: AsyncIterable<Uint8Array>,
  selection: Selection,
): AsyncGenerator<Record<string, unknown> | unknown[]> {
  const ready: (Record<string, unknown> | unknown[])[] = []
  const select = new JsonSelect(selection, (value) => ready.push(value))
  const decoder = new TextDecoder('utf-8', { fatal: true })
  for await (const chunk of chunks) {
    select.write(decoder.decode(chunk, { stream: true }))
    while (ready.length > 0) yield ready.shift() as Record<string, unknown> | unknown[]
  }
  select.write(decoder.decode())
  select.end()
  while (ready.length > 0) yield ready.shift() as Record<string, unknown> | unknown[]
}
