/**
 * @module
 * `npm run bench:gateway-ab -- --bundle before=/tmp/a/index.js --bundle after=/tmp/b/index.js`: an A/B of
 * edge bundles (`npx wrangler deploy --dry-run --outdir DIR` of each version; `--bundle NAME=current`
 * bundles this tree). Each bundle runs in a Miniflare (workerd) of its own against one vLLM-shaped stub;
 * the variants take turns, rep by rep, in rotated order, so a change is judged against the other version
 * measured seconds apart on the same (shared, loaded) machine. Per size and variant: p50 / p99 at
 * concurrency 1, req/s at 16, and CPU ms per request of that variant's workerd process (`/proc`).
 *
 * `--bundle NAME=durable-floor` (or `=floor`) runs `bench/floor-worker.js`'s durable floor (or bare floor) as a
 * variant of its own, in a workerd of its own like the others (next to an idle edge: the first bundle, or
 * this tree's), so an ablation build's CPU per call reads against what the least durable capture costs.
 *
 * Last line: one JSON object with the medians per variant and each variant's ratio to the first (the median of
 * the per-rep ratios; each rep's CPU ms per call and CPU ratio too, and in the JSON each rep's p50, p99 and req/s).
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { numberOption, parseArgs, usageError } from '../scripts/lib/cli-args.ts'
import { startMiniflareEdge } from '../scripts/lib/miniflare-edge.ts'
import { REPO_ROOT } from '../scripts/lib/processes.ts'
import { chatBody } from './lib/chat-bodies.ts'
import { type LoadResult, runLoad } from './lib/load.ts'
import { cpuMs, workerdPids } from './lib/proc-stats.ts'
import { startStub } from './lib/start-stub.ts'
import { median } from './lib/stats.ts'

const ADMIN_TOKEN = 'bench-admin-token'

const ARGS = {
  options: {
    bundle: { type: 'string', multiple: true, default: [] as string[] },
    reps: { type: 'string', default: '5' },
    /** Request body sizes: bytes, or kibibytes as `54KB` (`524KB` = 536,576 bytes). */
    sizes: { type: 'string', default: '2048,55296' },
    'c1-count': { type: 'string', default: '200' },
    'c16-count': { type: 'string', default: '600' },
    /** Requests per variant at c=16 before any figure, with the first size's body (warmed code, as in bench:gateway). */
    warmup: { type: 'string', default: '1500' },
    concurrency: { type: 'string', default: '1,16' },
    'max-seconds': { type: 'string', default: '30' },
    'persist-dir': { type: 'string', default: '/dev/shm' },
  },
} as const
const { values } = parseArgs(ARGS)

// Every value checked before anything starts (`524KB` once ran an 810-byte body: `Number('524KB')` is NaN).
const specs = (values.bundle ?? []).map((entry) => {
  const at = entry.indexOf('=')
  if (at <= 0) usageError(ARGS, `--bundle wants NAME=PATH (or NAME=current), got "${entry}"`)
  return { name: entry.slice(0, at), path: entry.slice(at + 1) }
})
if (specs.length < 2) usageError(ARGS, 'give at least two --bundle NAME=PATH')
const SIZES = (values.sizes ?? '').split(',').map((text) => {
  const match = /^(\d+)(KB)?$/i.exec(text.trim())
  const bytes = match ? Number(match[1]) * (match[2] ? 1024 : 1) : 0
  if (bytes < 1) usageError(ARGS, `--sizes takes byte counts or kibibytes (2048,54KB,524KB); got "${text}"`)
  return bytes
})
const CONCURRENCY = (values.concurrency ?? '').split(',').map((text) => numberOption(ARGS, 'concurrency', text, { integer: true, min: 1 }))
const REPS = numberOption(ARGS, 'reps', values.reps, { integer: true, min: 1 })
const C1_COUNT = numberOption(ARGS, 'c1-count', values['c1-count'], { integer: true, min: 1 })
const C16_COUNT = numberOption(ARGS, 'c16-count', values['c16-count'], { integer: true, min: 1 })
const WARMUP = numberOption(ARGS, 'warmup', values.warmup, { integer: true, min: 0 })
const MAX_SECONDS = numberOption(ARGS, 'max-seconds', values['max-seconds'], { min: 1 })

const r3 = (n: number) => Math.round(n * 1000) / 1000

