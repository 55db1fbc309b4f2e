/**
 * @module
 * `npm run profile:tunnel`: where the CPU of a tunnelled model call goes, on both ends. Starts the
 * `bench:tunnel` stack (`lib/tunnel-stack.ts`: stub engine, the edge in Miniflare with workerd's DevTools
 * inspector open, runner processes) and, for each path in `--paths` (default `direct,tunnel`), sends
 * `--count` chat requests of `--size` bytes at `--concurrency` while V8's sampling profiler runs in the
 * edge's isolate (Worker and Durable Objects share it; the module column tells them apart) and in the
 * runner process. Prints the top self-time functions and modules per request of each; `--out DIR` keeps
 * the `.cpuprofile` files (Chrome DevTools → Performance).
 *
 * Last line: one JSON object with the summaries per path and side.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from '../scripts/lib/cli-args.ts'
import { bundleWorker } from '../scripts/lib/miniflare-edge.ts'
import { REPO_ROOT } from '../scripts/lib/processes.ts'
import { chatBody } from './lib/chat-bodies.ts'
import { type LoadTarget, runLoad } from './lib/load.ts'
import { startTunnelStack } from './lib/tunnel-stack.ts'
import { moduleMap, printSummary, profiledBundle, profileWhile, readCpuProfile, summarize } from './lib/v8-profile.ts'

const { values } = parseArgs({
  options: {
    size: { type: 'string', default: '55296' },
    count: { type: 'string', default: '400' },
    concurrency: { type: 'string', default: '1' },
    paths: { type: 'string', default: 'direct,tunnel' },
    top: { type: 'string', default: '25' },
    'max-seconds': { type: 'string', default: '60' },
    out: { type: 'string' },
    'keep-logs': { type: 'boolean', default: false },
  },
})

const PATHS = ['direct', 'tunnel', 'tunnel_v1', 'bare'] as const
type Path = (typeof PATHS)[number]
const paths = (values.paths ?? '').split(',').filter((name): name is Path => (PATHS as readonly string[]).includes(name))
if (paths.length === 0) throw new Error(`--paths: name one or more of ${PATHS.join(', ')}`)

/** A Node profile's URL → a module name: a repo-relative path, `npm:<package>` or `node:<internal>`. */
function nodeModule(url: string): string {
  if (!url.startsWith('file://')) return url.startsWith('node:') ? url : url || '(native)'
  const path = relative(REPO_ROOT, fileURLToPath(url))
  const npm = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(path)
  return npm ? `npm:${npm[1]}` : path
}

const scriptPath = bundleWorker()
const edgeModule = moduleMap(profiledBundle(scriptPath, values['keep-logs']))
const stack = await startTunnelStack({
  scriptPath,
  inspector: true,
  onLog: (level, message) => {
    if (level === 'warn' || level === 'error') console.error(message)
  },
})
const keep = values.out ?? mkdtempSync(join(tmpdir(), 'rollgate-profile-tunnel-'))
mkdirSync(keep, { recursive: true })
let result: Record<string, unknown> = {}
try {
  const inspectorHttp = (stack.edge.inspectorUrl as string).replace(/^ws/, 'http')
  const targets = (await (await fetch(`${inspectorHttp}/json/list`)).json()) as { id: string; webSocketDebuggerUrl: string }[]
  const edgeTarget = targets[0]?.webSocketDebuggerUrl
  if (!edgeTarget) throw new Error('no inspector target for the edge')
  const body = Buffer.from(JSON.stringify(chatBody(Number(values.size))))
  const concurrency = Number(values.concurrency)
  const count = Number(values.count)
  const maxMs = Number(values['max-seconds']) * 1000
  const top = Number(values.top)
  const summaries: Record<string, unknown> = {}
  for (const path of paths) {
    const tokens = stack.tokens[path]
    const target = (worker: number): LoadTarget => ({
      url: `${stack.edge.url}/v1/chat/completions`,
      headers: { authorization: `Bearer ${tokens[worker % tokens.length]}` },
      body,
    })
    await runLoad(target, { concurrency, count: Math.min(100, count), maxMs }) // warm: JIT, sockets, objects
    const runner = path === 'tunnel_v1' && stack.runnerV1 ? stack.runnerV1 : stack.runner
    await runner.profileStart()
    const { profile, result: load } = await profileWhile(edgeTarget, () => runLoad(target, { concurrency, count, maxMs }))
    const runnerFile = join(keep, `runner-${path}-${values.size}-c${concurrency}.cpuprofile`)
    await runner.profileStop(runnerFile)
    const edgeFile = join(keep, `edge-${path}-${values.size}-c${concurrency}.cpuprofile`)
    writeFileSync(edgeFile, JSON.stringify(profile))
    const edge = summarize(
      profile,
      (url, line) => (url.endsWith('index.js') ? edgeModule(line) : (url.split('/').pop() ?? url)),
      load.requests,
      top,
    )
    const runnerSummary = summarize(readCpuProfile(runnerFile), (url) => nodeModule(url), load.requests, top)
    summaries[path] = {
      requests: load.requests,
      errors: load.errors,
      p50_ms: load.p50,
      throughput: load.throughput,
      edge,
      runner: runnerSummary,
    }
    const heading = `${path}: ${load.requests} requests of ${body.length} B at c=${concurrency}, p50 ${load.p50.toFixed(2)} ms`
    printSummary(`${heading} — edge isolate`, edge)
    printSummary(`${heading} — runner process`, runnerSummary)
  }
  result = { bench: 'profile-tunnel', body_bytes: body.length, concurrency, ...summaries }
  if (values.out) console.log(`\nprofiles in ${keep}`)
} finally {
  await stack.stop()
  rmSync(dirname(scriptPath), { recursive: true, force: true })
  if (!values.out) rmSync(keep, { recursive: true, force: true })
}
console.log(JSON.stringify(result))
