/**
 * @module
 * `npm run bench:tunnel`: added latency and throughput of tunnelled upstream calls (edge → runner
 * WebSocket → the runner's local engine) versus direct ones (edge → engine over HTTP), at concurrency
 * 1 and 32. Both go through rollout sessions in RUNNING (same admission check and generation gate),
 * so the difference is the tunnel alone; a bare capture session and the raw upstream are measured too.
 * The engine is the canned vLLM-shaped stub (`bench/lib/stub-upstream.ts`) in its own process; the
 * runners are scripted runner clients (`test/support/runner-client.ts`), each in a process of its own
 * (`lib/tunnel-runner.ts`: a real runner does not share the load generator's event loop). Two tunnels are
 * measured side by side: `tunnel` (a runner asking for `tunnel.binary` + `tunnel.credit`, answering with
 * the real runner's `TunnelClient`) and `tunnel_v1` (a runner without capabilities: plain JSON frames,
 * the protocol before them) — the before/after in one run.
 *
 * On a shared machine the figures drift by more than the tunnel costs, so concurrency 1 is measured in
 * pairs: each iteration sends one request down every path in turn, and `tunnel_added_p50_ms` is the
 * median of the per-iteration differences tunnel − direct. Concurrency 32 alternates rounds per path and
 * also reports the CPU milliseconds per request of workerd, of this process (the load generator) and of
 * the runner processes.
 *
 * Every loop is bounded in count and time. Last line: one JSON object with every figure, and
 * `targets` (issue #10, item 3): the tunnel adds ≤ 1.5 ms p50 over the direct edge call at 2 KB and
 * ≤ 3 ms at 54 KB (concurrency 1), and tunnelled throughput is ≥ 0.8× direct (concurrency 32), each
 * with its measured value and whether it is met.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { Agent } from 'node:http'
import { loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import type { SessionAssignment } from '../src/contract/runner-protocol.ts'
import { startMiniflareEdge } from '../scripts/lib/miniflare-edge.ts'
import { startEdge } from '../scripts/lib/processes.ts'
import { chatBody } from './lib/chat-bodies.ts'
import { startStub } from './lib/start-stub.ts'
import { type LoadResult, type LoadTarget, once, runLoad } from './lib/load.ts'
import { cpuMs, workerdPids } from './lib/proc-stats.ts'
import { startTunnelRunner, type TunnelRunner } from './lib/tunnel-runner.ts'

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
  runner: TunnelRunner,
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
  sessions.push(...(await runner.take(taskId, SESSIONS_PER_ROUTE)))
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

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN
}

/**
 * Concurrency 1 in pairs: every iteration sends one request down each path in turn (each path its own
 * keep-alive connection), so slow drifts of a shared machine hit all paths alike.
 */
async function pairedLoad(
  targets: Record<string, LoadTarget>,
  options: { count: number; maxMs: number },
): Promise<{ latencies: Record<string, number[]>; errors: number }> {
  const agents = Object.fromEntries(Object.keys(targets).map((name) => [name, new Agent({ keepAlive: true, maxSockets: 1 })]))
  const latencies: Record<string, number[]> = Object.fromEntries(Object.keys(targets).map((name) => [name, []]))
  let errors = 0
  const deadline = performance.now() + options.maxMs
  for (let i = 0; i < options.count && performance.now() < deadline; i++) {
    for (const [name, target] of Object.entries(targets)) {
      const t0 = performance.now()
      const status = await once(agents[name] as Agent, target).catch(() => 0)
      if (status !== 200) errors++
      latencies[name]?.push(performance.now() - t0)
    }
  }
  for (const agent of Object.values(agents)) agent.destroy()
  return { latencies, errors }
}

/** Median of the per-iteration differences a − b. */
function pairedDiff(a: number[], b: number[]): number {
  return percentile(
    a.map((value, i) => value - (b[i] as number)),
    50,
  )
}

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
/**
 * Runner A holds the `tunnel` and `direct` sessions and is then full (admission limit = init + ready +
 * run + postrun = 64), so the `tunnel_v1` sessions submitted after runner B connected all go to B.
 */
