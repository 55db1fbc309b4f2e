/**
 * Writing text chunks to R2 in parts: the bytes are exactly the UTF-8 of the text, every part but the last
 * is full (R2's rule), characters whose bytes straddle a part boundary included; the buffer grows from small
 * (a small object is not backed by a whole part); a part uploads while the next one fills, one at a time,
 * and its failure fails the write (upload aborted, nothing unhandled).
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

  it('grows its buffer from small: a 10 KB object is one put not backed by a whole part; a 2.5-part object is exact', async () => {
    const backing: number[] = []
    const { bucket, parts, puts } = recordingBucket()
    const put = bucket.put
    bucket.put = async (key, value, options) => {
      backing.push(value.buffer.byteLength)
      return put(key, value, options)
    }
    await writeChunks(bucket, 'small', each(['x'.repeat(10_000)]), 'application/json')
    expect(puts[0]?.byteLength).toBe(10_000)
    expect(backing[0]).toBeLessThanOrEqual(256 * 1024)

    const size = 1024 * 1024
    const chunks = Array.from({ length: 40 }, (_, i) => `${i}:${'é☃a'.repeat(7000 + i * 13)}`)
    const written = await writeChunks(bucket, 'large', each(chunks), 'application/json', size)
    const expected = concat(chunks.map((chunk) => new TextEncoder().encode(chunk)))
    expect(written.parts).toBe(Math.ceil(expected.byteLength / size))
    expect(Buffer.from(concat(parts)).equals(Buffer.from(expected))).toBe(true)
    for (const part of parts.slice(0, -1)) expect(part.byteLength).toBe(size)
  })

  it('uploads a part while the next one fills, one upload at a time', async () => {
    const events: string[] = []
    const releases: (() => void)[] = []
    let inFlight = 0
    const bucket: PartBucket = {
      async put() {},
      async createMultipartUpload(): Promise<MultipartUpload> {
        return {
          async uploadPart(partNumber) {
            inFlight++
            expect(inFlight).toBe(1)
            events.push(`upload ${partNumber}`)
            await new Promise<void>((resolve) => releases.push(resolve))
            inFlight--
            events.push(`uploaded ${partNumber}`)
            return { partNumber, etag: `e${partNumber}` }
          },
          async complete() {
            events.push('complete')
          },
          async abort() {},
        }
      },
    }
    async function* chunks() {
      for (let i = 0; i < 6; i++) {
        events.push(`chunk ${i}`)
        yield 'abcd'
      }
    }
    const done = writeChunks(bucket, 'k', chunks(), 'application/json', 8)
    // Part 1 (chunks 0–1) uploads while chunks 2–3 fill part 2; part 2 waits for part 1 to finish.
    for (let turn = 0; turn < 20 && releases.length === 0; turn++) await Promise.resolve()
    await new Promise((resolve) => setTimeout(resolve, 0))
    expect(events).toEqual(['chunk 0', 'chunk 1', 'upload 1', 'chunk 2', 'chunk 3'])
    for (let part = 0; part < 3; part++) {
      while (releases.length === 0) await new Promise((resolve) => setTimeout(resolve, 0))
      releases.shift()?.()
    }
    expect((await done).parts).toBe(3)
    expect(events.filter((event) => !event.startsWith('chunk'))).toEqual([
      'upload 1',
      'uploaded 1',
      'upload 2',
      'uploaded 2',
      'upload 3',
      'uploaded 3',
      'complete',
    ])
  })

  it('fails the write when a part that uploads while the next fills fails (upload aborted, nothing unhandled)', async () => {
    let aborted = false
    const unhandled: unknown[] = []
    const onUnhandled = (reason: unknown) => unhandled.push(reason)
    process.on('unhandledRejection', onUnhandled)
    try {
      const bucket: PartBucket = {
        async put() {},
        async createMultipartUpload(): Promise<MultipartUpload> {
          return {
            async uploadPart(partNumber) {
              if (partNumber === 1) throw new Error('part 1 lost')
              return { partNumber, etag: 'e' }
            },
            async complete() {},
            async abort() {
              aborted = true
            },
          }
        },
      }
      async function* chunks() {
        for (let i = 0; i < 6; i++) {
          yield 'abcd'
          // Let the failed upload settle while the next part fills.
          await new Promise((resolve) => setTimeout(resolve, 0))
        }
      }
      await expect(writeChunks(bucket, 'k', chunks(), 'application/json', 8)).rejects.toThrow('part 1 lost')
      await new Promise((resolve) => setTimeout(resolve, 0))
      expect(aborted).toBe(true)
      expect(unhandled).toEqual([])
    } finally {
      process.off('unhandledRejection', onUnhandled)
    }
  })
})
