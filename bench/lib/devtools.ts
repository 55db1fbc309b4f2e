/**
 * @module
 * A V8 sampling CPU profile of workerd (Miniflare `inspector: true`) while `work` runs, over the DevTools
 * session of `v8-profile.ts` (`inspectorSession`) on the inspector's first target.
 */
import { inspectorSession } from './v8-profile.ts'

/** Start V8's sampling profiler in workerd's (first) target; `stop` returns the `.cpuprofile` JSON. */
export async function startWorkerdProfile(inspectorUrl: string): Promise<{ stop(): Promise<unknown> }> {
  const http = inspectorUrl.replace(/^ws/, 'http')
  const targets = (await (await fetch(`${http}/json/list`)).json()) as { id: string; webSocketDebuggerUrl: string }[]
  const target = targets.find((candidate) => !candidate.id.includes('floor')) ?? targets[0]
  if (!target) throw new Error('workerd inspector lists no target')
  const inspector = await inspectorSession(target.webSocketDebuggerUrl)
  try {
    await inspector.send('Profiler.enable')
    await inspector.send('Profiler.setSamplingInterval', { interval: 100 })
    await inspector.send('Profiler.start')
  } catch (error) {
    inspector.close()
    throw error
  }
  return {
    async stop() {
      try {
        return ((await inspector.send('Profiler.stop')) as { profile: unknown }).profile
      } finally {
        inspector.close()
      }
    },
  }
}

/** The CPU profile of workerd while `work` runs. */
export async function profileWorkerd<T>(inspectorUrl: string, work: () => Promise<T>): Promise<{ result: T; profile: unknown }> {
  const profiler = await startWorkerdProfile(inspectorUrl)
  let result: T
  try {
    result = await work()
  } catch (error) {
    await profiler.stop().catch(() => {})
    throw error
  }
  return { result, profile: await profiler.stop() }
}