const capacity = { max_init_workers: 1, max_run_workers: 2 * SESSIONS_PER_ROUTE - 2, max_postrun_workers: 1, ready_buffer: 0 }
const runnerOptions = { edgeUrl: edge.url, token: RUNNER_TOKEN, capacity, engineUrl: stub.url, reconnect: false }
// The new runner as `rollgate runner` connects (no permessage-deflate); the v1 one as runners did before.
let runner: TunnelRunner | null = null
let runnerV1: TunnelRunner | null = null
const figures: Record<string, unknown> = { runtime: values.runtime, sessions_per_route: SESSIONS_PER_ROUTE, loadavg_start: loadavg() }
try {
  runner = await startTunnelRunner({ ...runnerOptions, runnerId: 'bench-runner', tunnel: 'credit', deflate: false })
  const tunnelled = await runningSessions(edge.url, runner, 'bench-tunnel', { route: 'runner' })
  const direct = await runningSessions(edge.url, runner, 'bench-direct', { route: 'direct', url: stub.url, served_model: 'Qwen/Qwen3-8B' })
  runnerV1 = await startTunnelRunner({ ...runnerOptions, runnerId: 'bench-runner-v1', tunnel: 'v1' })
  const tunnelledV1 = await runningSessions(edge.url, runnerV1, 'bench-tunnel-v1', { route: 'runner' })
  const bare: string[] = []
  for (let i = 0; i < SESSIONS_PER_ROUTE; i++) {
    const res = await admin(edge.url, '/v1/sessions', { upstream: { url: stub.url, kind: 'vllm', served_model: 'Qwen/Qwen3-8B' } })
    bare.push(((await res.json()) as { token: string }).token)
  }
  const workerd = workerdPids()
  const rounds = Number(values.rounds)
  const maxMs = Number(values['max-seconds']) * 1000
  for (const sizeName of (values.sizes ?? '').split(',').filter((name) => name in SIZES)) {
    const body = Buffer.from(JSON.stringify(chatBody(SIZES[sizeName] as number)))
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
      tunnel_v1: viaEdge(tunnelledV1.map((session) => session.token)),
      tunnel: viaEdge(tunnelled.map((session) => session.token)),
    }

    // Concurrency 1: paired.
    const c1Count = Number(values['c1-count'])
    const first = Object.fromEntries(Object.entries(targets).map(([name, target]) => [name, target(0)]))
    await pairedLoad(first, { count: 20, maxMs })
    const paired = await pairedLoad(first, { count: rounds * c1Count, maxMs: rounds * maxMs })
    const p50s = Object.fromEntries(Object.entries(paired.latencies).map(([name, list]) => [name, round3(percentile(list, 50))]))
    const l = paired.latencies as Record<string, number[]>
    const c1Key = `${sizeName}_c1`
    figures[c1Key] = {
      body_bytes: body.length,
      iterations: l.direct?.length,
      errors: paired.errors,
      p50_ms: p50s,
      p99_ms: Object.fromEntries(Object.entries(l).map(([name, list]) => [name, round3(percentile(list, 99))])),
      tunnel_added_p50_ms: round3(pairedDiff(l.tunnel as number[], l.direct as number[])),
      tunnel_v1_added_p50_ms: round3(pairedDiff(l.tunnel_v1 as number[], l.direct as number[])),
      admission_added_p50_ms: round3(pairedDiff(l.direct as number[], l.bare_session as number[])),
    }
    const c1 = figures[c1Key] as Record<string, number>
    console.log(
      `${c1Key.padEnd(9)} p50 ms: ${Object.entries(p50s)
        .map(([name, value]) => `${name} ${value.toFixed(2)}`)
        .join(
          ' | ',
        )} | paired: tunnel adds ${c1.tunnel_added_p50_ms} ms, v1 adds ${c1.tunnel_v1_added_p50_ms} ms (errors ${paired.errors})`,
    )

    // Concurrency 32: rounds, alternating the paths so drift hits all of them alike.
    const concurrency = 32
    const count = Number(values['c32-count'])
    const results: Record<string, LoadResult[]> = {}
    const runnerPids = [runner.pid, runnerV1.pid]
    const cpu: Record<string, { workerd: number; node: number; runner: number; requests: number }> = {}
    for (const [name, target] of Object.entries(targets)) {
      await runLoad(target, { concurrency, count: Math.min(count, 40), maxMs })
      results[name] = []
      cpu[name] = { workerd: 0, node: 0, runner: 0, requests: 0 }
    }
    for (let r = 0; r < rounds; r++) {
      for (const [name, target] of Object.entries(targets)) {
        const w0 = cpuMs(workerd)
        const r0 = cpuMs(runnerPids)
        const n0 = process.cpuUsage()
        const result = await runLoad(target, { concurrency, count, maxMs })
        const n1 = process.cpuUsage(n0)
        const spent = cpu[name] as { workerd: number; node: number; runner: number; requests: number }
        spent.workerd += cpuMs(workerd) - w0
        spent.runner += cpuMs(runnerPids) - r0
        spent.node += (n1.user + n1.system) / 1000
        spent.requests += result.requests
        results[name]!.push(result)
      }
    }
    const merged = Object.fromEntries(Object.entries(results).map(([name, list]) => [name, median(list)])) as Record<string, LoadResult>
    const key = `${sizeName}_c${concurrency}`
    const d = merged.direct as LoadResult
    const t = merged.tunnel as LoadResult
    const v1 = merged.tunnel_v1 as LoadResult
    const perRequest = Object.fromEntries(
      Object.entries(cpu).map(([name, spent]) => [
        name,
        {
          workerd: round3(spent.workerd / Math.max(1, spent.requests)),
          load_generator: round3(spent.node / Math.max(1, spent.requests)),
          runner: round3(spent.runner / Math.max(1, spent.requests)),
        },
      ]),
    )
    figures[key] = {
      body_bytes: body.length,
      ...merged,
      cpu_ms_per_request: perRequest,
      tunnel_added_p50_ms: round3(t.p50 - d.p50),
      tunnel_throughput_ratio: round3(t.throughput / d.throughput),
      tunnel_v1_throughput_ratio: round3(v1.throughput / d.throughput),
    }
    const c = perRequest as Record<string, { workerd: number; runner: number }>
    console.log(
      `${key.padEnd(9)} req/s: direct ${d.throughput.toFixed(0)} | tunnel ${t.throughput.toFixed(0)} (${(t.throughput / d.throughput).toFixed(2)}×) | v1 ${v1.throughput.toFixed(0)} (${(v1.throughput / d.throughput).toFixed(2)}×) | errors ${t.errors + d.errors + v1.errors} | CPU ms/req workerd+runner: direct ${c.direct?.workerd}+${c.direct?.runner} tunnel ${c.tunnel?.workerd}+${c.tunnel?.runner} v1 ${c.tunnel_v1?.workerd}+${c.tunnel_v1?.runner}`,
    )
  }
  figures.targets = targets(figures)
  console.log(
    `targets: ${Object.entries(figures.targets as Record<string, Target>)
      .map(([name, t]) => `${name} ${t.value} (${t.kind} ${t.limit}) ${t.met === null ? 'not run' : t.met ? 'met' : 'MISSED'}`)
      .join(' | ')}`,
  )
  figures.tunnel_requests_served = { tunnel: (await runner.stats()).tunnelRequests, tunnel_v1: (await runnerV1.stats()).tunnelRequests }
  figures.loadavg_end = loadavg()
  const status = (await (await admin(edge.url, '/rollout/status')).json()) as { nodes: { nodes: { node_id: string; healthy: boolean }[] } }
  figures.runner_healthy_at_end = status.nodes.nodes.find((node) => node.node_id === 'bench-runner')?.healthy ?? false
} finally {
  await runner?.shutdown().catch(() => {})
  await runnerV1?.shutdown().catch(() => {})
  await edge.stop()
  await stub.stop()
  rmSync(persistTo, { recursive: true, force: true })
}
console.log(JSON.stringify(figures))
