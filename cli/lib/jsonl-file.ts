/**
 * @module
 * Appends NDJSON streams to one JSONL file as their bytes arrive (exports of long sessions are hundreds of
 * MB: never one string): every line that is not blank is written with its newline, blank lines (ASCII
 * whitespace only) are dropped, and a stream's last line gets its newline if it lacks one — the bytes of
 * `lines.join('\n') + '\n'` over the non-blank lines of every stream. The file is written under a temporary
 * name and renamed by `close`, so a failure part way leaves no half file under the real name.
 */
import { closeSync, openSync, renameSync, rmSync, writeSync } from 'node:fs'

const NEWLINE = 0x0a
const isBlank = (byte: number) => byte === 0x20 || byte === 0x09 || byte === 0x0d || byte === 0x0b || byte === 0x0c
const NEWLINE_BYTES = new Uint8Array([NEWLINE])

export class JsonlFile {
  readonly path: string
  readonly #partial: string
  #fd: number | null
  /** Lines written. */
  lines = 0

  constructor(path: string) {
    this.path = path
    this.#partial = `${path}.partial`
    this.#fd = openSync(this.#partial, 'w')
  }

  /** Append every non-blank line of `chunks` (one NDJSON stream). */
  async append(chunks: AsyncIterable<Uint8Array>): Promise<void> {
    /** The line so far holds more than whitespace. */
    let content = false
    /** Whitespace at the start of the current line (written only if the line turns out not to be blank). */
    let pending: Uint8Array[] = []
    for await (const chunk of chunks) {
      let i = 0
      while (i < chunk.length) {
        if (content) {
          const end = chunk.indexOf(NEWLINE, i)
          if (end < 0) {
            this.#write(chunk.subarray(i))
            break
          }
          this.#write(chunk.subarray(i, end + 1))
          this.lines++
          content = false
          i = end + 1
          continue
        }
        const start = i
        while (i < chunk.length && isBlank(chunk[i] as number)) i++
        if (i > start) pending.push(chunk.slice(start, i))
        if (i === chunk.length) break
        if (chunk[i] === NEWLINE) {
          pending = []
          i++
          continue
        }
        for (const piece of pending) this.#write(piece)
        pending = []
        content = true
      }
    }
    if (content) {
      this.#write(NEWLINE_BYTES)
      this.lines++
    }
  }

  #write(bytes: Uint8Array): void {
    if (this.#fd === null) throw new Error(`${this.path} is closed`)
    for (let done = 0; done < bytes.length; ) done += writeSync(this.#fd, bytes, done, bytes.length - done)
  }

  /** Finish the file under its name. */
  close(): void {
    if (this.#fd === null) return
    closeSync(this.#fd)
    this.#fd = null
    renameSync(this.#partial, this.path)
  }

  /** Drop the partial file (after a failure). */
  discard(): void {
    if (this.#fd !== null) closeSync(this.#fd)
    this.#fd = null
    rmSync(this.#partial, { force: true })
  }
}
