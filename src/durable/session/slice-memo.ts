/**
 * @module
 * JSON text of array slices, reused across the traces of one stream: the traces of a conversation start
 * with prompts that share most of their tokens and messages (a break after drift), so a slice equal to the
 * same slice of the previous trace's array (same field, same offset) is written from that text instead of
 * being stringified again. Elements are compared with `===`: the same number or string (same JSON text), or
 * the same object — the streamed build shares message objects between the records of a conversation and
 * never changes them (`log-records.ts`), so the output is exactly `JSON.stringify`'s. Memory: the previous
 * trace's long arrays and their texts.
 */

interface Written {
  values: readonly unknown[]
  texts: string[]
}

/** `values[start, end)` is `previous[start, end)`, element by element (`===`). */
function sameElements(values: readonly unknown[], previous: readonly unknown[], start: number, end: number): boolean {
  if (previous.length < end) return false
  for (let i = start; i < end; i++) if (values[i] !== previous[i]) return false
  return true
}

export class SliceMemo {
  readonly #previous = new Map<string, Written>()
  #current = new Map<string, Written>()
  /** Slices written from the memo (tests and benchmarks read it). */
  hits = 0

  /** The JSON text of `values[start, end)` without its brackets, for slice `index` of field `key`. */
  slice(key: string, values: readonly unknown[], index: number, start: number, end: number): string {
    let written = this.#current.get(key)
    if (written === undefined || written.values !== values) {
      written = { values, texts: [] }
      this.#current.set(key, written)
    }
    const previous = this.#previous.get(key)
    const known = previous?.texts[index]
    let text: string
    if (previous !== undefined && known !== undefined && sameElements(values, previous.values, start, end)) {
      text = known
      this.hits++
    } else {
      text = JSON.stringify(values.slice(start, end)).slice(1, -1)
    }
    written.texts[index] = text
    return text
  }

  /** The object being written is done: its arrays become the ones the next object is compared with. */
  next(): void {
    for (const [key, written] of this.#current) this.#previous.set(key, written)
    this.#current = new Map()
  }
}
