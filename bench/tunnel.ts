/**
 * @module
 * `npm run bench:tunnel`: added latency and throughput of tunnelled upstream calls (edge → runner
 * WebSocket → the runner's local engine) versus direct ones (edge → engine over HTTP), at concurrency
 * 1 and 32. Both go through rollout sessions in RUNNING (same admission check and generation gate),
 * so the difference is the tunnel alone; a bare capture session and the raw upstream are measured too.
 * The engine is the canned vLLM-shaped stub (`bench/lib/stub-upstream.ts`) in its own process; the
 * runner is the scripted runner client (`test/support/runner-client.ts`) in this process.
 *
 * Every loop is bounded in count and time. Last line: one JSON object with every figure, and
 * `targets` (issue #10, item 3): the tunnel adds ≤ 1.5 ms p50 over the direct edge call at 2 KB and
 * ≤ 3 ms at 54 KB (concurrency 1), and tunnelled throughput is ≥ 0.8× direct (concurrency 32), each
 * with its measured value and whether it is met.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import type { SessionAssignment } from '../src/contract/runner-protocol.ts'
import { startMiniflareEdge } from '../scripts/lib/miniflare-edge.ts'
import { startEdge } from '../scripts/lib/processes.ts'
import { RunnerClient } from '../test/support/runner-client.ts'
import { chatBody } from './lib/chat-bodies.ts'
import { startStub } from './lib/start-stub.ts'
import { type LoadResult, type LoadTarget, runLoad } from './lib/load.ts'

const ADMIN_TOKEN = 'bench-admin-token'
const RUNNER_TOKEN = 'bench-runner-token'
const SESSIONS_PER_ROUTE = 32
const SETUP_TIMEOUT_MS = 60_000
const SIZES: Record<string, number> = { '2KB': 2 * 1024, '54KB': 54 * 1024, '524KB': 524 * 1024 }

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '2' },
    'c1-count': { type: 'string', default: '150' },
    'c32-count': { type: 'string', default: '640' },
    'max-seconds': { type: 'string', default: '15' },
    /** `miniflare` (workerd directly) or `wrangler` (`wrangler dev`, adds its dev-server proxy). */
    runtime: { type: 'string', default: 'miniflare' },
    sizes: { type: 'string', default: '2KB,54KB' },
  },
})

async function admin(edgeUrl: string, path: string, body?: unknown): Promise<Response> {
  return fetch(`${edgeUrl}${path}`, {
    method: body === undefined ? 'GET' : 'POST',
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  })
}

