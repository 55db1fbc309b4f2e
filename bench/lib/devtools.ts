/**
 * @module
 * A minimal Chrome DevTools protocol client for workerd's inspector (Miniflare `inspector: true`): connect
 * to a target's WebSocket and take a V8 sampling CPU profile of whatever runs while `work` does.
 */

/** One DevTools protocol session over the inspector WebSocket. */
export async function connectDevtools(url: string) {
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

/** Start V8's sampling profiler in workerd's (first) target; `stop` returns the `.cpuprofile` JSON. */
export async function startWorkerdProfile(inspectorUrl: string): Promise<{ stop(): Promise<unknown> }> {
  const http = inspectorUrl.replace(/^ws/, 'http')
  const targets = (await (await fetch(`${http}/json/list`)).json()) as { id: string; webSocketDebuggerUrl: string }[]
  const target = targets.find((candidate) => !candidate.id.includes('floor')) ?? targets[0]
  if (!target) throw new Error('workerd inspector lists no target')
  const inspector = await connectDevtools(target.webSocketDebuggerUrl)
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
