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
 * pairs: each iteration sends one request down every path in turn, and a round's added latency is the
 * median of its per-iteration differences tunnel − direct. Concurrency 32 alternates the paths within each
 * round; a round's throughput ratio is tunnel ÷ direct of that round. The three target figures are the
 * medians over `--rounds` (default 3) of the per-round figures (each round's figure is reported too). It
 * also reports the CPU milliseconds per request of workerd, of this process (the load generator) and of
 * the runner processes (summed over all rounds).
 *
 * `--runner-b DIR`: DIR is another checkout of this repo (e.g. `git worktree add` of main, with a
 * `node_modules` link); its runner answers a third tunnel path, `tunnel_b`, with the same options as
 * `tunnel`'s — two runner builds side by side against the same edge (`tunnel_b_*` figures).
 *
 * `--edge-b BUNDLE`: BUNDLE is another edge build (`npx wrangler deploy --dry-run --outdir DIR` of another
 * checkout; DIR/index.js). It runs in a second stack of its own (its own workerd, stub engine and runner
 * with this checkout's runner code; no v1 runner), and its `direct` and `tunnel` paths join the rotation as
 * `edge_b_direct` and `edge_b_tunnel`: two edge builds' tunnel costs side by side in one run, each against
 * its own direct call (`edge_b_*` figures; CPU is charged to each stack's own workerd and runner).
 * `--edge-b-runner DIR` (with `--edge-b`): the second stack's runner runs checkout DIR's runner code, so the
 * second stack is a whole other build (e.g. main's bundle and a detached worktree of main): before/after of
 * a change on both ends in one alternating run. `--edge-a BUNDLE` / `--edge-a-runner DIR` do the same for the
 * first stack, so the builds can swap places (a null run, the same build in both, showed the first stack
 * slower at load 6–14 while it also ran the v1 runner; that runner now starts only when `tunnel_v1` is measured).
 *
 * Warm-up (`--warmup N`, default 1500; 0: none): before the first size's figures, one paired concurrency-1
 * round on the fresh processes is reported as `cold` (not judged), then N requests per path at concurrency 32
 * warm every process. A runner serves calls for hours; its first ~1,000 calls run V8's baseline code (its
 * CPU per call at concurrency 1 fell from 1.4 to 0.65 ms over the first 1,250 calls in this stack), so
 * without the warm-up the 2 KB figures, measured first, judged a cold runner.
 *
 * CPU per call at concurrency 1 (`c1_cpu_ms`): the paired rounds charge each stack's workerd and runner CPU
 * to its own paths; with `--paths direct,tunnel` a stack's workerd figure is per direct + tunnel pair (the
 * direct call's share is the same code in both stacks) and its runner figure per tunnelled call.
 *
 * Every loop is bounded in count and time. Last line: one JSON object with every figure, and
 * `targets` (issue #10, item 3): the tunnel adds ≤ 1.5 ms p50 over the direct edge call at 2 KB and
 * ≤ 3 ms at 54 KB (concurrency 1), and tunnelled throughput is ≥ 0.8× direct (concurrency 32), each
 * with its measured value and whether it is met.
 */
import { Agent } from 'node:http'
import { loadavg } from 'node:os'
import { parseArgs } from '../scripts/lib/cli-args.ts'
import { chatBody } from './lib/chat-bodies.ts'
import { type LoadResult, type LoadTarget, once, runLoad } from './lib/load.ts'
import { cpuMs, workerdPids } from './lib/proc-stats.ts'
import { SESSIONS_PER_ROUTE, startTunnelStack, type TunnelStack } from './lib/tunnel-stack.ts'
import { median as medianOf, percentile } from './lib/stats.ts'

const SIZES: Record<string, number> = { '2KB': 2 * 1024, '54KB': 54 * 1024, '524KB': 524 * 1024 }

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    'c1-count': { type: 'string', default: '150' },
    'c32-count': { type: 'string', default: '640' },
    'max-seconds': { type: 'string', default: '15' },
    /** `miniflare` (workerd directly) or `wrangler` (`wrangler dev`, adds its dev-server proxy). */
    runtime: { type: 'string', default: 'miniflare' },
    sizes: { type: 'string', default: '2KB,54KB' },
    /** Paths to measure (`direct` and `tunnel` always are): upstream, bare_session, direct, tunnel_v1, tunnel. */
    paths: { type: 'string', default: 'upstream,bare_session,direct,tunnel_v1,tunnel' },
    'runner-b': { type: 'string' },
    'edge-b': { type: 'string' },
    'edge-b-runner': { type: 'string' },
    'edge-a': { type: 'string' },
    'edge-a-runner': { type: 'string' },
    /** Requests per path at concurrency 32 before anything is measured (once per run): JIT-warm processes. */
    warmup: { type: 'string', default: '1500' },
  },
})

/** Median of numbers (the mean of the middle two for an even count). */
function median(results: LoadResult[]): LoadResult {
  const pick = (key: keyof LoadResult) => medianOf(results.map((r) => r[key]))
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

/**
 * The paths in a different order each time (`i`-th rotation): work one path leaves behind (garbage,
 * timers, hibernation) must not always be charged to the same next path.
 */
function rotated<T>(items: T[], i: number): T[] {
  const shift = i % items.length
  return [...items.slice(shift), ...items.slice(0, shift)]
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
  const entries = Object.entries(targets)
  for (let i = 0; i < options.count && performance.now() < deadline; i++) {
    for (const [name, target] of rotated(entries, i)) {
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
const stack = await startTunnelStack({
  runtime: values.runtime === 'wrangler' ? 'wrangler' : 'miniflare',
  // The v1 runner (and its sessions) only when its path is measured: both stacks then carry the same load.
  v1: (values.paths ?? '').split(',').includes('tunnel_v1'),
  ...(values['edge-a'] ? { scriptPath: values['edge-a'] } : {}),
  ...(values['edge-a-runner'] ? { runnerFrom: values['edge-a-runner'] } : {}),
  // The per-request log lines would drown the figures (warnings and errors still show).
  onLog: (level, message) => {
    if (level === 'warn' || level === 'error') console.error(message)
  },
  ...(values['runner-b'] ? { runnerB: values['runner-b'] } : {}),
})
const { runner, runnerV1, runnerB, tokens } = stack
console.log(`edge runtime: ${values.runtime} at ${stack.edge.url}; upstream stub at ${stack.stubUrl}`)
const workerdA = workerdPids()
let stackB: TunnelStack | null = null
let workerdB: number[] = []
if (values['edge-b']) {
  try {
    stackB = await startTunnelStack({
      scriptPath: values['edge-b'],
      v1: false,
      ...(values['edge-b-runner'] ? { runnerFrom: values['edge-b-runner'] } : {}),
      onLog: (level, message) => {
        if (level === 'warn' || level === 'error') console.error(message)
      },
    })
  } catch (error) {
    await stack.stop()
    throw error
  }
  workerdB = workerdPids().filter((pid) => !workerdA.includes(pid))
  console.log(`edge B (${values['edge-b']}) at ${stackB.edge.url}`)
}
const figures: Record<string, unknown> = { runtime: values.runtime, sessions_per_route: SESSIONS_PER_ROUTE, loadavg_start: loadavg() }
/** Tunnel paths and the direct path each is compared with (`tunnel_b` only with `--runner-b`, `edge_b_*` with `--edge-b`). */
const BASE: Record<string, string> = { tunnel: 'direct', tunnel_v1: 'direct', tunnel_b: 'direct', edge_b_tunnel: 'edge_b_direct' }
const TUNNELS = Object.keys(BASE)
/** Whether the run's warm-up (`--warmup`) is done. */
let warmed = false
try {
  const rounds = Math.max(1, Number(values.rounds))
  const maxMs = Number(values['max-seconds']) * 1000
  for (const sizeName of (values.sizes ?? '').split(',').filter((name) => name in SIZES)) {
    const body = Buffer.from(JSON.stringify(chatBody(SIZES[sizeName] as number)))
    const viaEdgeB =
      (on: TunnelStack, tokens: string[]) =>
      (worker: number): LoadTarget => ({
        url: `${on.edge.url}/v1/chat/completions`,
        headers: { authorization: `Bearer ${tokens[worker % tokens.length]}` },
        body,
      })
    const viaEdge = (tokens: string[]) => viaEdgeB(stack, tokens)
    const allTargets: Record<string, (worker: number) => LoadTarget> = {
      upstream: () => ({ url: `${stack.stubUrl}/v1/chat/completions`, headers: {}, body }),
      bare_session: viaEdge(tokens.bare),
      direct: viaEdge(tokens.direct),
      tunnel_v1: viaEdge(tokens.tunnel_v1),
      tunnel: viaEdge(tokens.tunnel),
      tunnel_b: viaEdge(tokens.tunnel_b),
      ...(stackB
        ? {
            edge_b_direct: viaEdgeB(stackB, stackB.tokens.direct),
            edge_b_tunnel: viaEdgeB(stackB, stackB.tokens.tunnel),
          }
        : {}),
    }
    const wanted = new Set([
      'direct',
      'tunnel',
      ...(values.paths ?? '').split(','),
      ...(runnerB ? ['tunnel_b'] : []),
      ...(stackB ? ['edge_b_direct', 'edge_b_tunnel'] : []),
    ])
    const targets = Object.fromEntries(Object.entries(allTargets).filter(([name]) => wanted.has(name)))
    const tunnels = TUNNELS.filter((name) => name in targets)

    // Concurrency 1: paired, in rounds; a round's added latency is the median of its paired differences.
    const c1Count = Number(values['c1-count'])
    const first = Object.fromEntries(Object.entries(targets).map(([name, target]) => [name, target(0)]))
    const warmup = Number(values.warmup)
    if (!warmed && warmup > 0) {
      warmed = true
      // Once per run: one paired round on cold processes (reported, not judged), then every path warm.
      const cold = await pairedLoad(first, { count: c1Count, maxMs })
      const l = cold.latencies as Record<string, number[]>
      figures.cold = {
        size: sizeName,
        iterations: l.direct?.length,
        errors: cold.errors,
        added_p50_ms: Object.fromEntries(
          tunnels.map((name) => [name, round3(pairedDiff(l[name] as number[], l[BASE[name] as string] as number[]))]),
        ),
      }
      console.log(
        `cold      ${sizeName} c=1, first ${l.direct?.length} iterations: added p50 ms ${Object.entries(
          (figures.cold as { added_p50_ms: Record<string, number> }).added_p50_ms,
        )
          .map(([name, value]) => `${name} ${value}`)
          .join(' | ')}`,
      )
      for (const [, target] of Object.entries(targets)) await runLoad(target, { concurrency: 32, count: warmup, maxMs: maxMs * 4 })
    }
    await pairedLoad(first, { count: 20, maxMs })
    const all: Record<string, number[]> = Object.fromEntries(Object.keys(targets).map((name) => [name, []]))
    const addedRounds: Record<string, number[]> = Object.fromEntries([...tunnels, 'admission'].map((name) => [name, []]))
    let c1Errors = 0
    const c1Cpu = { a: { workerd: 0, runner: 0 }, b: { workerd: 0, runner: 0 }, iterations: 0 }
    for (let r = 0; r < rounds; r++) {
      const cpu0 = {
        wa: cpuMs(workerdA),
        ra: cpuMs([runner.pid]),
        wb: stackB ? cpuMs(workerdB) : 0,
        rb: stackB ? cpuMs([stackB.runner.pid]) : 0,
      }
      const paired = await pairedLoad(first, { count: c1Count, maxMs })
      c1Cpu.a.workerd += cpuMs(workerdA) - cpu0.wa
      c1Cpu.a.runner += cpuMs([runner.pid]) - cpu0.ra
      if (stackB) {
        c1Cpu.b.workerd += cpuMs(workerdB) - cpu0.wb
        c1Cpu.b.runner += cpuMs([stackB.runner.pid]) - cpu0.rb
      }
      c1Cpu.iterations += paired.latencies.direct?.length ?? 0
      c1Errors += paired.errors
      const l = paired.latencies as Record<string, number[]>
      for (const [name, list] of Object.entries(l)) all[name]?.push(...list)
      for (const name of tunnels) addedRounds[name]?.push(pairedDiff(l[name] as number[], l[BASE[name] as string] as number[]))
      if (l.bare_session) addedRounds.admission?.push(pairedDiff(l.direct as number[], l.bare_session))
    }
    const added = (name: string) => {
      const list = addedRounds[name] ?? []
      return list.length ? round3(medianOf(list)) : null
    }
    const p50s = Object.fromEntries(Object.entries(all).map(([name, list]) => [name, round3(percentile(list, 50))]))
    const c1Key = `${sizeName}_c1`
    figures[c1Key] = {
      body_bytes: body.length,
      iterations: all.direct?.length,
      errors: c1Errors,
      p50_ms: p50s,
      p99_ms: Object.fromEntries(Object.entries(all).map(([name, list]) => [name, round3(percentile(list, 99))])),
      tunnel_added_p50_ms: added('tunnel'),
      tunnel_added_p50_ms_rounds: (addedRounds.tunnel ?? []).map(round3),
      tunnel_v1_added_p50_ms: added('tunnel_v1'),
      ...(runnerB
        ? { tunnel_b_added_p50_ms: added('tunnel_b'), tunnel_b_added_p50_ms_rounds: (addedRounds.tunnel_b ?? []).map(round3) }
        : {}),
      ...(stackB
        ? {
            edge_b_tunnel_added_p50_ms: added('edge_b_tunnel'),
            edge_b_tunnel_added_p50_ms_rounds: (addedRounds.edge_b_tunnel ?? []).map(round3),
          }
        : {}),
      admission_added_p50_ms: added('admission'),
      c1_cpu_ms: {
        workerd_per_iteration: round3(c1Cpu.a.workerd / Math.max(1, c1Cpu.iterations)),
        runner_per_tunnel_call: round3(c1Cpu.a.runner / Math.max(1, c1Cpu.iterations)),
        ...(stackB
          ? {
              edge_b_workerd_per_iteration: round3(c1Cpu.b.workerd / Math.max(1, c1Cpu.iterations)),
              edge_b_runner_per_tunnel_call: round3(c1Cpu.b.runner / Math.max(1, c1Cpu.iterations)),
            }
          : {}),
      },
    }
    const c1 = figures[c1Key] as Record<string, number>
    console.log(
      `${c1Key.padEnd(9)} p50 ms: ${Object.entries(p50s)
        .map(([name, value]) => `${name} ${value.toFixed(2)}`)
        .join(' | ')} | paired, median of ${rounds} rounds: tunnel adds ${c1.tunnel_added_p50_ms} ms (${(addedRounds.tunnel ?? [])
        .map((n) => n.toFixed(2))
        .join(' ')}), v1 adds ${c1.tunnel_v1_added_p50_ms ?? '-'} ms${runnerB ? `, b adds ${c1.tunnel_b_added_p50_ms} ms` : ''}${
        stackB
          ? `, edge B's tunnel adds ${c1.edge_b_tunnel_added_p50_ms} ms (${(addedRounds.edge_b_tunnel ?? []).map((n) => n.toFixed(2)).join(' ')})`
          : ''
      } (errors ${c1Errors})`,
    )
    const cc = (c1 as unknown as { c1_cpu_ms: Record<string, number> }).c1_cpu_ms
    console.log(
      `${c1Key.padEnd(9)} CPU ms per iteration (workerd) / per tunnelled call (runner): ${cc.workerd_per_iteration} / ${cc.runner_per_tunnel_call}${
        stackB ? ` | edge B ${cc.edge_b_workerd_per_iteration} / ${cc.edge_b_runner_per_tunnel_call}` : ''
      }`,
    )

    // Concurrency 32: rounds, alternating the paths so drift hits all of them alike.
    const concurrency = 32
    const count = Number(values['c32-count'])
    const results: Record<string, LoadResult[]> = {}
    const runnerPids: Record<string, number[]> = {
      tunnel: [runner.pid],
      tunnel_v1: runnerV1 ? [runnerV1.pid] : [],
      tunnel_b: runnerB ? [runnerB.pid] : [],
      ...(stackB ? { edge_b_tunnel: [stackB.runner.pid], edge_b_direct: [stackB.runner.pid] } : {}),
    }
    const allRunners = [runner.pid, ...(runnerV1 ? [runnerV1.pid] : []), ...(runnerB ? [runnerB.pid] : [])]
    /** Each path is charged the CPU of its own stack's workerd. */
    const workerdOf = (name: string) => (name.startsWith('edge_b_') ? workerdB : workerdA)
    const cpu: Record<string, { workerd: number; node: number; runner: number; requests: number }> = {}
    for (const [name, target] of Object.entries(targets)) {
      await runLoad(target, { concurrency, count: Math.min(count, 40), maxMs })
      results[name] = []
      cpu[name] = { workerd: 0, node: 0, runner: 0, requests: 0 }
    }
    for (let r = 0; r < rounds; r++) {
      for (const [name, target] of rotated(Object.entries(targets), r)) {
        // A tunnel path is charged its own runner's CPU; the others all runners' (idle ones: heartbeats).
        const pids = runnerPids[name] ?? allRunners
        const workerd = workerdOf(name)
        const w0 = cpuMs(workerd)
        const r0 = cpuMs(pids)
        const n0 = process.cpuUsage()
        const result = await runLoad(target, { concurrency, count, maxMs })
        const n1 = process.cpuUsage(n0)
        const spent = cpu[name] as { workerd: number; node: number; runner: number; requests: number }
        spent.workerd += cpuMs(workerd) - w0
        spent.runner += cpuMs(pids) - r0
        spent.node += (n1.user + n1.system) / 1000
        spent.requests += result.requests
        results[name]!.push(result)
      }
    }
    const merged = Object.fromEntries(Object.entries(results).map(([name, list]) => [name, median(list)])) as Record<string, LoadResult>
    const key = `${sizeName}_c${concurrency}`
    const d = merged.direct as LoadResult
    const t = merged.tunnel as LoadResult
    const v1 = merged.tunnel_v1
    /** Per round: that round's tunnel ÷ direct throughput. */
    const ratioRounds = (name: string) =>
      (results[name] ?? []).map((result, r) =>
        round3(result.throughput / ((results[BASE[name] as string] as LoadResult[])[r] as LoadResult).throughput),
      )
    const ratio = (name: string) => (results[name] ? round3(medianOf(ratioRounds(name))) : null)
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
      tunnel_throughput_ratio: ratio('tunnel'),
      tunnel_throughput_ratio_rounds: ratioRounds('tunnel'),
      tunnel_v1_throughput_ratio: ratio('tunnel_v1'),
      ...(runnerB ? { tunnel_b_throughput_ratio: ratio('tunnel_b'), tunnel_b_throughput_ratio_rounds: ratioRounds('tunnel_b') } : {}),
      ...(stackB
        ? {
            edge_b_tunnel_added_p50_ms: round3((merged.edge_b_tunnel as LoadResult).p50 - (merged.edge_b_direct as LoadResult).p50),
            edge_b_throughput_ratio: ratio('edge_b_tunnel'),
            edge_b_throughput_ratio_rounds: ratioRounds('edge_b_tunnel'),
          }
        : {}),
    }
    const c = perRequest as Record<string, { workerd: number; runner: number }>
    const f = figures[key] as Record<string, number | null>
    const b = merged.tunnel_b
    console.log(
      `${key.padEnd(9)} req/s: direct ${d.throughput.toFixed(0)} | tunnel ${t.throughput.toFixed(0)} (median ratio ${f.tunnel_throughput_ratio}×: ${ratioRounds('tunnel').join(' ')}) | v1 ${v1 ? `${v1.throughput.toFixed(0)} (${f.tunnel_v1_throughput_ratio}×)` : '-'}${b ? ` | b ${b.throughput.toFixed(0)} (${f.tunnel_b_throughput_ratio}×)` : ''} | errors ${Object.values(merged).reduce((sum, m) => sum + m.errors, 0)} | CPU ms/req workerd+runner: direct ${c.direct?.workerd}+${c.direct?.runner} tunnel ${c.tunnel?.workerd}+${c.tunnel?.runner} v1 ${c.tunnel_v1?.workerd}+${c.tunnel_v1?.runner}${b ? ` b ${c.tunnel_b?.workerd}+${c.tunnel_b?.runner}` : ''}`,
    )
    if (stackB)
      console.log(
        `${key.padEnd(9)} edge B req/s: direct ${merged.edge_b_direct?.throughput.toFixed(0)} | tunnel ${merged.edge_b_tunnel?.throughput.toFixed(0)} (median ratio ${f.edge_b_throughput_ratio}×: ${ratioRounds('edge_b_tunnel').join(' ')}) | CPU ms/req workerd+runner: direct ${c.edge_b_direct?.workerd}+${c.edge_b_direct?.runner} tunnel ${c.edge_b_tunnel?.workerd}+${c.edge_b_tunnel?.runner}`,
      )
  }
  figures.targets = targets(figures)
  console.log(
    `targets (medians of ${rounds} rounds): ${Object.entries(figures.targets as Record<string, Target>)
      .map(([name, t]) => `${name} ${t.value} (${t.kind} ${t.limit}) ${t.met === null ? 'not run' : t.met ? 'met' : 'MISSED'}`)
      .join(' | ')}`,
  )
  figures.tunnel_requests_served = {
    tunnel: (await runner.stats()).tunnelRequests,
    ...(runnerV1 ? { tunnel_v1: (await runnerV1.stats()).tunnelRequests } : {}),
    ...(runnerB ? { tunnel_b: (await runnerB.stats()).tunnelRequests } : {}),
    ...(stackB ? { edge_b_tunnel: (await stackB.runner.stats()).tunnelRequests } : {}),
  }
  figures.loadavg_end = loadavg()
  const status = (await (await stack.admin('/rollout/status')).json()) as { nodes: { nodes: { node_id: string; healthy: boolean }[] } }
  figures.runner_healthy_at_end = status.nodes.nodes.find((node) => node.node_id === 'bench-runner')?.healthy ?? false
} finally {
  await stackB?.stop()
  await stack.stop()
}
console.log(JSON.stringify(figures))
