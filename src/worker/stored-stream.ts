/**
 * @module
 * How the edge sends a trajectory or export (streamed from a Durable Object, or read back from R2):
 * first bytes at once, at any size.
 *
 * - `STREAM_HEADERS`: the answer is sent as is (`content-encoding: identity`, `cache-control: no-transform`).
 *   A gzip/brotli encoder in front of the Worker (Cloudflare's for `application/json`, and Miniflare's
 *   imitation of it) holds what it is given until it has a block to emit, so the leading bytes of a
 *   trajectory waited for the build to produce ~64 KB of output (measured: the first byte of a built
 *   prefix_merging trajectory arrived only after every record was routed).
 * - `rangedObjectBody`: an R2 object read in ranges that grow from `FIRST_RANGE_BYTES` to
 *   `MAX_RANGE_BYTES`, the next range requested while the current one is sent. One `get` of the whole
 *   object gave its first byte only after the emulator had read most of it (1.5 s for a 95 MB
 *   per_request trajectory in Miniflare); the first small range answers at once. Every range is
 *   conditional on the first range's etag, so a replaced object is an error, never a mix of two.
 */

/** Headers of a streamed trajectory or export: no compression in front of it (see the module doc). */
export const STREAM_HEADERS = { 'content-encoding': 'identity', 'cache-control': 'no-transform' } as const

export const FIRST_RANGE_BYTES = 256 * 1024
export const MAX_RANGE_BYTES = 8 * 1024 * 1024

/** The slice of R2's bucket API the ranged reader needs. */
export interface RangedBucket {
  get(
    key: string,
    options: { range: { offset: number; length: number }; onlyIf?: { etagMatches: string } },
  ): Promise<{ size: number; etag: string; body?: ReadableStream<Uint8Array> } | null>
}

/** The object at `key` as a byte stream read in growing ranges, or null when there is no such object. */
export async function rangedObjectBody(bucket: RangedBucket, key: string): Promise<ReadableStream<Uint8Array> | null> {
  const first = await bucket.get(key, { range: { offset: 0, length: FIRST_RANGE_BYTES } })
  if (!first) return null
  const { size, etag } = first
  let offset = Math.min(FIRST_RANGE_BYTES, size)
  let length = FIRST_RANGE_BYTES
  const request = () => {
    if (offset >= size) return null
    length = Math.min(length * 4, MAX_RANGE_BYTES)
    const range = { offset, length: Math.min(length, size - offset) }
    offset += range.length
    const pending = bucket.get(key, { range, onlyIf: { etagMatches: etag } })
    // Observed when it is its turn; until then a rejection must not count as unhandled.
    pending.catch(() => {})
    return pending
  }
  let current: ReadableStreamDefaultReader<Uint8Array> | null = first.body?.getReader() ?? null
  let next = request()
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      for (;;) {
        if (current) {
          const chunk = await current.read()
          if (!chunk.done) {
            controller.enqueue(chunk.value)
            return
          }
          current = null
        }
        if (next === null) {
          controller.close()
          return
        }
        const object = await next
        if (!object?.body) throw new Error(`stored object ${key} changed or vanished while it was read`)
        current = object.body.getReader()
        next = request()
      }
    },
    async cancel(reason) {
      await current?.cancel(reason)
      const pending = await next?.catch(() => null)
      await pending?.body?.cancel(reason)
    },
  })
}
