/**
 * @module
 * R2 key layout and put/get for values too large for a SQLite row (a DO row is capped at 2 MB).
 *
 * Layout: `sessions/<session_id>/completions/<seq>/<field>` — one object per spilled field.
 * Trajectories written at finalize live under `trajectories/<session_id>/<builder>.json`.
 */

/** Anything larger goes to R2: keeps every row well under SQLite's 2 MB row limit. */
export const SPILL_THRESHOLD_BYTES = 512 * 1024

export interface BlobBucket {
  put(key: string, value: ArrayBuffer | string): Promise<unknown>
  get(key: string): Promise<{ arrayBuffer(): Promise<ArrayBuffer>; text(): Promise<string> } | null>
}

export function completionBlobKey(sessionId: string, seq: number, field: string): string {
  return `sessions/${sessionId}/completions/${seq}/${field}`
}

export class BlobStore {
  readonly #bucket: BlobBucket
  constructor(bucket: BlobBucket) {
    this.#bucket = bucket
  }

  async put(key: string, value: ArrayBuffer | string): Promise<void> {
    await this.#bucket.put(key, value)
  }

  async getBytes(key: string): Promise<ArrayBuffer> {
    const object = await this.#bucket.get(key)
    if (!object) throw new Error(`blob missing: ${key}`)
    return object.arrayBuffer()
  }

  async getText(key: string): Promise<string> {
    const object = await this.#bucket.get(key)
    if (!object) throw new Error(`blob missing: ${key}`)
    return object.text()
  }
}

/** Byte size of a value as stored (UTF-8 for text). */
export function storedSize(value: ArrayBuffer | string | null): number {
  if (value === null) return 0
  if (typeof value !== 'string') return value.byteLength
  if (value.length * 3 <= SPILL_THRESHOLD_BYTES) return value.length
  let bytes = 0
  for (let i = 0; i < value.length; i++) {
    const code = value.charCodeAt(i)
    if (code < 0x80) bytes += 1
    else if (code < 0x800) bytes += 2
    else if (code >= 0xd800 && code <= 0xdbff) {
      bytes += 4
      i++
    } else bytes += 3
  }
  return bytes
}
