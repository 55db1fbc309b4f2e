/**
 * @module
 * `npm run bench:gateway`: what the edge costs over the floor of its own runtime. Three targets in one
 * run, alternating: **direct** (the vLLM-shaped stub upstream alone), **floor** (`bench/floor-worker.js`,
 * a bare Worker in the same Miniflare that parses the request, forwards it to the same stub, parses the
 * answer and returns a small JSON; no storage), **durable_floor** (the same Worker plus the least a durable
 * capture needs in workerd: a Durable Object round trip before the engine call and a SQLite commit of the
 * request and token data after it, before answering), **onehop_floor** (the same capture with the engine
 * call made by the Durable Object itself: one round trip carrying the request bytes in and the small answer
 * out) and **edge** (Rollgate, durable capture in the
 * session Durable Object). The targets are ratios to the floor; the ratios to the durable floor
 * show how much of the gap is the runtime's price of durability rather than the edge's code. For ~2 KB, ~54 KB and ~524 KB chat requests: added p50 over direct at concurrency 1,
 * p99, throughput at concurrency 16, and workerd CPU ms per request (utime + stime from /proc around each
 * phase). Every figure is a median over `--reps` alternating repetitions (order rotated per rep), and
 * the edge's are read as ratios to the floor measured minutes apart: the machine is shared and loaded,
 * so absolute numbers drift, the ratios much less.
 *
 * `--long N` then sends N more 2 KB requests at concurrency 16 through the edge and reports workerd RSS
 * at its start, peak and end (state lives in the Durable Object's SQLite: memory must stay flat), with
 * throughput and CPU per call for each tenth of the run (does a call get dearer as the sessions grow?).
 * `--heap` (on with `--long`) opens workerd's inspector and adds each isolate's V8 heap: in use, and what a full
 * collection leaves (`live`), at the long run's start and end and after the run; the RSS after that collection
 * tells V8's uncollected garbage from what workerd really keeps. `--gc-trace` times every V8 collection
 * (`bench/lib/gc-trace.ts`) and adds, per target at c=1, how often a full collection came, its pause, and
 * whether the slowest 1 % of the calls are the ones that held one (`tail_c1.gc`).
 * Afterwards every session's completion count is read back: each successful edge call must be stored.
 * `--persist-dir /dev/shm` keeps the objects' SQLite on tmpfs (see the option).
 *
 * Last line: one JSON object with the ratios (and the raw medians).
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { numberOption, parseArgs, usageError } from '../scripts/lib/cli-args.ts'
import { startMiniflareEdge } from '../scripts/lib/miniflare-edge.ts'
import { REPO_ROOT } from '../scripts/lib/processes.ts'
import { chatBody } from './lib/chat-bodies.ts'
import { type LoadResult, type LoadTarget, runLoad, type Sample } from './lib/load.ts'
import { GcTrace, enableGcTrace, gcDuringCalls } from './lib/gc-trace.ts'
import { type HeapFigures, heapUsageAndLive, workerTarget } from './lib/isolate-heap.ts'
import { cpuMs, rssMb, workerdPids } from './lib/proc-stats.ts'
import { startStub } from './lib/start-stub.ts'
import { median } from './lib/stats.ts'

const ADMIN_TOKEN = 'bench-admin-token'
const SIZES = [
  { name: '2KB', bytes: 2 * 1024 },
  { name: '54KB', bytes: 54 * 1024 },
  { name: '524KB', bytes: 524 * 1024 },
]
/** Issue #10's targets, relative to the floor. */
const TARGETS = { added_p50_ratio_max: 1.3, p99_over_p50_max: 3, throughput_ratio_min: 0.75 }

