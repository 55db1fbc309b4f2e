/**
 * @module
 * `npm run bench:finalize-ab -- --persist DIR --bundle before=/tmp/a/index.js --bundle after=current`: finalize
 * of one recorded session, A/B between edge bundles (`npx wrangler deploy --dry-run --outdir DIR` of each
 * version; `current` bundles this tree) in workerd. `DIR` is Miniflare's persistence directory kept by
 * `npm run bench:long-session -- --keep-persist DIR` (after the turns, before finalize). Each rep, every
 * variant in rotated order gets a fresh copy of `DIR` in a Miniflare of its own and runs what the long-session
 * bench runs: `GET …/trajectory` built from the log (read through), then `POST …/finalize`; measured are the
 * wall time and the CPU of that variant's workerd (`/proc`, every thread) and of this process (Miniflare's R2
 * emulation answers the R2 calls here). So a change is judged against the other build measured seconds apart
 * on the same (shared, loaded) machine. After each run the stored object is read back and hashed: `same_bytes` in
 * the last line says every run of every bundle wrote the same bytes. Last line: one JSON object with the medians
 * per variant.
 */
import { createHash } from 'node:crypto'
import { cpSync, existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { DatabaseSync } from 'node:sqlite'
import { loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from '../scripts/lib/cli-args.ts'
import { bundleWorker, startMiniflareEdge } from '../scripts/lib/miniflare-edge.ts'
import { profileWorkerd } from './lib/devtools.ts'
import { cpuMs, workerdPids } from './lib/proc-stats.ts'
import { upperMedian as median } from './lib/stats.ts'

const ADMIN = 'bench-admin-token'
const { values } = parseArgs({
  options: {
    persist: { type: 'string' },
    bundle: { type: 'string', multiple: true, default: [] },
    reps: { type: 'string', default: '5' },
    builder: { type: 'string', default: 'prefix_merging' },
    config: { type: 'string', default: '{"preset":"tolerant"}' },
    /** Skip the GET before finalize (finalize then runs the builder's code cold). */
    'no-get': { type: 'boolean', default: false },
    /**
     * After the measured reps, one more finalize per variant under workerd's CPU profiler (DevTools inspector,
     * which slows workerd: not counted), written to `<prefix>.<variant>.cpuprofile`.
     */
    profile: { type: 'string' },
    /** Where each run's copy of the persistence directory goes (e.g. /dev/shm: no disk in the figures). */
    'copy-dir': { type: 'string', default: tmpdir() },
  },
})
const persist = values.persist
if (!persist || !existsSync(persist)) throw new Error('give --persist DIR (kept by bench:long-session --keep-persist)')
const specs = (values.bundle ?? []).map((entry) => {
  const at = entry.indexOf('=')
  if (at <= 0) throw new Error(`--bundle wants NAME=PATH (or NAME=current), got ${entry}`)
  return { name: entry.slice(0, at), path: entry.slice(at + 1) }
})
if (specs.length < 1) throw new Error('give at least one --bundle NAME=PATH')

/** The session with the most completions in the persisted directory. */
function sessionId(dir: string): string {
  const objects = join(dir, 'do', '-SessionObject')
  let best: { id: string; count: number } | null = null
  for (const name of readdirSync(objects)) {
    if (!name.endsWith('.sqlite') || name === 'metadata.sqlite') continue
    const db = new DatabaseSync(join(objects, name), { readOnly: true })
    try {
      const row = db.prepare("SELECT value FROM rg_meta WHERE key = 'session'").get() as { value: string } | undefined
      const count = (db.prepare('SELECT COUNT(*) AS n FROM rg_completions').get() as { n: number }).n
      if (row && (!best || count > best.count)) best = { id: (JSON.parse(row.value) as { session_id: string }).session_id, count }
    } catch {
      // not a session file
    } finally {
      db.close()
    }
  }
  if (!best) throw new Error(`no session in ${objects}`)
  return best.id
}

const selfCpuMs = () => {
  const usage = process.cpuUsage()
  return (usage.user + usage.system) / 1000
}

const session = sessionId(persist)
const builderConfig = values.builder === 'prefix_merging' ? (JSON.parse(values.config ?? '{}') as Record<string, unknown>) : null
const query = `builder=${values.builder}${builderConfig ? `&config=${encodeURIComponent(JSON.stringify(builderConfig))}` : ''}`
const made: string[] = []
const bundles = specs.map((spec) => {
  if (spec.path !== 'current') return spec
  const path = bundleWorker()
  made.push(path)
  return { ...spec, path }
})

interface Run {
  get_ms: number
  get_workerd_cpu_ms: number
  finalize_ms: number
  finalize_workerd_cpu_ms: number
  finalize_miniflare_cpu_ms: number
  trajectory_bytes: number
  trace_count: number
  /** SHA-256 of the stored object (read back after the measured span): every bundle must write the same bytes. */
  sha256: string
}
const runs = new Map<string, Run[]>(bundles.map((spec) => [spec.name, []]))

async function once(spec: { name: string; path: string }, profileTo?: string): Promise<Run> {
  const dir = mkdtempSync(join(values['copy-dir'] ?? tmpdir(), 'rollgate-finalize-ab-'))
  cpSync(persist as string, dir, { recursive: true })
  const before = new Set(workerdPids())
  const edge = await startMiniflareEdge({
    persistTo: dir,
    scriptPath: spec.path,
    ...(profileTo ? { inspector: true } : {}),
    vars: { ROLLGATE_ADMIN_TOKEN: ADMIN, ROLLGATE_SIGNING_KEY: 'k', ROLLGATE_UPSTREAM_URL: 'http://127.0.0.1:9' },
    onLog: (level, message) => {
      if (level === 'warn' || level === 'error') console.error(message)
    },
  })
  try {
    const pids = workerdPids().filter((pid) => !before.has(pid))
    const headers = { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' }
    // Wake the session object (its first request opens the SQLite file) outside the measured spans.
    await (await fetch(`${edge.url}/v1/sessions/${session}`, { headers })).arrayBuffer()
    let getMs = 0
    let getCpu = 0
    if (!values['no-get']) {
      const cpu0 = cpuMs(pids)
      const t0 = performance.now()
      const get = await fetch(`${edge.url}/v1/sessions/${session}/trajectory?${query}`, { headers })
      await get.arrayBuffer()
      getMs = performance.now() - t0
      getCpu = cpuMs(pids) - cpu0
      if (get.status !== 200) throw new Error(`${spec.name}: GET ${get.status}`)
    }
    const cpu0 = cpuMs(pids)
    const self0 = selfCpuMs()
    const t0 = performance.now()
    const finalize = async () => {
      const response = await fetch(`${edge.url}/v1/sessions/${session}/finalize`, {
        method: 'POST',
        headers,
        body: JSON.stringify(builderConfig ? { builder: values.builder, config: builderConfig } : { builder: values.builder }),
      })
      return { response, text: await response.text() }
    }
    let answered: { response: Response; text: string }
    if (profileTo && edge.inspectorUrl) {
      const profiled = await profileWorkerd(edge.inspectorUrl, finalize)
      writeFileSync(profileTo, JSON.stringify(profiled.profile))
      answered = profiled.result
    } else answered = await finalize()
    const { response, text } = answered
    const ms = performance.now() - t0
    const cpu = cpuMs(pids) - cpu0
    const self = selfCpuMs() - self0
    if (response.status !== 200) throw new Error(`${spec.name}: finalize ${response.status} ${text.slice(0, 300)}`)
    const answer = JSON.parse(text) as { trajectory_bytes: number; trace_count: number }
    const stored = await fetch(`${edge.url}/v1/sessions/${session}/trajectory/stored`, { headers })
    if (stored.status !== 200) throw new Error(`${spec.name}: GET stored ${stored.status}`)
    const sha256 = createHash('sha256')
      .update(new Uint8Array(await stored.arrayBuffer()))
      .digest('hex')
    return {
      get_ms: getMs,
      get_workerd_cpu_ms: getCpu,
      finalize_ms: ms,
      finalize_workerd_cpu_ms: cpu,
      finalize_miniflare_cpu_ms: self,
      trajectory_bytes: answer.trajectory_bytes,
      trace_count: answer.trace_count,
      sha256,
    }
  } finally {
    await edge.stop()
    rmSync(dir, { recursive: true, force: true })
  }
}

const load0 = loadavg()[0] ?? 0
try {
  const reps = Number(values.reps)
  for (let rep = 0; rep < reps; rep++) {
    for (let i = 0; i < bundles.length; i++) {
      const spec = bundles[(rep + i) % bundles.length] as { name: string; path: string }
      const run = await once(spec)
      runs.get(spec.name)?.push(run)
      console.log(`rep ${rep} ${spec.name}: ${JSON.stringify(run, (_, v) => (typeof v === 'number' ? Math.round(v) : v))}`)
    }
  }
  const prefix = values.profile
  if (prefix) for (const spec of bundles) await once(spec, `${prefix}.${spec.name}.cpuprofile`)
} finally {
  for (const path of made) rmSync(join(path, '..'), { recursive: true, force: true })
}
const summary: Record<string, Record<string, number>> = {}
for (const [name, list] of runs) {
  const out: Record<string, number> = {}
  for (const key of Object.keys(list[0] ?? {}) as (keyof Run)[]) {
    if (key !== 'sha256') out[`${key}_p50`] = Math.round(median(list.map((run) => run[key] as number)))
  }
  summary[name] = out
}
const first = bundles[0]?.name as string
const ratios: Record<string, Record<string, number>> = {}
for (const [name, figures] of Object.entries(summary)) {
  if (name === first) continue
  ratios[name] = {}
  for (const [key, value] of Object.entries(figures)) {
    const base = summary[first]?.[key] ?? 0
    if (base > 0 && !key.startsWith('trajectory') && !key.startsWith('trace')) ratios[name][key] = Math.round((value / base) * 100) / 100
  }
}
const digests = new Set([...runs.values()].flat().map((run) => run.sha256))
console.log(
  JSON.stringify({
    session_id: session,
    reps: Number(values.reps),
    /** Every run of every bundle wrote the same bytes. */
    same_bytes: digests.size === 1,
    sha256: [...digests],
    variants: summary,
    ratio_to_first: ratios,
    load_average_1m: { start: Math.round(load0 * 100) / 100, end: Math.round((loadavg()[0] ?? 0) * 100) / 100 },
  }),
)
