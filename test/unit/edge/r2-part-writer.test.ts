/**
 * Writing text chunks to R2 in parts: the bytes are exactly the UTF-8 of the text, every part but the last
 * is full (R2's rule), characters whose bytes straddle a part boundary included.
 */
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { type MultipartUpload, type PartBucket, writeChunks } from '../../../src/durable/session/r2-part-writer.ts'

function recordingBucket() {
  const parts: Uint8Array[] = []
  const puts: Uint8Array[] = []
  const bucket: PartBucket = {
    async put(_key, value) {
      puts.push(value.slice())
    },
    async createMultipartUpload(): Promise<MultipartUpload> {
      return {
        async uploadPart(partNumber, value) {
          parts.push(value.slice())
          return { partNumber, etag: `e${partNumber}` }
        },
        async complete() {},
        async abort() {},
      }
    },
  }
  return { bucket, parts, puts }
}

/** Every third chunk as bytes (a stored object copied as it is), the others as text. */
async function* each(chunks: string[]) {
  for (const [index, chunk] of chunks.entries()) yield index % 3 === 2 ? new TextEncoder().encode(chunk) : chunk
}

function concat(arrays: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(arrays.reduce((sum, array) => sum + array.byteLength, 0))
  let at = 0
  for (const array of arrays) {
    out.set(array, at)
    at += array.byteLength
  }
  return out
}

describe('writeChunks', () => {
  it('writes the UTF-8 of the chunks (and byte chunks as they are) in full parts, splitting characters across parts', async () => {
    const text = fc.array(fc.constantFrom('a', 'é', '☃', '😀', '\ud83d', '{"x":[1,2]}', ''), { maxLength: 60 })
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          text.map((pieces) => pieces.join('')),
          { maxLength: 12 },
        ),
        fc.integer({ min: 5, max: 9 }),
        async (chunks, size) => {
          const { bucket, parts, puts } = recordingBucket()
          const written = await writeChunks(bucket, 'k', each(chunks), 'application/json', size)
          const expected = concat(chunks.map((chunk) => new TextEncoder().encode(chunk)))
          const stored = written.parts === 0 ? (puts[0] ?? new Uint8Array(0)) : concat(parts)
          expect(Array.from(stored)).toEqual(Array.from(expected))
          expect(written.bytes).toBe(expected.byteLength)
          for (const part of parts.slice(0, -1)) expect(part.byteLength).toBe(size)
        },
      ),
      { numRuns: 300 },
    )
  })
})
