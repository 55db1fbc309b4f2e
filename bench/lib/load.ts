/**
 * @module
 * Bounded closed-loop load: `concurrency` workers each send requests back to back until `count`
 * requests are done or `maxMs` elapses. Keep-alive connections, latency per request (and, with
 * `samples`, each request's latency and `server-timing` header, for splitting a tail by phase).
 */
import { Agent, request as httpRequest } from 'node:http'
import { percentileOfSorted as percentile } from './stats.ts'

/**
 * No single request may hang a run: one whose connection stays silent this long (no headers, no body bytes) is
 * destroyed and counted as an error, so every load loop ends however the target behaves.
 */
export const REQUEST_TIMEOUT_MS = 60_000

export interface LoadResult {
  requests: number
  errors: number
  seconds: number
  throughput: number
  p50: number
  p90: number
  p99: number
  mean: number
}

/** One request of a run: its latency and the edge's `server-timing` split, when it sent one. */
export interface Sample {
  ms: number
  serverTiming: string | null
  /** Its place in its run, when the caller numbers them. */
  position?: number
  /** When it was sent (`performance.timeOrigin + performance.now()`, ms): lines it up with a runtime's own trace. */
  sentAt?: number
}

export interface LoadTarget {
  url: string
  headers: Record<string, string>
  body: Buffer
}

/** One request on `agent`; resolves with the status once the answer was read. */
export function once(agent: Agent, target: LoadTarget): Promise<number> {
  return onceWithHeaders(agent, target).then((answer) => answer.status)
}

function onceWithHeaders(agent: Agent, target: LoadTarget): Promise<{ status: number; serverTiming: string | null }> {
  const url = new URL(target.url)
  return new Promise((resolve, reject) => {
    const request = httpRequest(
      {
        agent,
        host: url.hostname,
        port: url.port,
        path: url.pathname + url.search,
        method: 'POST',
        headers: { ...target.headers, 'content-type': 'application/json', 'content-length': target.body.length },
        timeout: REQUEST_TIMEOUT_MS,
      },
      (response) => {
        response.on('data', () => {})
        const timing = response.headers['server-timing']
        response.on('end', () => resolve({ status: response.statusCode ?? 0, serverTiming: typeof timing === 'string' ? timing : null }))
        response.on('error', reject)
      },
    )
    request.on('timeout', () => request.destroy(new Error(`no answer within ${REQUEST_TIMEOUT_MS} ms: ${target.url}`)))
    request.on('error', reject)
    request.end(target.body)
  })
}

/** `targets(worker)` picks the target per worker (e.g. one session per worker). */
export async function runLoad(
  targets: (worker: number) => LoadTarget,
  options: { concurrency: number; count: number; maxMs: number; samples?: Sample[] },
): Promise<LoadResult> {
  const agent = new Agent({ keepAlive: true, maxSockets: options.concurrency })
  const latencies: number[] = []
  let errors = 0
  let issued = 0
  const started = performance.now()
  const deadline = started + options.maxMs
  await Promise.all(
    Array.from({ length: options.concurrency }, async (_, worker) => {
      const target = targets(worker)
      while (issued < options.count && performance.now() < deadline) {
        issued++
        const t0 = performance.now()
        let serverTiming: string | null = null
        try {
          const answer = await onceWithHeaders(agent, target)
          serverTiming = answer.serverTiming
          if (answer.status !== 200) errors++
        } catch {
          errors++
        }
        const ms = performance.now() - t0
        latencies.push(ms)
        options.samples?.push({ ms, serverTiming, sentAt: performance.timeOrigin + t0 })
      }
    }),
  )
  const seconds = (performance.now() - started) / 1000
  agent.destroy()
  latencies.sort((a, b) => a - b)
  const round = (n: number) => Math.round(n * 1000) / 1000
  return {
    requests: latencies.length,
    errors,
    seconds: round(seconds),
    throughput: round(latencies.length / seconds),
    p50: round(percentile(latencies, 50)),
    p90: round(percentile(latencies, 90)),
    p99: round(percentile(latencies, 99)),
    mean: round(latencies.reduce((sum, n) => sum + n, 0) / Math.max(1, latencies.length)),
  }
}
