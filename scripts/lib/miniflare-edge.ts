/**
 * @module
 * The edge in Miniflare (real workerd, Durable Objects with SQLite, R2 emulation) without `wrangler
 * dev`'s proxy layers: what benchmarks use, so the figures are the Worker's and not the dev server's.
 * The Worker is bundled first with `wrangler deploy --dry-run --outdir`.
 */
import { spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Miniflare, convertV4MiniflareOptions } from 'miniflare'
import { REPO_ROOT } from './processes.ts'

const WRANGLER_BIN = fileURLToPath(new URL('../../node_modules/wrangler/bin/wrangler.js', import.meta.url))

/** Bundle the Worker into a fresh temp dir; the caller removes `dirname(path)` when done (startMiniflareEdge does). */
export function bundleWorker(): string {
  const outdir = mkdtempSync(join(tmpdir(), 'rollgate-dist-'))
  const result = spawnSync(process.execPath, [WRANGLER_BIN, 'deploy', '--dry-run', '--outdir', outdir], {
    cwd: REPO_ROOT,
    env: { ...process.env, WRANGLER_SEND_METRICS: 'false', CLOUDFLARE_CF_FETCH_ENABLED: 'false' },
    encoding: 'utf8',
  })
  if (result.status !== 0) {
    rmSync(outdir, { recursive: true, force: true })
    throw new Error(`bundle failed:\n${result.stdout}\n${result.stderr}`)
  }
  return join(outdir, 'index.js')
}

export interface MiniflareEdge {
  url: string
  /** workerd's DevTools inspector (`ws://127.0.0.1:<port>`), when started with `inspector: true`. */
  inspectorUrl: string | null
  /**
   * Evict one of the edge's Durable Objects (workerd drops the instance; the next call constructs a new one
   * over the same storage), as workerd does to an object left idle: what a cold call costs, measured at will.
   */
  evictObject(className: string, name: string): Promise<void>
  stop(): Promise<void>
}

export async function startMiniflareEdge(options: {
  persistTo: string
  vars: Record<string, string>
  scriptPath?: string
  /** More Workers in the same workerd, each reached at its `routes` (e.g. `bench/floor-worker.js` at `*\/floor/*`). */
  /** workerd's log lines (default: printed). Benchmarks drop the per-request lines so their stdout stays readable. */
  onLog?: (level: string, message: string) => void
  extraWorkers?: {
    name: string
    scriptPath: string
    routes: string[]
    bindings?: Record<string, string>
    /** Durable Object bindings of the Worker's own classes (SQLite-backed): binding → class name. */
    durableObjects?: Record<string, string>
  }[]
  /** Open workerd's DevTools inspector on a free loopback port (CPU profiles: `bench/profile-gateway.ts`). */
  inspector?: boolean
}): Promise<MiniflareEdge> {
  const scriptPath = options.scriptPath ?? bundleWorker()
  // A bundle made here is removed with the edge (benchmarks and fuzz leave nothing in the temp dir).
  const removeBundle = () => {
    if (!options.scriptPath) rmSync(dirname(scriptPath), { recursive: true, force: true })
  }
  // Unnamed, as before: Miniflare keeps its objects under `do/-<ClassName>` (bench:long-session reads them there).
  const edgeWorker = {
    scriptPath,
    modulesRoot: dirname(scriptPath),
    modules: true,
    compatibilityDate: '2026-08-01',
    compatibilityFlags: ['nodejs_compat', 'enable_request_signal'],
    durableObjects: {
      SESSIONS: { className: 'SessionObject', useSQLite: true },
      TASKS: { className: 'TaskObject', useSQLite: true },
      RUNNERS: { className: 'RunnerHub', useSQLite: true },
      RUNNER_LINKS: { className: 'RunnerLink', useSQLite: true },
      INFERENCE_GATE: { className: 'InferenceGate', useSQLite: true },
    },
    r2Buckets: ['BLOBS'],
    bindings: {
      ROLLGATE_UPSTREAM_URL: 'http://127.0.0.1:8000',
      ROLLGATE_UPSTREAM_KIND: 'vllm',
      ROLLGATE_SERVED_MODEL: '',
      ...options.vars,
    },
  }
  const extraWorkers = (options.extraWorkers ?? []).map((worker) => ({
    name: worker.name,
    scriptPath: worker.scriptPath,
    modulesRoot: dirname(worker.scriptPath),
    modules: true,
    compatibilityDate: '2026-08-01',
    compatibilityFlags: ['nodejs_compat'],
    routes: worker.routes,
    bindings: worker.bindings ?? {},
    durableObjects: Object.fromEntries(
      Object.entries(worker.durableObjects ?? {}).map(([binding, className]) => [binding, { className, useSQLite: true }]),
    ),
  }))
  const mf = new Miniflare(
    convertV4MiniflareOptions({
      // The edge first: it answers every request no other Worker's route claims.
      workers: [edgeWorker, ...extraWorkers],
      cf: false,
      ...(options.onLog
        ? { handleStructuredLogs: ({ level, message }: { level: string; message: string }) => options.onLog?.(level, message) }
        : {}),
      // Miniflare 4's one persistence root (`<root>/do`, `<root>/r2`, …); the v3 names
      // `durableObjectsPersist` / `r2Persist` are dropped by `convertV4MiniflareOptions`.
      resourcePersistencePath: options.persistTo,
      host: '127.0.0.1',
      port: 0,
      ...(options.inspector ? { inspectorPort: 0 } : {}),
    } as Parameters<typeof convertV4MiniflareOptions>[0]),
  )
  let url: string
  let inspectorUrl: string | null = null
  try {
    url = (await mf.ready).href.replace(/\/$/, '')
    if (options.inspector) inspectorUrl = (await mf.getInspectorURL()).href.replace(/\/$/, '')
  } catch (error) {
    await mf.dispose().catch(() => {})
    removeBundle()
    throw error
  }
  return {
    url,
    inspectorUrl,
    // The edge Worker is the unnamed one ('').
    evictObject: (className, name) => mf.unsafeEvictDurableObject('', className, { name }),
    stop: async () => {
      try {
        await mf.dispose()
      } finally {
        removeBundle()
      }
    },
  }
}
