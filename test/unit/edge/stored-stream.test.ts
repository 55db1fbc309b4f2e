/**
 * A stored trajectory is read back from R2 in growing ranges: the first chunk is sent after one small
 * range was asked for (and at most the next one prefetched), never after the whole object; the bytes
 * are the object's, in order; an object replaced midway is an error, not a mix of two versions.
 */
import { describe, expect, it } from 'vitest'
import { FIRST_RANGE_BYTES, MAX_RANGE_BYTES, type RangedBucket, rangedObjectBody } from '../../../src/worker/stored-stream.ts'

function bucket(data: Uint8Array, etag = 'v1') {
  const asked: { offset: number; length: number }[] = []
  let current = { data, etag }
  const api: RangedBucket & { asked: typeof asked; replace(next: Uint8Array): void } = {
    asked,
    replace(next) {
      current = { data: next, etag: 'v2' }
    },
    async get(_key, { range, onlyIf }) {
      asked.push(range)
      const { data: bytes, etag: tag } = current
      const head = { size: bytes.byteLength, etag: tag }
      if (onlyIf && onlyIf.etagMatches !== tag) return head
      const slice = bytes.subarray(range.offset, range.offset + range.length)
      // Delivered in 64 KiB chunks, as a stream.
      return {
        ...head,
        body: new ReadableStream<Uint8Array>({
          start(controller) {
            for (let at = 0; at < slice.byteLength; at += 65536) controller.enqueue(slice.subarray(at, at + 65536))
            controller.close()
          },
        }),
      }
    },
  }
  return api
}

async function readAll(stream: ReadableStream<Uint8Array>): Promise<Uint8Array> {
  const parts: Uint8Array[] = []
  const reader = stream.getReader()
  for (;;) {
    const chunk = await reader.read()
    if (chunk.done) break
    parts.push(chunk.value)
  }
  const out = new Uint8Array(parts.reduce((sum, part) => sum + part.byteLength, 0))
  let at = 0
  for (const part of parts) {
    out.set(part, at)
    at += part.byteLength
  }
  return out
}

const BIG = 40 * 1024 * 1024
function pattern(size: number): Uint8Array {
  const out = new Uint8Array(size)
  for (let i = 0; i < size; i++) out[i] = (i * 31 + (i >> 16)) & 0xff
  return out
}

describe('rangedObjectBody', () => {
  it('sends the first chunk after one small range (and one prefetch), not after the object', async () => {
    const r2 = bucket(pattern(BIG))
    const body = (await rangedObjectBody(r2, 'k'))!
    const first = await body.getReader().read()
    expect(first.done).toBe(false)
    expect(r2.asked.length).toBeLessThanOrEqual(2)
    expect(r2.asked[0]).toEqual({ offset: 0, length: FIRST_RANGE_BYTES })
  })

  it('gives the object byte for byte, in ranges that grow to MAX_RANGE_BYTES and cover it once', async () => {
    const data = pattern(BIG + 12345)
    const r2 = bucket(data)
    const read = await readAll((await rangedObjectBody(r2, 'k'))!)
    expect(read.byteLength).toBe(data.byteLength)
    expect(Buffer.compare(Buffer.from(read), Buffer.from(data))).toBe(0)
    let next = 0
    for (const range of r2.asked) {
      expect(range.offset).toBe(next)
      expect(range.length).toBeLessThanOrEqual(MAX_RANGE_BYTES)
      next += range.length
    }
    expect(next).toBe(data.byteLength)
    expect(r2.asked.length).toBeLessThan(12)
  })

  it('reads a small object whole in its first range; a missing object is null', async () => {
    const data = pattern(1000)
    const r2 = bucket(data)
    expect(Buffer.from(await readAll((await rangedObjectBody(r2, 'k'))!))).toEqual(Buffer.from(data))
    expect(r2.asked).toHaveLength(1)
    expect(await rangedObjectBody({ get: async () => null }, 'k')).toBeNull()
  })

  it('fails when the object is replaced while it is read', async () => {
    const r2 = bucket(pattern(BIG))
    const body = (await rangedObjectBody(r2, 'k'))!
    const reader = body.getReader()
    await reader.read()
    r2.replace(pattern(BIG))
    await expect(
      (async () => {
        for (;;) if ((await reader.read()).done) return
      })(),
    ).rejects.toThrow(/changed or vanished/)
  })
})