/** Submit a task of `SESSIONS_PER_ROUTE` samples and walk every session to RUNNING on `runner`. */
async function runningSessions(
  edgeUrl: string,
  runner: RunnerClient,
  taskId: string,
  upstream: Record<string, unknown>,
): Promise<SessionAssignment[]> {
  const res = await admin(edgeUrl, '/rollout/task/submit', {
    task_id: taskId,
    instruction: 'benchmark',
    num_samples: SESSIONS_PER_ROUTE,
    timeout_seconds: 3600,
    agent: { harness: 'bench' },
    upstream,
  })
  if (res.status !== 200) throw new Error(`submit ${taskId}: ${res.status} ${await res.text()}`)
  const sessions: SessionAssignment[] = []
  for (let i = 0; i < SESSIONS_PER_ROUTE; i++) sessions.push(await runner.take(taskId))
  const deadline = Date.now() + SETUP_TIMEOUT_MS
  for (const session of sessions) {
    for (;;) {
      const info = (await (await admin(edgeUrl, `/rollout/session/${session.session_id}`)).json()) as { status: string }
      if (info.status === 'RUNNING') break
      if (Date.now() > deadline) throw new Error(`session ${session.session_id} not RUNNING in time (${info.status})`)
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
  }
  return sessions
}

function median(results: LoadResult[]): LoadResult {
  const pick = (key: keyof LoadResult) => results.map((r) => r[key]).sort((a, b) => a - b)[Math.floor(results.length / 2)] as number
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

const round3 = (n: number) => Math.round(n * 1000) / 1000

interface Target {
  value: number | null
  limit: number
  /** `max`: the value must stay at or below the limit; `min`: at or above. */
  kind: 'max' | 'min'
  met: boolean | null
}

function target(value: number | undefined, limit: number, kind: 'max' | 'min'): Target {
  if (value === undefined || !Number.isFinite(value)) return { value: null, limit, kind, met: null }
  return { value, limit, kind, met: kind === 'max' ? value <= limit : value >= limit }
}

/** The item's targets from the per-size figures (null when a size or concurrency was not run). */
function targets(figures: Record<string, unknown>): Record<string, Target> {
  const at = (key: string, field: string) => (figures[key] as Record<string, number> | undefined)?.[field]
  const ratios = ['2KB_c32', '54KB_c32'].map((key) => at(key, 'tunnel_throughput_ratio')).filter((n) => n !== undefined)
  return {
    added_p50_ms_2KB: target(at('2KB_c1', 'tunnel_added_p50_ms'), 1.5, 'max'),
    added_p50_ms_54KB: target(at('54KB_c1', 'tunnel_added_p50_ms'), 3, 'max'),
    throughput_ratio_c32: target(ratios.length ? Math.min(...ratios) : undefined, 0.8, 'min'),
  }
}
const stub = await startStub()
const persistTo = mkdtempSync(join(tmpdir(), 'rollgate-bench-tunnel-'))
const vars = {
  ROLLGATE_ADMIN_TOKEN: ADMIN_TOKEN,
  ROLLGATE_SIGNING_KEY: 'bench-signing-key',
  ROLLGATE_RUNNER_TOKEN: RUNNER_TOKEN,
  ROLLGATE_UPSTREAM_URL: stub.url,
  ROLLGATE_SERVED_MODEL: 'Qwen/Qwen3-8B',
}
const edge = values.runtime === 'wrangler' ? await startEdge({ persistTo, vars }) : await startMiniflareEdge({ persistTo, vars })
console.log(`edge runtime: ${values.runtime} at ${edge.url}; upstream stub at ${stub.url}`)
const capacity = { max_init_workers: 2 * SESSIONS_PER_ROUTE, max_run_workers: 2 * SESSIONS_PER_ROUTE, max_postrun_workers: 4 }
const runner = new RunnerClient({
  edgeUrl: edge.url,
  token: RUNNER_TOKEN,
  runnerId: 'bench-runner',
  capacity,
  engineUrl: stub.url,
  reconnect: false,
})
const figures: Record<string, unknown> = { runtime: values.runtime, sessions_per_route: SESSIONS_PER_ROUTE }
try {
  await runner.start()
  const tunnelled = await runningSessions(edge.url, runner, 'bench-tunnel', { route: 'runner' })
  const direct = await runningSessions(edge.url, runner, 'bench-direct', { route: 'direct', url: stub.url, served_model: 'Qwen/Qwen3-8B' })
  const bare: string[] = []
  for (let i = 0; i < SESSIONS_PER_ROUTE; i++) {
    const res = await admin(edge.url, '/v1/sessions', { upstream: { url: stub.url, kind: 'vllm', served_model: 'Qwen/Qwen3-8B' } })
    bare.push(((await res.json()) as { token: string }).token)
  }
  const rounds = Number(values.rounds)
  const maxMs = Number(values['max-seconds']) * 1000
  for (const sizeName of (values.sizes ?? '').split(',').filter((name) => name in SIZES)) {
    const body = Buffer.from(JSON.stringify(chatBody(SIZES[sizeName] as number)))
    for (const concurrency of [1, 32]) {
      const count = Number(concurrency === 1 ? values['c1-count'] : values['c32-count'])
      const viaEdge =
        (tokens: string[]) =>
        (worker: number): LoadTarget => ({
          url: `${edge.url}/v1/chat/completions`,
          headers: { authorization: `Bearer ${tokens[worker % tokens.length]}` },
          body,
        })
      const targets: Record<string, (worker: number) => LoadTarget> = {
        upstream: () => ({ url: `${stub.url}/v1/chat/completions`, headers: {}, body }),
        bare_session: viaEdge(bare),
        direct: viaEdge(direct.map((session) => session.token)),
        tunnel: viaEdge(tunnelled.map((session) => session.token)),
      }
      const results: Record<string, LoadResult[]> = {}
      for (const [name, target] of Object.entries(targets)) {
        await runLoad(target, { concurrency, count: Math.min(count, 40), maxMs })
        results[name] = []
      }
      // Alternate the paths round by round so drift hits all of them alike.
      for (let r = 0; r < rounds; r++) {
        for (const [name, target] of Object.entries(targets)) results[name]!.push(await runLoad(target, { concurrency, count, maxMs }))
      }
      const merged = Object.fromEntries(Object.entries(results).map(([name, list]) => [name, median(list)])) as Record<string, LoadResult>
      const key = `${sizeName}_c${concurrency}`
      const d = merged.direct as LoadResult
      const t = merged.tunnel as LoadResult
      figures[key] = {
        body_bytes: body.length,
        ...merged,
        tunnel_added_p50_ms: round3(t.p50 - d.p50),
        tunnel_added_p99_ms: round3(t.p99 - d.p99),
        tunnel_throughput_ratio: round3(t.throughput / d.throughput),
        admission_added_p50_ms: round3(d.p50 - (merged.bare_session as LoadResult).p50),
      }
      console.log(
        `${key.padEnd(9)} upstream p50 ${merged.upstream!.p50.toFixed(2)} | bare p50 ${merged.bare_session!.p50.toFixed(2)} | direct p50 ${d.p50.toFixed(2)} ms ${d.throughput.toFixed(0)} req/s | tunnel p50 ${t.p50.toFixed(2)} ms p99 ${t.p99.toFixed(2)} ms ${t.throughput.toFixed(0)} req/s (errors ${t.errors + d.errors}) | tunnel adds p50 ${(t.p50 - d.p50).toFixed(2)} ms`,
      )
    }
  }
  figures.targets = targets(figures)
  console.log(
    `targets: ${Object.entries(figures.targets as Record<string, Target>)
      .map(([name, t]) => `${name} ${t.value} (${t.kind} ${t.limit}) ${t.met === null ? 'not run' : t.met ? 'met' : 'MISSED'}`)
      .join(' | ')}`,
  )
  figures.tunnel_requests_served_by_runner = runner.stats.tunnelRequests
  const status = (await (await admin(edge.url, '/rollout/status')).json()) as { nodes: { nodes: { node_id: string; healthy: boolean }[] } }
  figures.runner_healthy_at_end = status.nodes.nodes.find((node) => node.node_id === 'bench-runner')?.healthy ?? false
} finally {
  await runner.shutdown().catch(() => {})
  await edge.stop()
  await stub.stop()
  rmSync(persistTo, { recursive: true, force: true })
}
console.log(JSON.stringify(figures))
