/**
 * @module
 * One write, several R2 objects: a `PartBucket` whose every put and multipart upload goes to each of
 * `keys` with the same bytes. The task's `TaskResult` lives at two keys (`run_<run_id>.json` and
 * `task_result.json`); with this, `writeChunks` reads the sessions' results once and writes both objects
 * from the one stream of parts (the R2 binding has no server-side copy). The key `writeChunks` passes
 * is ignored: the targets are `keys`. A failure of any target fails the write (and `writeChunks` aborts
 * every upload), so neither object is left half written.
 */
import type { MultipartUpload, PartBucket, UploadedPart } from '../session/r2-part-writer.ts'

export function fanOutBucket(bucket: PartBucket, keys: readonly string[]): PartBucket {
  return {
    async put(_key, value, options) {
      await Promise.all(keys.map((key) => bucket.put(key, value, options)))
    },
    async createMultipartUpload(_key, options) {
      const uploads: MultipartUpload[] = []
      try {
        for (const key of keys) uploads.push(await bucket.createMultipartUpload(key, options))
      } catch (error) {
        await Promise.all(uploads.map((upload) => upload.abort().catch(() => {})))
        throw error
      }
      /** Each target's parts by part number (what `complete` hands to that target's upload). */
      const parts = uploads.map(() => new Map<number, UploadedPart>())
      const upload: MultipartUpload = {
        async uploadPart(partNumber, value) {
          const uploaded = await Promise.all(uploads.map((one) => one.uploadPart(partNumber, value)))
          for (const [index, part] of uploaded.entries()) parts[index]?.set(partNumber, part)
          return { partNumber, etag: uploaded.map((part) => part.etag).join(',') }
        },
        async complete(done) {
          await Promise.all(
            uploads.map((one, index) =>
              one.complete(
                done.map(({ partNumber }) => {
                  const part = parts[index]?.get(partNumber)
                  if (!part) throw new Error(`part ${partNumber} was not uploaded`)
                  return part
                }),
              ),
            ),
          )
        },
        async abort() {
          await Promise.all(uploads.map((one) => one.abort().catch(() => {})))
        },
      }
      return upload
    },
  }
}
