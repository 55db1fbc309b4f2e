/**
 * @module
 * `npm run bench:gateway`: added latency and throughput of the edge (wrangler dev → workerd, durable
 * capture in the session Durable Object) versus calling the upstream directly, for ~2 KB, ~50 KB and
 * ~500 KB chat requests at concurrency 1 and 16. A and B runs alternate in one process; the upstream is
 * a canned vLLM-shaped stub in its own process (what the peers were measured against).
 *
 * Last line: one JSON object with every figure.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { startMiniflareEdge } from '../scripts/lib/miniflare-edge.ts'
import { startEdge } from '../scripts/lib/processes.ts'
import { chatBody } from './lib/chat-bodies.ts'
import { startStub } from './lib/start-stub.ts'
import { type LoadResult, runLoad } from './lib/load.ts'

const ADMIN_TOKEN = 'bench-admin-token'
const SIZES = [
  { name: '2KB', bytes: 2 * 1024 },
  { name: '54KB', bytes: 54 * 1024 },
  { name: '524KB', bytes: 524 * 1024 },
]
/** Peers on this machine, same stub upstream (developers' brief). */
const PEERS = {
  added_latency_c1_54KB_ms: { portkey: 4.8, agent_trace: 2.5 },
  throughput_c16_req_s: { '2KB': 639, '54KB': 376, '524KB': 124 },
}

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '2' },
    'c1-count': { type: 'string', default: '150' },
    'c16-count': { type: 'string', default: '600' },
    'max-seconds': { type: 'string', default: '20' },
    /** `miniflare` (workerd directly) or `wrangler` (`wrangler dev`, adds its dev-server proxy). */
    runtime: { type: 'string', default: 'miniflare' },
    sizes: { type: 'string', default: '2KB,54KB,524KB' },
  },
})

async function createSession(edgeUrl: string, upstreamUrl: string): Promise<string> {
  const response = await fetch(`${edgeUrl}/v1/sessions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ upstream: { url: upstreamUrl, kind: 'vllm', served_model: 'Qwen/Qwen3-8B' } }),
  })
  if (response.status !== 201) throw new Error(`session create failed: ${response.status} ${await response.text()}`)
  return ((await response.json()) as { token: string }).token
}

function merge(results: LoadResult[]): LoadResult {
  const pick = (key: keyof LoadResult) => {
    const sorted = results.map((r) => r[key]).sort((a, b) => a - b)
    return sorted[Math.floor(sorted.length / 2)] as number
  }
  return {
    requests: results.reduce((s, r) => s + r.requests, 0),
    errors: results.reduce((s, r) => s + r.errors, 0),
    seconds: results.reduce((s, r) => s + r.seconds, 0),
    throughput: pick('throughput'),
    p50: pick('p50'),
    p90: pick('p90'),
    p99: pick('p99'),
    mean: pick('mean'),
  }
}

const stub = await startStub()
const persistTo = mkdtempSync(join(tmpdir(), 'rollgate-bench-'))
const edgeVars = { ROLLGATE_ADMIN_TOKEN: ADMIN_TOKEN, ROLLGATE_SIGNING_KEY: 'bench-signing-key' }
const edge =
  values.runtime === 'wrangler' ? await startEdge({ persistTo, vars: edgeVars }) : await startMiniflareEdge({ persistTo, vars: edgeVars })
console.log(`edge runtime: ${values.runtime} at ${edge.url}; upstream stub at ${stub.url}`)
const figures: Record<string, unknown> = {}
try {
  const rounds = Number(values.rounds)
  const maxMs = Number(values['max-seconds']) * 1000
  const tokens = await Promise.all(Array.from({ length: 16 }, () => createSession(edge.url, stub.url)))
  const sizes = SIZES.filter((size) => (values.sizes ?? '').split(',').includes(size.name))
  for (const size of sizes) {
    const body = Buffer.from(JSON.stringify(chatBody(size.bytes)))
    for (const concurrency of [1, 16]) {
      const count = Number(concurrency === 1 ? values['c1-count'] : values['c16-count'])
      const direct = (_worker: number) => ({ url: `${stub.url}/v1/chat/completions`, headers: {}, body })
      const viaEdge = (worker: number) => ({
        url: `${edge.url}/v1/chat/completions`,
        headers: { authorization: `Bearer ${tokens[worker % tokens.length]}` },
        body,
      })
      // Warm both paths (JIT, connections, DO instances).
      await runLoad(direct, { concurrency, count: Math.min(count, 50), maxMs })
      await runLoad(viaEdge, { concurrency, count: Math.min(count, 50), maxMs })
      const a: LoadResult[] = []
      const b: LoadResult[] = []
      for (let round = 0; round < rounds; round++) {
        a.push(await runLoad(direct, { concurrency, count, maxMs }))
        b.push(await runLoad(viaEdge, { concurrency, count, maxMs }))
      }
      const directResult = merge(a)
      const edgeResult = merge(b)
      const key = `${size.name}_c${concurrency}`
      figures[key] = {
        body_bytes: body.length,
        direct: directResult,
        edge: edgeResult,
        added_p50_ms: Math.round((edgeResult.p50 - directResult.p50) * 1000) / 1000,
        added_p99_ms: Math.round((edgeResult.p99 - directResult.p99) * 1000) / 1000,
      }
      console.log(
        `${key.padEnd(10)} body ${String(body.length).padStart(7)} B | direct p50 ${directResult.p50.toFixed(2)} ms p99 ${directResult.p99.toFixed(2)} ms ${directResult.throughput.toFixed(0)} req/s | edge p50 ${edgeResult.p50.toFixed(2)} ms p99 ${edgeResult.p99.toFixed(2)} ms ${edgeResult.throughput.toFixed(0)} req/s (errors ${edgeResult.errors}) | added p50 ${(edgeResult.p50 - directResult.p50).toFixed(2)} ms`,
      )
    }
  }
  // Zero captures lost: every successful edge call must be a stored completion.
  let stored = 0
  for (const token of tokens) {
    const sessionId = Buffer.from(token.slice(3).split('.')[0] as string, 'base64url').toString()
    const info = (await (
      await fetch(`${edge.url}/v1/sessions/${sessionId}`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
    ).json()) as {
      completion_count: number
    }
    stored += info.completion_count
  }
  figures.captures_stored = stored
  figures.runtime = values.runtime
  figures.peers = PEERS
  const added = (figures['54KB_c1'] as { added_p50_ms: number } | undefined)?.added_p50_ms ?? null
  figures.verdict = {
    added_latency_c1_54KB_ms: added,
    target_ms: Math.min(PEERS.added_latency_c1_54KB_ms.portkey, PEERS.added_latency_c1_54KB_ms.agent_trace) / 2,
    throughput_c16_vs_best_peer: Object.fromEntries(
      sizes.map((s) => [
        s.name,
        Math.round(
          ((figures[`${s.name}_c16`] as { edge: LoadResult }).edge.throughput / PEERS.throughput_c16_req_s[s.name as '2KB']) * 100,
        ) / 100,
      ]),
    ),
  }
} finally {
  await edge.stop()
  await stub.stop()
  rmSync(persistTo, { recursive: true, force: true })
}
console.log(JSON.stringify(figures))