const ARGS = {
  options: {
    reps: { type: 'string', default: '3' },
    'c1-count': { type: 'string', default: '150' },
    'c16-count': { type: 'string', default: '600' },
    /**
     * Requests per target at c=16 before the first figures, with the first size's body: a service that has
     * served thousands of calls, not the first few hundred of a fresh isolate (V8 optimizes a function only
     * after many calls, and the edge has far more code than the floors). The calls before it are reported
     * as `cold` (not judged). 0: none.
     */
    warmup: { type: 'string', default: '1500' },
    'max-seconds': { type: 'string', default: '30' },
    sizes: { type: 'string', default: '2KB,54KB,524KB' },
    /** Requests of the long run (0: none). */
    long: { type: 'string', default: '0' },
    'long-max-seconds': { type: 'string', default: '1800' },
    /**
     * Where Miniflare keeps the Durable Objects' SQLite (default: the OS temp dir). Each capture commits
     * (fsync) before its answer; on a busy shared disk that wait dominates the edge's latency, so
     * `--persist-dir /dev/shm` (tmpfs) separates the code's cost from the disk's.
     */
    'persist-dir': { type: 'string', default: tmpdir() },
    /**
     * Sessions the edge's (and the durable floor's) load is spread over, one per concurrent worker by default;
     * `--sessions 1` sends all 16 concurrent calls to one session object (does one object serialize them?).
     */
    sessions: { type: 'string', default: '16' },
    /** Isolate heaps over workerd's inspector (on with `--long`). */
    heap: { type: 'boolean', default: false },
    /** Time V8's collections against the calls (diagnosis; Linux + coreutils). */
    'gc-trace': { type: 'boolean', default: false },
    /** A prebuilt edge bundle (`npx wrangler deploy --dry-run --outdir DIR` of another version): before/after runs. */
    'edge-bundle': { type: 'string' },
  },
} as const
const { values } = parseArgs(ARGS)
// Every value checked before anything starts (a typo must not cost a stack's start-up, nor run zero requests).
const SIZE_NAMES = (values.sizes ?? '').split(',')
for (const name of SIZE_NAMES) {
  if (!SIZES.some((size) => size.name === name)) {
    usageError(ARGS, `--sizes takes a comma-separated list of ${SIZES.map((size) => size.name).join(', ')}; got "${name}"`)
  }
}
const REPS = numberOption(ARGS, 'reps', values.reps, { integer: true, min: 1 })
const C1_COUNT = numberOption(ARGS, 'c1-count', values['c1-count'], { integer: true, min: 1 })
const C16_COUNT = numberOption(ARGS, 'c16-count', values['c16-count'], { integer: true, min: 1 })
const WARMUP = numberOption(ARGS, 'warmup', values.warmup, { integer: true, min: 0 })
const MAX_SECONDS = numberOption(ARGS, 'max-seconds', values['max-seconds'], { min: 1 })
const LONG = numberOption(ARGS, 'long', values.long, { integer: true, min: 0 })
const LONG_MAX_SECONDS = numberOption(ARGS, 'long-max-seconds', values['long-max-seconds'], { min: 1 })
const SESSIONS = numberOption(ARGS, 'sessions', values.sessions, { integer: true, min: 1 })
const HEAP = values.heap === true || LONG > 0
/** The long run is measured in tenths (throughput and CPU per call of each). */
const LONG_SEGMENTS = 10

type TargetName = 'direct' | 'floor' | 'durable_floor' | 'onehop_floor' | 'edge'
interface Phase extends LoadResult {
  cpu_ms_per_request: number | null
}

