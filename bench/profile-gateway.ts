/**
 * @module
 * `npm run profile:gateway`: where workerd's CPU goes for the calls `bench:gateway` measures. Starts the
 * same Miniflare (edge + floor Worker, the vLLM-shaped stub upstream) with workerd's DevTools inspector
 * open, runs `--count` chat requests of `--size` bytes at `--concurrency` through the edge (and then the
 * floor) under the V8 sampling profiler (Chrome DevTools protocol over the inspector's WebSocket), and
 * prints the top self-time functions of each isolate, each mapped to its source module (the bundle's
 * `// src/…` markers). In workerd the edge's Worker code and its Durable Objects share one isolate, so the
 * edge's profile holds both (the module column tells them apart). `--out DIR` keeps the `.cpuprofile`
 * files (open them in Chrome DevTools → Performance).
 *
 * Last line: one JSON object with the top functions and modules per target.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { parseArgs } from 'node:util'
import { bundleWorker, startMiniflareEdge } from '../scripts/lib/miniflare-edge.ts'
import { REPO_ROOT } from '../scripts/lib/processes.ts'
import { chatBody } from './lib/chat-bodies.ts'
import { type LoadTarget, runLoad } from './lib/load.ts'
import { startStub } from './lib/start-stub.ts'

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
  },
})

interface ProfileNode {
  id: number
  callFrame: { functionName: string; url: string; lineNumber: number; columnNumber: number }
  children?: number[]
}
interface CpuProfile {
  nodes: ProfileNode[]
  startTime: number
  endTime: number
  samples: number[]
  timeDeltas: number[]
}

/** One DevTools protocol session over the inspector WebSocket. */
async function connect(url: string) {
  const socket = new WebSocket(url)
  await new Promise<void>((resolve, reject) => {
    socket.addEventListener('open', () => resolve(), { once: true })
    socket.addEventListener('error', () => reject(new Error(`inspector ${url} unreachable`)), { once: true })
  })
  let next = 1
  const pending = new Map<number, { resolve: (value: unknown) => void; reject: (error: Error) => void }>()
  socket.addEventListener('message', (event) => {
    const message = JSON.parse(String(event.data)) as { id?: number; result?: unknown; error?: { message: string } }
    if (message.id === undefined) return
    const waiter = pending.get(message.id)
    pending.delete(message.id)
    if (message.error) waiter?.reject(new Error(message.error.message))
    else waiter?.resolve(message.result)
  })
  const send = (method: string, params: Record<string, unknown> = {}) =>
    new Promise<unknown>((resolve, reject) => {
      const id = next++
      pending.set(id, { resolve, reject })
      socket.send(JSON.stringify({ id, method, params }))
    })
  return { send, close: () => socket.close() }
}

/** Bundle line → source module, from esbuild's `// src/…` markers. */
function moduleMap(bundle: string): (line: number) => string {
  const starts: { line: number; module: string }[] = []
  bundle.split('\n').forEach((text, line) => {
    const match = /^\/\/ ((?:src|node_modules)\/\S+)$/.exec(text)
    if (match) starts.push({ line, module: (match[1] as string).replace(/^node_modules\/(?:\.pnpm\/)?/, 'npm:') })
  })
  return (line) => {
    let lo = 0
    let hi = starts.length - 1
    let found = '(bundle)'
    while (lo <= hi) {
      const mid = (lo + hi) >> 1
      const start = starts[mid] as { line: number; module: string }
      if (start.line <= line) {
        found = start.module
        lo = mid + 1
      } else hi = mid - 1
    }
    return found
  }
}

interface Row {
  name: string
  ms: number
  share: number
}

