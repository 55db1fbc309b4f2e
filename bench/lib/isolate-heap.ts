/**
 * @module
 * What a workerd isolate's V8 heap holds, read over workerd's DevTools inspector (Miniflare `inspector: true`):
 * `Runtime.getHeapUsage` gives the bytes in use (garbage not yet collected included) and the heap's committed
 * size; `live` is what is left after a full collection (`HeapProfiler.collectGarbage`). workerd runs that
 * collection on the isolate's next turn and never answers the call, so the caller's `poke` (one cheap request
 * to the isolate's Worker) gives it that turn; the heap is read once the poke has been answered (poked again, up
 * to five times, while less than a tenth of it was freed: an isolate that holds only live data frees less).
 * No session stays attached: with an inspector attached, every `console.log` of the isolate costs milliseconds.
 */
import { inspectorSession } from './v8-profile.ts'

export interface HeapFigures {
  /** Bytes in use, garbage not yet collected included (MiB). */
  used_mb: number
  /** The heap's committed size (MiB). */
  total_mb: number
}

const mb = (bytes: number) => Math.round((bytes / 1048576) * 10) / 10

/** The inspector's targets: one per Worker (isolate); the unnamed edge Worker's id is `core:user:`. */
export async function inspectorTargets(inspectorUrl: string): Promise<{ id: string; webSocketDebuggerUrl: string }[]> {
  const http = inspectorUrl.replace(/^ws/, 'http')
  return (await (await fetch(`${http}/json/list`)).json()) as { id: string; webSocketDebuggerUrl: string }[]
}

/** The target of the Worker named `name` ('' for the unnamed edge Worker). */
export async function workerTarget(inspectorUrl: string, name: string): Promise<string> {
  const target = (await inspectorTargets(inspectorUrl)).find((candidate) => candidate.id === `core:user:${name}`)
  if (!target) throw new Error(`workerd's inspector lists no Worker "${name}"`)
  return target.webSocketDebuggerUrl
}

async function usage(session: Awaited<ReturnType<typeof inspectorSession>>): Promise<HeapFigures> {
  const heap = (await session.send('Runtime.getHeapUsage')) as { usedSize: number; totalSize: number }
  return { used_mb: mb(heap.usedSize), total_mb: mb(heap.totalSize) }
}

/** The isolate's heap now. */
export async function heapUsage(targetUrl: string): Promise<HeapFigures> {
  const session = await inspectorSession(targetUrl)
  try {
    return await usage(session)
  } finally {
    session.close()
  }
}

/** The isolate's heap now, then after a full collection (`live_mb`: what the isolate really keeps). */
export async function heapUsageAndLive(
  targetUrl: string,
  poke: () => Promise<unknown>,
): Promise<HeapFigures & { live_mb: number; live_total_mb: number }> {
  const session = await inspectorSession(targetUrl)
  try {
    const before = await usage(session)
    // Never answered by workerd (the collection runs on the isolate's next turn): not awaited.
    session.send('HeapProfiler.collectGarbage').catch(() => {})
    // The inspector's message and the poke travel on different sockets: if the poke came first, poke again.
    let after = before
    for (let attempt = 0; attempt < 5 && after.used_mb > before.used_mb * 0.9; attempt++) {
      if (attempt > 0) await new Promise((resolve) => setTimeout(resolve, 100))
      await poke()
      after = await usage(session)
    }
    return { ...before, live_mb: after.used_mb, live_total_mb: after.total_mb }
  } finally {
    session.close()
  }
}
