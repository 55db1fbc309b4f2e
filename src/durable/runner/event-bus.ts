/**
 * @module
 * Server-sent events of task, session, runner and inference state changes (`GET /v1/events`), Polar's
 * platform event names. In memory in the runner hub: a bounded ring of recent events for
 * `Last-Event-ID` replay, a bounded number of subscribers, a heartbeat comment every
 * `HEARTBEAT_MS`, and a maximum stream lifetime (clients reconnect with `Last-Event-ID`).
 */
import type { RolloutEvent } from '../../contract/rollout.ts'

export const MAX_SUBSCRIBERS = 64
export const RING_SIZE = 1_000
/** Polar pings every 15 s. */
export const HEARTBEAT_MS = 15_000
export const DEFAULT_STREAM_MS = 5 * 60_000
export const MAX_STREAM_MS = 60 * 60_000

export interface Subscription {
  /** Only events of this task (events without a task id, e.g. runner events, are skipped). */
  taskId: string | null
  /** Only these event types; empty = all. */
  types: readonly string[]
  lastEventId: string | null
  durationMs: number
  signal: AbortSignal | null
}

interface Subscriber {
  filter: Subscription
  writer: WritableStreamDefaultWriter<Uint8Array>
  close(): void
}

export class EventBus {
  readonly #ring: { id: string; event: RolloutEvent }[] = []
  readonly #subscribers = new Set<Subscriber>()
  readonly #encoder = new TextEncoder()
  /** Ids restart with the object; the boot prefix tells a stale `Last-Event-ID` from a current one. */
  readonly #boot = Date.now().toString(36)
  #next = 0

  get subscribers(): number {
    return this.#subscribers.size
  }

  publish(event: RolloutEvent): string {
    const id = `${this.#boot}.${++this.#next}`
    this.#ring.push({ id, event })
    if (this.#ring.length > RING_SIZE) this.#ring.shift()
    for (const subscriber of this.#subscribers) this.#write(subscriber, id, event)
    return id
  }

  subscribe(filter: Subscription): Response {
    if (this.#subscribers.size >= MAX_SUBSCRIBERS) {
      return Response.json({ error: { message: 'too many event subscribers', type: 'overloaded' } }, { status: 503 })
    }
    const { readable, writable } = new TransformStream<Uint8Array, Uint8Array>()
    const writer = writable.getWriter()
    let closed = false
    const heartbeat = setInterval(() => this.#raw(subscriber, ': ping\n\n'), HEARTBEAT_MS)
    const lifetime = setTimeout(() => subscriber.close(), filter.durationMs)
    const subscriber: Subscriber = {
      filter,
      writer,
      close: () => {
        if (closed) return
        closed = true
        clearInterval(heartbeat)
        clearTimeout(lifetime)
        this.#subscribers.delete(subscriber)
        writer.close().catch(() => {})
      },
    }
    filter.signal?.addEventListener('abort', () => subscriber.close())
    writer.closed.catch(() => subscriber.close())
    this.#subscribers.add(subscriber)
    this.#raw(
      subscriber,
      `retry: 2000\nevent: hello\ndata: ${JSON.stringify({ boot: this.#boot, replay: filter.lastEventId !== null })}\n\n`,
    )
    if (filter.lastEventId !== null) {
      // After the named event when the ring still holds it; otherwise (`0`, an id of an earlier boot, or one
      // that has left the ring) the whole window: a reconnecting client may see an event twice, never miss one.
      const index = this.#ring.findIndex((entry) => entry.id === filter.lastEventId)
      for (const entry of this.#ring.slice(index + 1)) this.#write(subscriber, entry.id, entry.event)
    }
    return new Response(readable, {
      headers: { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', 'x-accel-buffering': 'no' },
    })
  }

  #write(subscriber: Subscriber, id: string, event: RolloutEvent): void {
    const { taskId, types } = subscriber.filter
    if (taskId !== null && (!('task_id' in event) || event.task_id !== taskId)) return
    if (types.length && !types.includes(event.type)) return
    this.#raw(subscriber, `id: ${id}\nevent: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`)
  }

  #raw(subscriber: Subscriber, text: string): void {
    subscriber.writer.write(this.#encoder.encode(text)).catch(() => subscriber.close())
  }
}
