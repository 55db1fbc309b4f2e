/**
 * @module
 * The session object's plain classes in Node: finalize one builder from a session's SQLite file (a copy of
 * the Durable Object's, written by Miniflare) to a measuring in-memory bucket, sampling the V8 heap at
 * every chunk (and the JS heap with the isolate's external memory: ArrayBuffers), hashing what it writes. `bench:long-session` runs it with `--max-old-space-size=128` (a Durable Object's memory):
 * finishing at all is the bound; `heap_peak_mb - heap_start_mb` is the growth. Prints one JSON line.
 *
 * Usage: node bench/lib/finalize-in-node.ts <session.sqlite> <per_request|prefix_merging> [config JSON]
 */
import { createHash } from 'node:crypto'
import { getHeapStatistics } from 'node:v8'
import { BlobStore } from '../../src/durable/session/blob-store.ts'
import { CompletionLog } from '../../src/durable/session/completion-log.ts'
import { writeChunks } from '../../src/durable/session/r2-part-writer.ts'
import type { SessionConfig } from '../../src/durable/session/record.ts'
import { ensureSchema } from '../../src/durable/session/schema.ts'
import { trajectoryChunks } from '../../src/durable/session/trajectory-stream.ts'
import { MemoryBucket, nodeSql } from '../../scripts/lib/node-sqlite.ts'

const [path, builder, configText] = process.argv.slice(2) as [string, 'per_request' | 'prefix_merging', string | undefined]
const builderConfig = configText ? (JSON.parse(configText) as Record<string, unknown>) : undefined
const { sql } = nodeSql(path)
ensureSchema(sql)
const config = JSON.parse(sql.first<{ value: string }>("SELECT value FROM rg_meta WHERE key = 'session'")?.value ?? 'null') as SessionConfig
const bucket = new MemoryBucket({ keep: false })
const log = new CompletionLog(sql, new BlobStore(bucket), config.session_id)
const heapMb = () => getHeapStatistics().used_heap_size / 1024 / 1024
/** The JS heap plus memory outside it that the isolate holds (ArrayBuffers: packed tokens, R2 part buffers). */
const totalMb = () => {
  const stats = getHeapStatistics()
  return (stats.used_heap_size + stats.external_memory) / 1024 / 1024
}
const start = heapMb()
let peak = start
const totalStart = totalMb()
let totalPeak = totalStart
const digest = createHash('sha256')
async function* sampled(chunks: AsyncIterable<string>) {
  for await (const chunk of chunks) {
    peak = Math.max(peak, heapMb())
    totalPeak = Math.max(totalPeak, totalMb())
    digest.update(chunk)
    yield chunk
  }
}
const t0 = performance.now()
const cpu0 = process.cpuUsage()
const session = { session_id: config.session_id, task_id: config.task_id, metadata: config.metadata }
const written = await writeChunks(
  bucket,
  `trajectories/${config.session_id}/${builder}.json`,
  sampled(trajectoryChunks(log, { builder, ...(builderConfig ? { config: builderConfig } : {}) }, session, undefined, 'background')),
  'application/json',
)
const ms = performance.now() - t0
const cpu = process.cpuUsage(cpu0)
console.log(
  JSON.stringify({
    builder,
    ms: Math.round(ms),
    /** CPU time of the process (user + system) over the same span: what a loaded machine does not inflate. */
    cpu_ms: Math.round((cpu.user + cpu.system) / 1000),
    bytes: written.bytes,
    parts: written.parts,
    mb_per_s: Math.round((written.bytes / 1024 / 1024 / (ms / 1000)) * 10) / 10,
    heap_start_mb: Math.round(start),
    heap_peak_mb: Math.round(peak),
    heap_growth_mb: Math.round(peak - start),
    /** The same with the isolate's external memory (ArrayBuffers), which a Durable Object's 128 MB also counts. */
    heap_and_external_growth_mb: Math.round(totalPeak - totalStart),
    /** Of the written text (tests compare it with the in-memory builder's). */
    sha256: digest.digest('hex'),
  }),
)
