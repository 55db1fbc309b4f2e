/**
 * @module
 * `npm run profile:gateway`: where workerd's CPU goes for the calls `bench:gateway` measures. Starts the
 * same Miniflare (edge + floor Worker, the vLLM-shaped stub upstream) with workerd's DevTools inspector
 * open, runs `--count` chat requests of `--size` bytes at `--concurrency` through each of `--targets` (the
 * edge, the bare floor, the durable floor — the floor Worker and its object share one isolate) under the V8
 * sampling profiler (Chrome DevTools protocol over the inspector's WebSocket), and
 * prints the top self-time functions of each isolate, each mapped to its source module (the bundle's
 * `// src/…` markers). In workerd the edge's Worker code and its Durable Objects share one isolate, so the
 * edge's profile holds both (the module column tells them apart). `--out DIR` keeps the `.cpuprofile`
 * files (open them in Chrome DevTools → Performance).
 *
 * Last line: one JSON object with the top functions and modules per target.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { parseArgs } from '../scripts/lib/cli-args.ts'
import { bundleWorker, startMiniflareEdge } from '../scripts/lib/miniflare-edge.ts'
import { REPO_ROOT } from '../scripts/lib/processes.ts'
import { chatBody } from './lib/chat-bodies.ts'
import { type LoadTarget, runLoad } from './lib/load.ts'
import { startStub } from './lib/start-stub.ts'
import { moduleMap, printSummary, profiledBundle, profileWhile, summarize } from './lib/v8-profile.ts'

const ADMIN_TOKEN = 'bench-admin-token'

const { values } = parseArgs({
  options: {
    size: { type: 'string', default: '2048' },
    count: { type: 'string', default: '300' },
    concurrency: { type: 'string', default: '1' },
    sessions: { type: 'string', default: '16' },
    top: { type: 'string', default: '25' },
    'max-seconds': { type: 'string', default: '60' },
    'persist-dir': { type: 'string', default: tmpdir() },
    out: { type: 'string' },
    'keep-logs': { type: 'boolean', default: false },
    /** Which targets to profile, in order: `edge`, `floor` (bare), `durable` (the durable floor). */
    targets: { type: 'string', default: 'edge,floor' },
  },
})

const scriptPath = bundleWorker()
const bundleText = profiledBundle(scriptPath, values['keep-logs'])
const edgeModule = moduleMap(bundleText)
const moduleOf = (url: string, line: number) =>
  url.endsWith('index.js') && !url.includes('floor') ? edgeModule(line) : (url.split('/').pop() ?? url)
const stub = await startStub()
const persistTo = mkdtempSync(join(values['persist-dir'] ?? tmpdir(), 'rollgate-profile-'))
const edge = await startMiniflareEdge({
  persistTo,
  scriptPath,
  inspector: true,
  vars: { ROLLGATE_ADMIN_TOKEN: ADMIN_TOKEN, ROLLGATE_SIGNING_KEY: 'bench-signing-key' },
  onLog: (level, message) => {
    if (level === 'warn' || level === 'error') console.error(message)
  },
  extraWorkers: [
    {
      name: 'floor',
      scriptPath: join(REPO_ROOT, 'bench/floor-worker.js'),
      routes: ['*/floor/*', '*/floor-durable/*'],
      bindings: { FLOOR_UPSTREAM_URL: stub.url },
      durableObjects: { FLOOR_SESSIONS: 'FloorSession' },
    },
  ],
})
let result: Record<string, unknown> = {}
try {
  const inspectorHttp = (edge.inspectorUrl as string).replace(/^ws/, 'http')
  const targets = (await (await fetch(`${inspectorHttp}/json/list`)).json()) as {
    id: string
    title: string
    webSocketDebuggerUrl: string
  }[]
  const find = (floor: boolean) => targets.find((target) => target.id.includes('floor') === floor) as (typeof targets)[number]
  const sessions = await Promise.all(
    Array.from({ length: Number(values.sessions) }, async () => {
      const response = await fetch(`${edge.url}/v1/sessions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ upstream: { url: stub.url, kind: 'vllm', served_model: 'Qwen/Qwen3-8B' } }),
      })
      return ((await response.json()) as { token: string }).token
    }),
  )
  const body = Buffer.from(JSON.stringify(chatBody(Number(values.size))))
  const concurrency = Number(values.concurrency)
  const count = Number(values.count)
  const maxMs = Number(values['max-seconds']) * 1000
  const targetFor =
    (name: string) =>
    (worker: number): LoadTarget =>
      name === 'floor'
        ? { url: `${edge.url}/floor/v1/chat/completions`, headers: {}, body }
        : name === 'durable'
          ? { url: `${edge.url}/floor-durable/v1/chat/completions`, headers: { 'x-floor-session': `s${worker % sessions.length}` }, body }
          : { url: `${edge.url}/v1/chat/completions`, headers: { authorization: `Bearer ${sessions[worker % sessions.length]}` }, body }
  const summaries: Record<string, unknown> = {}
  for (const name of (values.targets ?? '').split(',')) {
    if (!['edge', 'floor', 'durable'].includes(name)) throw new Error(`--targets: unknown target ${name} (edge, floor, durable)`)
    // The floor Worker (and its durable objects) run in the floor isolate.
    const floor = name !== 'edge'
    await runLoad(targetFor(name), { concurrency, count: Math.min(100, count), maxMs }) // warm: JIT, sockets, objects
    const { profile, result: load } = await profileWhile(find(floor).webSocketDebuggerUrl, () =>
      runLoad(targetFor(name), { concurrency, count, maxMs }),
    )
    if (values.out) mkdirSync(values.out, { recursive: true })
    if (values.out) writeFileSync(join(values.out, `${name}-${values.size}-c${concurrency}.cpuprofile`), JSON.stringify(profile))
    const summary = summarize(profile, moduleOf, load.requests, Number(values.top))
    summaries[name] = { requests: load.requests, errors: load.errors, p50_ms: load.p50, ...summary }
    printSummary(`${name}: ${load.requests} requests of ${body.length} B at c=${concurrency}, p50 ${load.p50} ms, isolate`, summary)
  }
  result = { bench: 'profile-gateway', body_bytes: body.length, concurrency, ...summaries }
} finally {
  await edge.stop()
  await stub.stop()
  rmSync(persistTo, { recursive: true, force: true })
  rmSync(dirname(scriptPath), { recursive: true, force: true })
}
console.log(JSON.stringify(result))
