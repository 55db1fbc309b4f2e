/**
 * @module
 * Writes a stream of text chunks to one R2 object without holding it: chunks are buffered into parts of
 * `PART_BYTES` (R2 wants every part but the last the same size, at least 5 MiB) and uploaded as a
 * multipart upload, each part while the next one is being filled (one upload in flight); an object smaller
 * than one part is a single put. The buffer starts small and doubles up to a part (a 1 MB trajectory does
 * not allocate and zero 8 MiB). Memory: two parts plus one chunk.
 */

export const PART_BYTES = 8 * 1024 * 1024
/** The buffer's first size (it doubles up to `PART_BYTES`). */
const FIRST_BUFFER_BYTES = 256 * 1024

export interface UploadedPart {
  partNumber: number
  etag: string
}

export interface MultipartUpload {
  uploadPart(partNumber: number, value: Uint8Array): Promise<UploadedPart>
  complete(parts: UploadedPart[]): Promise<unknown>
  abort(): Promise<void>
}

/** The slice of R2's bucket API this writer needs (the real binding, or a test double). */
export interface PartBucket {
  put(key: string, value: Uint8Array, options?: { httpMetadata?: { contentType?: string } }): Promise<unknown>
  createMultipartUpload(key: string, options?: { httpMetadata?: { contentType?: string } }): Promise<MultipartUpload>
}

export interface WrittenObject {
  key: string
  bytes: number
  /** 0 for a single put. */
  parts: number
}

/**
 * Write every chunk of `chunks` (text, or bytes copied as they are) to `key`; on failure the multipart
 * upload is aborted and the error rethrown.
 */
export async function writeChunks(
  bucket: PartBucket,
  key: string,
  chunks: AsyncIterable<string | Uint8Array>,
  contentType: string,
  partBytes = PART_BYTES,
): Promise<WrittenObject> {
  const encoder = new TextEncoder()
  const options = { httpMetadata: { contentType } }
  let buffer = new Uint8Array(Math.min(partBytes, FIRST_BUFFER_BYTES))
  let filled = 0
  let bytes = 0
  let upload: MultipartUpload | null = null
  const parts: UploadedPart[] = []
  /** The part being uploaded while the next one fills (its failure is seen at the next flush or at the end). */
  let uploading: Promise<UploadedPart> | null = null
  const settle = async () => {
    if (uploading === null) return
    const part = uploading
    uploading = null
    parts.push(await part)
  }
  const flush = async () => {
    upload ??= await bucket.createMultipartUpload(key, options)
    await settle()
    uploading = upload.uploadPart(parts.length + 1, buffer)
    // Seen by `settle`; without a handler now, a failure while the next part fills would be unhandled.
    uploading.catch(() => {})
    buffer = new Uint8Array(partBytes)
    filled = 0
  }
  /** Room for `need` more bytes, or a full part's buffer. */
  const reserve = (need: number) => {
    if (buffer.length === partBytes || buffer.length - filled >= need) return
    const grown = new Uint8Array(Math.min(partBytes, Math.max(buffer.length * 2, filled + need)))
    grown.set(buffer.subarray(0, filled))
    buffer = grown
  }
  try {
    for await (const chunk of chunks) {
      if (typeof chunk !== 'string') {
        let data = chunk
        bytes += data.byteLength
        while (data.byteLength > 0) {
          reserve(data.byteLength)
          const take = Math.min(partBytes - filled, data.byteLength)
          buffer.set(data.subarray(0, take), filled)
          filled += take
          data = data.subarray(take)
          if (filled === partBytes) await flush()
        }
        continue
      }
      // Text is encoded straight into the part buffer (no array per chunk); a character whose bytes do not
      // fit in what is left of the part is split across the two parts, so every part but the last is full.
      let rest = chunk
      while (rest.length > 0) {
        // At most 3 bytes per UTF-16 unit: room for all of it, or a full part's buffer.
        reserve(rest.length * 3)
        const { read, written } = encoder.encodeInto(rest, buffer.subarray(filled))
        filled += written
        bytes += written
        rest = read === rest.length ? '' : rest.slice(read)
        if (rest.length > 0 && filled < partBytes) {
          const code = rest.charCodeAt(0)
          const next = rest.charCodeAt(1)
          // A surrogate pair is one character; a lone surrogate is written as U+FFFD, as `encode` does.
          const units = code >= 0xd800 && code <= 0xdbff && next >= 0xdc00 && next <= 0xdfff ? 2 : 1
          const character = encoder.encode(rest.slice(0, units))
          const take = partBytes - filled
          buffer.set(character.subarray(0, take), filled)
          filled = partBytes
          await flush()
          buffer.set(character.subarray(take), 0)
          filled = character.byteLength - take
          bytes += character.byteLength
          rest = rest.slice(units)
        } else if (filled === partBytes) await flush()
      }
    }
    if (upload === null) {
      await bucket.put(key, buffer.subarray(0, filled), options)
      return { key, bytes, parts: 0 }
    }
    const open = upload as MultipartUpload
    await settle()
    if (filled > 0) parts.push(await open.uploadPart(parts.length + 1, buffer.subarray(0, filled)))
    await open.complete(parts)
    return { key, bytes, parts: parts.length }
  } catch (error) {
    if (upload !== null) {
      // A part still uploading is waited for before the upload is aborted (its failure is the one above or moot).
      await (uploading as Promise<UploadedPart> | null)?.catch(() => {})
      await (upload as MultipartUpload).abort().catch(() => {})
    }
    throw error
  }
}