const stub = await startStub()
const persistRoot = mkdtempSync(join(values['persist-dir'] ?? tmpdir(), 'rollgate-ab-'))
/** Floor variants: the path their Worker answers chat calls at. */
const FLOOR_PATHS: Record<string, string> = { 'durable-floor': '/floor-durable', floor: '/floor' }
const edgeBundle = specs.find((spec) => !(spec.path in FLOOR_PATHS))?.path ?? 'current'
const variants: { name: string; url: string; pid: number; tokens: string[]; floor: boolean; stop: () => Promise<void> }[] = []
const loadStart = loadavg()[0] as number
let result: Record<string, unknown> = {}
try {
  for (const [i, spec] of specs.entries()) {
    const before = new Set(workerdPids())
    const floorPath = FLOOR_PATHS[spec.path]
    const scriptPath = floorPath ? edgeBundle : spec.path
    const edge = await startMiniflareEdge({
      persistTo: join(persistRoot, String(i)),
      ...(scriptPath === 'current' ? {} : { scriptPath }),
      vars: { ROLLGATE_ADMIN_TOKEN: ADMIN_TOKEN, ROLLGATE_SIGNING_KEY: 'bench-signing-key' },
      onLog: (level, message) => {
        if (level === 'warn' || level === 'error') console.error(message)
      },
      ...(floorPath
        ? {
            extraWorkers: [
              {
                name: 'floor',
                scriptPath: join(REPO_ROOT, 'bench/floor-worker.js'),
                routes: [`*${floorPath}/*`],
                bindings: { FLOOR_UPSTREAM_URL: stub.url },
                durableObjects: { FLOOR_SESSIONS: 'FloorSession' },
              },
            ],
          }
        : {}),
    })
    const pid = workerdPids().find((p) => !before.has(p))
    if (pid === undefined) throw new Error(`no workerd process found for ${spec.name}`)
    const tokens = floorPath
      ? Array.from({ length: 16 }, (_, n) => `s${n}`)
      : await Promise.all(
          Array.from({ length: 16 }, async () => {
            const response = await fetch(`${edge.url}/v1/sessions`, {
              method: 'POST',
              headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
              body: JSON.stringify({ upstream: { url: stub.url, kind: 'vllm', served_model: 'Qwen/Qwen3-8B' } }),
            })
            if (response.status !== 201) throw new Error(`session create failed: ${response.status}`)
            return ((await response.json()) as { token: string }).token
          }),
        )
    variants.push({
      name: spec.name,
      url: floorPath ? `${edge.url}${floorPath}` : edge.url,
      pid,
      tokens,
      floor: !!floorPath,
      stop: edge.stop,
    })
  }
  const reps = REPS
  const maxMs = MAX_SECONDS * 1000
  const sizes: Record<string, unknown> = {}
  const bodies = SIZES.map((size) => Buffer.from(JSON.stringify(chatBody(size))))
  const target = (variant: (typeof variants)[number], body: Buffer, worker: number) => ({
    url: `${variant.url}/v1/chat/completions`,
    headers: {
      [variant.floor ? 'x-floor-session' : 'authorization']:
        `${variant.floor ? '' : 'Bearer '}${variant.tokens[worker % variant.tokens.length]}`,
    },
    body,
  })
  for (const variant of WARMUP > 0 ? variants : []) {
    const load = await runLoad((worker) => target(variant, bodies[0] as Buffer, worker), {
      concurrency: 16,
      count: WARMUP,
      maxMs,
    })
    if (load.errors) console.log(`  warm-up ${variant.name}: ${load.errors} errors of ${load.requests}`)
  }
  for (const [index, body] of bodies.entries()) {
    const size = SIZES[index] as number
    const perSize: Record<string, Record<string, unknown>> = {}
    for (const concurrency of CONCURRENCY) {
      const count = concurrency === 1 ? C1_COUNT : C16_COUNT
      const runs = new Map<string, (LoadResult & { cpu: number })[]>(variants.map((v) => [v.name, []]))
      const run = async (variant: (typeof variants)[number], n: number) => {
        const cpuBefore = cpuMs([variant.pid])
        const load = await runLoad((worker) => target(variant, body, worker), { concurrency, count: n, maxMs })
        if (load.errors) console.log(`  ${variant.name}: ${load.errors} errors of ${load.requests}`)
        return { ...load, cpu: (cpuMs([variant.pid]) - cpuBefore) / Math.max(1, load.requests) }
      }
      for (const variant of variants) await run(variant, Math.min(count, 60)) // warm
      for (let rep = 0; rep < reps; rep++) {
        for (let i = 0; i < variants.length; i++) {
          const variant = variants[(rep + i) % variants.length] as (typeof variants)[number]
          runs.get(variant.name)?.push(await run(variant, count))
        }
      }
      const base = runs.get(variants[0]?.name as string) ?? []
      for (const variant of variants) {
        const mine = runs.get(variant.name) ?? []
        const figures = {
          p50: r3(median(mine.map((r) => r.p50))),
          p99: r3(median(mine.map((r) => r.p99))),
          req_s: r3(median(mine.map((r) => r.throughput))),
          cpu_ms: r3(median(mine.map((r) => r.cpu))),
          errors: mine.reduce((sum, r) => sum + r.errors, 0),
          // Per rep against the first variant's same rep, then the median.
          p50_ratio: r3(median(mine.map((r, i) => r.p50 / (base[i] as LoadResult).p50))),
          cpu_ratio: r3(median(mine.map((r, i) => r.cpu / Math.max(0.001, (base[i] as { cpu: number }).cpu)))),
          req_s_ratio: r3(median(mine.map((r, i) => r.throughput / (base[i] as LoadResult).throughput))),
          p99_ratio: r3(median(mine.map((r, i) => r.p99 / (base[i] as LoadResult).p99))),
          // Each rep's CPU ms per call and its ratio to the first variant's same rep (the medians above hide the spread).
          cpu_ms_reps: mine.map((r) => r3(r.cpu)),
          cpu_ratio_reps: mine.map((r, i) => r3(r.cpu / Math.max(0.001, (base[i] as { cpu: number }).cpu))),
          // Each rep's own latency and throughput, in run order (JSON only; the ratios above pair rep i of each variant).
          per_rep: mine.map((r) => ({ p50: r3(r.p50), p99: r3(r.p99), req_s: r3(r.throughput) })),
        }
        perSize[`${variant.name}_c${concurrency}`] = figures
        const { per_rep: _, ...summary } = figures
        console.log(`${String(size).padStart(7)} c${String(concurrency).padEnd(3)}${variant.name.padEnd(14)}${JSON.stringify(summary)}`)
      }
    }
    sizes[String(body.length)] = perSize
  }
  result = {
    bench: 'gateway-ab',
    reps,
    warmup_requests_per_variant: WARMUP,
    variants: specs,
    load_average: { start: Math.round(loadStart * 100) / 100, end: Math.round((loadavg()[0] as number) * 100) / 100 },
    sizes,
  }
} finally {
  for (const variant of variants) await variant.stop().catch(() => {})
  await stub.stop()
  rmSync(persistRoot, { recursive: true, force: true })
}
console.log(JSON.stringify(result))