async function createSession(edgeUrl: string, upstreamUrl: string): Promise<{ token: string; session_id: string }> {
  const response = await fetch(`${edgeUrl}/v1/sessions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ upstream: { url: upstreamUrl, kind: 'vllm', served_model: 'Qwen/Qwen3-8B' } }),
  })
  if (response.status !== 201) throw new Error(`session create failed: ${response.status} ${await response.text()}`)
  return (await response.json()) as { token: string; session_id: string }
}

const r3 = (n: number) => Math.round(n * 1000) / 1000

/** Mean server-timing phases (and the rest of the latency, `outside`) of the median calls and of the slowest 1 %. */
function tailSplit(samples: Sample[]) {
  const sorted = [...samples].filter((sample) => sample.serverTiming).sort((a, b) => a.ms - b.ms)
  const split = (slice: Sample[]) => {
    const sums: Record<string, number> = { total: 0, prepare: 0, upstream: 0, capture: 0, outside: 0 }
    for (const sample of slice) {
      let inside = 0
      for (const match of (sample.serverTiming as string).matchAll(/(\w+);dur=([\d.]+)/g)) {
        const value = Number(match[2])
        sums[match[1] as string] = (sums[match[1] as string] ?? 0) + value
        inside += value
      }
      sums.total = (sums.total as number) + sample.ms
      sums.outside = (sums.outside as number) + sample.ms - inside
    }
    return Object.fromEntries(Object.entries(sums).map(([key, value]) => [key, r3(value / Math.max(1, slice.length))]))
  }
  const n = sorted.length
  const slowest = sorted.slice(Math.floor(n * 0.99))
  return {
    calls: n,
    median_band: split(sorted.slice(Math.floor(n * 0.45), Math.ceil(n * 0.55))),
    slowest_1pct: split(slowest),
    /** Each slow call's place in its run of calls (0: the run's first call, after the other targets' runs). */
    slowest_positions: slowest.map((sample) => sample.position ?? -1),
  }
}
const r2 = (n: number) => Math.round(n * 100) / 100

const stub = await startStub()
const persistTo = mkdtempSync(join(values['persist-dir'] ?? tmpdir(), 'rollgate-bench-'))
const gcTrace = values['gc-trace'] ? new GcTrace() : null
const restoreEnv = gcTrace ? enableGcTrace() : () => {}
const edge = await startMiniflareEdge({
  inspector: HEAP,
  persistTo,
  ...(values['edge-bundle'] ? { scriptPath: values['edge-bundle'] } : {}),
  vars: { ROLLGATE_ADMIN_TOKEN: ADMIN_TOKEN, ROLLGATE_SIGNING_KEY: 'bench-signing-key' },
  // The edge's one line per request would flood stdout (and this process): keep only warnings and errors.
  onLog: (level, message) => {
    if (gcTrace?.note(message)) return
    if (level === 'warn' || level === 'error') console.error(message)
  },
  extraWorkers: [
    {
      name: 'floor',
      scriptPath: join(REPO_ROOT, 'bench/floor-worker.js'),
      routes: ['*/floor/*', '*/floor-durable/*', '*/floor-onehop/*'],
      bindings: { FLOOR_UPSTREAM_URL: stub.url },
      durableObjects: { FLOOR_SESSIONS: 'FloorSession' },
    },
  ],
})
restoreEnv()
const pids = workerdPids()
// One cheap request to each isolate: the turn workerd runs an inspector-requested collection on.
const pokeEdge = () => fetch(`${edge.url}/health`).then((response) => response.arrayBuffer())
const pokeFloor = () =>
  fetch(`${edge.url}/floor/v1/chat/completions`, { method: 'POST', body: '{}' }).then((response) => response.arrayBuffer())
const isolateHeap = async (worker: '' | 'floor') =>
  heapUsageAndLive(await workerTarget(edge.inspectorUrl as string, worker), worker === '' ? pokeEdge : pokeFloor)
console.log(`edge + floor in Miniflare at ${edge.url} (workerd pids ${pids.join(',')}); stub upstream at ${stub.url}`)
const loadStart = loadavg()[0] as number
let edgeSucceeded = 0
let result: Record<string, unknown> = {}
try {
  const reps = REPS
  const maxMs = MAX_SECONDS * 1000
  const sessions = await Promise.all(Array.from({ length: SESSIONS }, () => createSession(edge.url, stub.url)))
  const tokens = sessions.map((session) => session.token)
  const sizes = SIZES.filter((size) => SIZE_NAMES.includes(size.name))

  const targetsFor =
    (name: TargetName, body: Buffer) =>
    (worker: number): LoadTarget => {
      if (name === 'direct') return { url: `${stub.url}/v1/chat/completions`, headers: {}, body }
      if (name === 'floor') return { url: `${edge.url}/floor/v1/chat/completions`, headers: {}, body }
      if (name === 'durable_floor') {
        return { url: `${edge.url}/floor-durable/v1/chat/completions`, headers: { 'x-floor-session': `s${worker % SESSIONS}` }, body }
      }
      if (name === 'onehop_floor') {
        return { url: `${edge.url}/floor-onehop/v1/chat/completions`, headers: { 'x-floor-session': `h${worker % SESSIONS}` }, body }
      }
      return { url: `${edge.url}/v1/chat/completions`, headers: { authorization: `Bearer ${tokens[worker % SESSIONS]}` }, body }
    }
  const phase = async (name: TargetName, body: Buffer, concurrency: number, count: number, samples?: Sample[]): Promise<Phase> => {
    const cpuBefore = cpuMs(pids)
    const mine: Sample[] = []
    const load = await runLoad(targetsFor(name, body), { concurrency, count, maxMs, ...(samples ? { samples: mine } : {}) })
    if (concurrency === 1) c1Calls[name].push(...mine)
    // Where in its run each call came (the slowest ones' positions tell a cold start from a steady tail).
    for (const [position, sample] of mine.entries()) samples?.push({ ...sample, position })
    const cpu = cpuMs(pids) - cpuBefore
    if (name === 'edge') edgeSucceeded += load.requests - load.errors
    if (load.errors > 0) console.log(`  ${name}: ${load.errors} errors of ${load.requests}`)
    return { ...load, cpu_ms_per_request: name === 'direct' ? null : r3(cpu / Math.max(1, load.requests)) }
  }

  let c1Calls: Record<TargetName, Sample[]> = { direct: [], floor: [], durable_floor: [], onehop_floor: [], edge: [] }
  const perSize: Record<string, unknown> = {}
  const raw: Record<string, unknown> = {}
  const ORDER: TargetName[] = ['direct', 'floor', 'durable_floor', 'onehop_floor', 'edge']
  // Cold: each target's first c=1 calls on the fresh workerd (first size), then the warm-up at c=16 with the
  // same body, so the judged figures are of warmed code. (A warm-up with every size in turn was followed, in two
  // quiet runs, by 2 KB c=16 edge calls costing 2.03-2.10 CPU ms against 1.65 without it: sessions that had
  // served 524 KB calls then served 2 KB ones. The later sizes run on code the earlier ones warmed.)
  const bodies = sizes.map((size) => Buffer.from(JSON.stringify(chatBody(size.bytes))))
  let cold: Record<string, unknown> | null = null
  if (WARMUP > 0 && bodies[0]) {
    const coldRuns = {} as Record<TargetName, Phase>
    for (const name of ORDER) coldRuns[name] = await phase(name, bodies[0], 1, Math.min(C1_COUNT, 50))
    const added = (name: TargetName) => coldRuns[name].p50 - coldRuns.direct.p50
    cold = {
      size: sizes[0]?.name,
      calls_per_target: Math.min(C1_COUNT, 50),
      floor_added_p50_ms: r3(added('floor')),
      edge_added_p50_ms: r3(added('edge')),
      added_p50_ratio: r2(added('edge') / Math.max(0.01, added('floor'))),
      durable_floor_added_p50_ratio: r2(added('durable_floor') / Math.max(0.01, added('floor'))),
    }
    for (const name of ORDER) {
      const load = await runLoad(targetsFor(name, bodies[0]), { concurrency: 16, count: WARMUP, maxMs })
      if (name === 'edge') edgeSucceeded += load.requests - load.errors
      if (load.errors > 0) console.log(`  warm-up ${name}: ${load.errors} errors of ${load.requests}`)
    }
  }
  for (const [index, size] of sizes.entries()) {
    const body = bodies[index] as Buffer
    const byConcurrency: Record<number, Record<TargetName, Phase[]>> = {}
    const edgeSamples: Sample[] = []
    // Every target's c=1 calls (times and latencies), for lining them up with V8's collections (`--gc-trace`).
    c1Calls = { direct: [], floor: [], durable_floor: [], onehop_floor: [], edge: [] }
    for (const concurrency of [1, 16]) {
      const count = concurrency === 1 ? C1_COUNT : C16_COUNT
      for (const name of ORDER) await phase(name, body, concurrency, Math.min(count, 50)) // warm: JIT, sockets, objects
      const runs: Record<TargetName, Phase[]> = { direct: [], floor: [], durable_floor: [], onehop_floor: [], edge: [] }
      for (let rep = 0; rep < reps; rep++) {
        // Rotate the order per rep so no target always runs first (or right after another).
        for (let i = 0; i < ORDER.length; i++) {
          const name = ORDER[(rep + i) % ORDER.length] as TargetName
          const samples = concurrency === 1 ? (name === 'edge' ? edgeSamples : []) : undefined
          runs[name].push(await phase(name, body, concurrency, count, samples))
        }
      }
      byConcurrency[concurrency] = runs
    }
    const c1 = byConcurrency[1] as Record<TargetName, Phase[]>
    const c16 = byConcurrency[16] as Record<TargetName, Phase[]>
    // Per rep: added p50 over direct of the same rep, then the edge's ratio to the floor's; median over reps.
    const floorAdded = c1.floor.map((run, i) => run.p50 - (c1.direct[i] as Phase).p50)
    const edgeAdded = c1.edge.map((run, i) => run.p50 - (c1.direct[i] as Phase).p50)
    const durableAdded = c1.durable_floor.map((run, i) => run.p50 - (c1.direct[i] as Phase).p50)
    const addedRatio = median(edgeAdded.map((added, i) => added / Math.max(0.01, floorAdded[i] as number)))
    const throughputRatio = median(c16.edge.map((run, i) => run.throughput / (c16.floor[i] as Phase).throughput))
    const perRep = (of: number[], to: number[]) => r2(median(of.map((value, i) => value / Math.max(0.01, to[i] as number))))
    const reqS = (runs: Phase[]) => runs.map((run) => run.throughput)
    const pick = (runs: Phase[], key: keyof Phase) => r3(median(runs.map((run) => run[key] as number)))
    const figures = {
      body_bytes: body.length,
      floor_added_p50_ms: r3(median(floorAdded)),
      edge_added_p50_ms: r3(median(edgeAdded)),
      added_p50_ratio: r2(addedRatio),
      edge_p50_c1_ms: pick(c1.edge, 'p50'),
      edge_p99_c1_ms: pick(c1.edge, 'p99'),
      edge_p99_over_p50_c1: r2(median(c1.edge.map((run) => run.p99 / run.p50))),
      edge_p99_over_p50_c16: r2(median(c16.edge.map((run) => run.p99 / run.p50))),
      floor_req_s_c16: pick(c16.floor, 'throughput'),
      edge_req_s_c16: pick(c16.edge, 'throughput'),
      throughput_ratio_c16: r2(throughputRatio),
      cpu_ms_per_request: {
        floor_c1: pick(c1.floor, 'cpu_ms_per_request'),
        durable_floor_c1: pick(c1.durable_floor, 'cpu_ms_per_request'),
        edge_c1: pick(c1.edge, 'cpu_ms_per_request'),
        floor_c16: pick(c16.floor, 'cpu_ms_per_request'),
        durable_floor_c16: pick(c16.durable_floor, 'cpu_ms_per_request'),
        edge_c16: pick(c16.edge, 'cpu_ms_per_request'),
      },
      // The runtime's price of durability: the durable floor against the floor, and the edge against it.
      durable_floor: {
        added_p50_ms: r3(median(durableAdded)),
        added_p50_ratio_to_floor: perRep(durableAdded, floorAdded),
        req_s_c16: pick(c16.durable_floor, 'throughput'),
        throughput_ratio_to_floor: perRep(reqS(c16.durable_floor), reqS(c16.floor)),
        edge_added_p50_ratio: perRep(edgeAdded, durableAdded),
        edge_throughput_ratio: perRep(reqS(c16.edge), reqS(c16.durable_floor)),
      },
      // Each durable shape against the targets, side by side (ratios to the floor of the same rep):
      // which targets the runtime itself (a Durable Object round trip + one SQLite commit) already misses.
      vs_floor: Object.fromEntries(
        (['durable_floor', 'onehop_floor', 'edge'] as const).map((name) => {
          const added = c1[name].map((run, i) => run.p50 - (c1.direct[i] as Phase).p50)
          return [
            name,
            {
              added_p50_ms: r3(median(added)),
              added_p50_ratio: perRep(added, floorAdded),
              p99_over_p50_c1: r2(median(c1[name].map((run) => run.p99 / run.p50))),
              p99_over_p50_c16: r2(median(c16[name].map((run) => run.p99 / run.p50))),
              req_s_c16: pick(c16[name], 'throughput'),
              throughput_ratio: perRep(reqS(c16[name]), reqS(c16.floor)),
              cpu_ms_c1: pick(c1[name], 'cpu_ms_per_request'),
              cpu_ms_c16: pick(c16[name], 'cpu_ms_per_request'),
            },
          ]
        }),
      ),
      // Where the edge's slowest 1 % at c=1 spend their time (its server-timing phases, and outside the
      // handler: the HTTP hop, queueing, scheduling) against its median calls; and the same tail ratio for
      // every target: a tail the direct stub and the floor share is the machine's, not the edge's.
      tail_c1: {
        edge_split_ms: tailSplit(edgeSamples),
        p99_over_p50: Object.fromEntries(ORDER.map((name) => [name, r2(median(c1[name].map((run) => run.p99 / run.p50)))])),
        // V8's full collections during each workerd target's measured c=1 calls (only one target runs at a time).
        ...(gcTrace
          ? {
              gc: Object.fromEntries(
                ORDER.filter((name) => name !== 'direct').map((name) => {
                  const calls = c1Calls[name]
                  const inCalls = gcTrace.events.filter((event) =>
                    calls.some((call) => call.sentAt !== undefined && event.at >= call.sentAt && event.at <= call.sentAt + call.ms + 1),
                  )
                  return [name, gcDuringCalls(inCalls, calls)]
                }),
              ),
            }
          : {}),
      },
      targets_met: {
        added_p50: addedRatio <= TARGETS.added_p50_ratio_max,
        p99: median(c1.edge.map((run) => run.p99 / run.p50)) <= TARGETS.p99_over_p50_max,
        throughput: throughputRatio >= TARGETS.throughput_ratio_min,
      },
    }
    perSize[size.name] = figures
    raw[size.name] = {
      c1: {
        direct: pick(c1.direct, 'p50'),
        floor: pick(c1.floor, 'p50'),
        durable_floor: pick(c1.durable_floor, 'p50'),
        onehop_floor: pick(c1.onehop_floor, 'p50'),
        edge: pick(c1.edge, 'p50'),
      },
      c16_req_s: {
        direct: pick(c16.direct, 'throughput'),
        floor: pick(c16.floor, 'throughput'),
        durable_floor: pick(c16.durable_floor, 'throughput'),
        onehop_floor: pick(c16.onehop_floor, 'throughput'),
        edge: pick(c16.edge, 'throughput'),
      },
    }
    console.log(`${size.name.padEnd(6)} ${JSON.stringify(figures)}`)
  }

  let long: Record<string, unknown> | null = null
  const longCount = LONG
  if (longCount > 0) {
    const body = Buffer.from(JSON.stringify(chatBody(2 * 1024)))
    const rssStart = rssMb(pids)
    // The edge isolate's heap in use and live (after a full collection) before and after: flat if nothing is
    // kept per call. (The collection at the start comes after the RSS reading above.)
    const heapStart = HEAP ? await isolateHeap('') : null
    let rssPeak = rssStart
    const sampler = setInterval(() => {
      rssPeak = Math.max(rssPeak, rssMb(pids))
    }, 1000)
    const cpuBefore = cpuMs(pids)
    const deadline = performance.now() + LONG_MAX_SECONDS * 1000
    const segments: { requests: number; req_s: number; p50_ms: number; cpu_ms_per_request: number; rss_mb: number }[] = []
    const latencies = { sum: 0, p50s: [] as number[], p99s: [] as number[] }
    let requests = 0
    let errors = 0
    let seconds = 0
    for (let segment = 0; segment < LONG_SEGMENTS && performance.now() < deadline; segment++) {
      const count = Math.floor((longCount * (segment + 1)) / LONG_SEGMENTS) - Math.floor((longCount * segment) / LONG_SEGMENTS)
      const cpuSegment = cpuMs(pids)
      const load = await runLoad(targetsFor('edge', body), { concurrency: 16, count, maxMs: Math.max(1, deadline - performance.now()) })
      requests += load.requests
      errors += load.errors
      seconds += load.seconds
      latencies.sum += load.mean * load.requests
      latencies.p50s.push(load.p50)
      latencies.p99s.push(load.p99)
      segments.push({
        requests: load.requests,
        req_s: load.throughput,
        p50_ms: load.p50,
        cpu_ms_per_request: r3((cpuMs(pids) - cpuSegment) / Math.max(1, load.requests)),
        rss_mb: rssMb(pids),
      })
    }
    clearInterval(sampler)
    edgeSucceeded += requests - errors
    const rssEnd = rssMb(pids)
    const heapEnd = HEAP ? await isolateHeap('') : null
    long = {
      requests,
      errors,
      seconds: r3(seconds),
      req_s: r3(requests / Math.max(0.001, seconds)),
      // Medians of the tenths' p50 and p99 (each tenth's own percentiles).
      p50_ms: r3(median(latencies.p50s)),
      p99_ms: r3(median(latencies.p99s)),
      mean_ms: r3(latencies.sum / Math.max(1, requests)),
      cpu_ms_per_request: r3((cpuMs(pids) - cpuBefore) / Math.max(1, requests)),
      rss_start_mb: rssStart,
      rss_peak_mb: Math.max(rssPeak, rssEnd),
      rss_end_mb: rssEnd,
      rss_growth_mb: r2(rssEnd - rssStart),
      ...(heapStart && heapEnd
        ? { edge_heap_start: heapStart, edge_heap_end: heapEnd, edge_live_heap_growth_mb: r2(heapEnd.live_mb - heapStart.live_mb) }
        : {}),
      segments,
    }
    console.log(`long run ${JSON.stringify(long)}`)
  }

  // What the isolates hold after the run (the session objects' delta bases among it).
  const rssEndMb = rssMb(pids)
  let isolatesEnd: Record<string, unknown> | null = null
  if (HEAP) {
    const heaps: Record<string, HeapFigures & { live_mb: number }> = { edge: await isolateHeap(''), floor: await isolateHeap('floor') }
    // The RSS once both isolates' garbage is collected (V8 hands freed pages back within a second): against
    // `workerd_rss_end_mb`, what V8 had not yet collected; the rest is what workerd and its isolates keep.
    await new Promise((resolve) => setTimeout(resolve, 1000))
    isolatesEnd = { ...heaps, rss_after_gc_mb: rssMb(pids) }
  }
  // Zero captures lost: every successful edge call must be a stored completion.
  let stored = 0
  for (const { session_id } of sessions) {
    const response = await fetch(`${edge.url}/v1/sessions/${session_id}`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
    stored += ((await response.json()) as { completion_count: number }).completion_count
  }
  result = {
    bench: 'gateway',
    reps,
    note: 'ratios of the edge to the bare floor Worker in the same workerd, medians of alternating reps; absolute ms drift with machine load',
    persist_dir: values['persist-dir'],
    sessions: SESSIONS,
    load_average: { start: r2(loadStart), end: r2(loadavg()[0] as number) },
    targets: TARGETS,
    warmup_requests_per_target: WARMUP,
    cold,
    sizes: perSize,
    medians_ms_and_req_s: raw,
    long,
    workerd_rss_end_mb: rssEndMb,
    isolates_end: isolatesEnd,
    captures: { successful_edge_calls: edgeSucceeded, stored, lost: Math.max(0, edgeSucceeded - stored) },
  }
} finally {
  await edge.stop()
  await stub.stop()
  rmSync(persistTo, { recursive: true, force: true })
}
console.log(JSON.stringify(result))
