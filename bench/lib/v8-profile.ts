/**
 * @module
 * V8 CPU profiles of workerd isolates for the `profile:*` scripts: a Chrome DevTools protocol session over
 * workerd's inspector WebSocket (`inspectorSession`), the bundle with the edge's per-request log line
 * neutralised (`profiledBundle`: with an inspector attached each console.log costs 1–8 ms, an artifact),
 * a bundle-line → source-module map from esbuild's `// src/…` markers (`moduleMap`), and the top self-time
 * functions and modules per request of a profile (`summarize`, also used for Node's `--cpu-prof` files).
 */
import { readFileSync, writeFileSync } from 'node:fs'

export interface ProfileNode {
  id: number
  callFrame: { functionName: string; url: string; lineNumber: number; columnNumber: number }
  children?: number[]
}
export interface CpuProfile {
  nodes: ProfileNode[]
  startTime: number
  endTime: number
  samples: number[]
  timeDeltas: number[]
}

/** One DevTools protocol session over the inspector WebSocket. */
export async function inspectorSession(url: string) {
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

/** Profile one isolate (its inspector target URL) while `work` runs; sampling every 100 µs. */
export async function profileWhile<T>(targetUrl: string, work: () => Promise<T>): Promise<{ profile: CpuProfile; result: T }> {
  const inspector = await inspectorSession(targetUrl)
  try {
    await inspector.send('Profiler.enable')
    await inspector.send('Profiler.setSamplingInterval', { interval: 100 })
    await inspector.send('Profiler.start')
    const result = await work()
    const { profile } = (await inspector.send('Profiler.stop')) as { profile: CpuProfile }
    return { profile, result }
  } finally {
    inspector.close()
  }
}

const REQUEST_LINE = 'console.log(JSON.stringify({ request:'

/**
 * Drop the edge's one request line from a bundle (in place) unless `keepLogs`: with an inspector attached,
 * workerd makes each console.log cost 1–8 ms (it scales with the request; without an inspector, CPU per
 * request shows no such cost). Returns the bundle's text.
 */
export function profiledBundle(scriptPath: string, keepLogs = false): string {
  let bundleText = readFileSync(scriptPath, 'utf8')
  if (!keepLogs) {
    if (!bundleText.includes(REQUEST_LINE)) throw new Error('request log line not found in the bundle (src/contract/log.ts changed?)')
    bundleText = bundleText.replace(REQUEST_LINE, `void (${REQUEST_LINE.slice('console.log('.length)}`)
    writeFileSync(scriptPath, bundleText)
  }
  return bundleText
}

/** Bundle line → source module, from esbuild's `// src/…` markers. */
export function moduleMap(bundle: string): (line: number) => string {
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

export interface Row {
  name: string
  ms: number
  share: number
}

export interface ProfileSummary {
  busy_ms_per_request: number
  functions: Row[]
  modules: Row[]
}

/** Top self-time functions and modules per request (idle samples left out). */
export function summarize(
  profile: CpuProfile,
  moduleOf: (url: string, line: number) => string,
  requests: number,
  top: number,
): ProfileSummary {
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

/** Print a summary as a table (what `profile:*` scripts show before their JSON line). */
export function printSummary(title: string, summary: ProfileSummary, modules = 15): void {
  console.log(`\n${title}, busy ${summary.busy_ms_per_request} ms/request`)
  console.log('  self ms/request  share  function (module:line)')
  for (const row of summary.functions) console.log(`  ${row.ms.toFixed(3).padStart(14)}  ${`${row.share}%`.padStart(5)}  ${row.name}`)
  console.log('  by module:')
  for (const row of summary.modules.slice(0, modules))
    console.log(`  ${row.ms.toFixed(3).padStart(14)}  ${`${row.share}%`.padStart(5)}  ${row.name}`)
}

/** Read a Node `--cpu-prof` file. */
export function readCpuProfile(path: string): CpuProfile {
  return JSON.parse(readFileSync(path, 'utf8')) as CpuProfile
}