function summarize(profile: CpuProfile, moduleOf: (url: string, line: number) => string, requests: number, top: number) {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]))
  const selfUs = new Map<number, number>()
  profile.samples.forEach((id, i) => {
    selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i + 1] ?? 0))
  })
  const fns = new Map<string, number>()
  const modules = new Map<string, number>()
  let busyUs = 0
  for (const [id, us] of selfUs) {
    const frame = (byId.get(id) as ProfileNode).callFrame
    if (frame.functionName === '(idle)') continue
    busyUs += us
    const module = frame.url ? moduleOf(frame.url, frame.lineNumber) : frame.functionName
    const name = `${frame.functionName || '(anonymous)'} ${module}${frame.url ? `:${frame.lineNumber + 1}` : ''}`
    fns.set(name, (fns.get(name) ?? 0) + us)
    modules.set(module, (modules.get(module) ?? 0) + us)
  }
  const rows = (map: Map<string, number>): Row[] =>
    [...map]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([name, us]) => ({ name, ms: Math.round((us / 1000 / requests) * 1000) / 1000, share: Math.round((us / busyUs) * 1000) / 10 }))
  return { busy_ms_per_request: Math.round((busyUs / 1000 / requests) * 1000) / 1000, functions: rows(fns), modules: rows(modules) }
}

const scriptPath = bundleWorker()
// With an inspector attached, workerd makes each console.log cost 1–8 ms (it scales with the request, an
// artifact of the attached inspector: bench:gateway's CPU per request, without it, shows no such cost).
// The edge's one request line is therefore dropped from the profiled bundle; `--keep-logs` keeps it.
const REQUEST_LINE = 'console.log(JSON.stringify({ request:'
let bundleText = readFileSync(scriptPath, 'utf8')
if (!values['keep-logs']) {
  if (!bundleText.includes(REQUEST_LINE)) throw new Error('request log line not found in the bundle (src/contract/log.ts changed?)')
  bundleText = bundleText.replace(REQUEST_LINE, `void (${REQUEST_LINE.slice('console.log('.length)}`)
  writeFileSync(scriptPath, bundleText)
}
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
      routes: ['*/floor/*'],
      bindings: { FLOOR_UPSTREAM_URL: stub.url },
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
    (floor: boolean) =>
    (worker: number): LoadTarget =>
      floor
        ? { url: `${edge.url}/floor/v1/chat/completions`, headers: {}, body }
        : { url: `${edge.url}/v1/chat/completions`, headers: { authorization: `Bearer ${sessions[worker % sessions.length]}` }, body }
  const summaries: Record<string, unknown> = {}
  for (const floor of [false, true]) {
    const name = floor ? 'floor' : 'edge'
    await runLoad(targetFor(floor), { concurrency, count: Math.min(100, count), maxMs }) // warm: JIT, sockets, objects
    const inspector = await connect(find(floor).webSocketDebuggerUrl)
    try {
      await inspector.send('Profiler.enable')
      await inspector.send('Profiler.setSamplingInterval', { interval: 100 })
      await inspector.send('Profiler.start')
      const load = await runLoad(targetFor(floor), { concurrency, count, maxMs })
      const { profile } = (await inspector.send('Profiler.stop')) as { profile: CpuProfile }
      if (values.out) mkdirSync(values.out, { recursive: true })
      if (values.out) writeFileSync(join(values.out, `${name}-${values.size}-c${concurrency}.cpuprofile`), JSON.stringify(profile))
      const summary = summarize(profile, moduleOf, load.requests, Number(values.top))
      summaries[name] = { requests: load.requests, errors: load.errors, p50_ms: load.p50, ...summary }
      console.log(
        `\n${name}: ${load.requests} requests of ${body.length} B at c=${concurrency}, p50 ${load.p50} ms, isolate busy ${summary.busy_ms_per_request} ms/request`,
      )
      console.log('  self ms/request  share  function (module:line)')
      for (const row of summary.functions) console.log(`  ${row.ms.toFixed(3).padStart(14)}  ${`${row.share}%`.padStart(5)}  ${row.name}`)
      console.log('  by module:')
      for (const row of summary.modules.slice(0, 15))
        console.log(`  ${row.ms.toFixed(3).padStart(14)}  ${`${row.share}%`.padStart(5)}  ${row.name}`)
    } finally {
      inspector.close()
    }
  }
  result = { bench: 'profile-gateway', body_bytes: body.length, concurrency, ...summaries }
} finally {
  await edge.stop()
  await stub.stop()
  rmSync(persistTo, { recursive: true, force: true })
  rmSync(dirname(scriptPath), { recursive: true, force: true })
}
console.log(JSON.stringify(result))
