/**
 * @module
 * Server-sent events of task, session, runner and inference state changes (`GET /v1/events`), Polar's
 * platform event names. The replay window (the last `RING_SIZE` events) lives in an `EventStore` — the
 * hub's SQLite (`event-log.ts`), so `Last-Event-ID` works across a restart; event ids are the store's
 * increasing sequence numbers. Also: a bounded number of subscribers, a heartbeat comment every
 * `HEARTBEAT_MS` (configurable), and a maximum stream lifetime (clients reconnect with `Last-Event-ID`).
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

/** Where the replay window is kept. */
export interface EventStore {
  /** Keep `event`; returns its id (increasing, never reused). Drops what falls out of the window. */
  append(event: RolloutEvent): number
  /** Kept events with an id above `id`, oldest first. */
  after(id: number): { id: number; event: RolloutEvent }[]
  /** The newest id handed out (0: none yet). */
  latest(): number
}

/** The window in memory (a bus without a durable store: tests, or an object without storage). */
export class MemoryEventStore implements EventStore {
  readonly #ring: { id: number; event: RolloutEvent }[] = []
  #next = 0

  append(event: RolloutEvent): number {
    const id = ++this.#next
    this.#ring.push({ id, event })
    if (this.#ring.length > RING_SIZE) this.#ring.shift()
    return id
  }

  after(id: number): { id: number; event: RolloutEvent }[] {
    return this.#ring.filter((entry) => entry.id > id)
  }

  latest(): number {
    return this.#next
  }
}

interface Subscriber {
  filter: Subscription
  writer: WritableStreamDefaultWriter<Uint8Array>
  close(): void
}

export class EventBus {
  readonly #store: EventStore
  readonly #heartbeatMs: number
  readonly #subscribers = new Set<Subscriber>()
  readonly #encoder = new TextEncoder()
  /** This object's start (in `hello`): a client can tell the edge restarted. */
  readonly #boot = Date.now().toString(36)

  constructor(options: { store?: EventStore; heartbeatMs?: number } = {}) {
    this.#store = options.store ?? new MemoryEventStore()
    this.#heartbeatMs = options.heartbeatMs ?? HEARTBEAT_MS
  }

  get subscribers(): number {
    return this.#subscribers.size
  }

  publish(event: RolloutEvent): string {
    const id = String(this.#store.append(event))
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
    const heartbeat = setInterval(() => this.#raw(subscriber, ': ping\n\n'), this.#heartbeatMs)
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
      // After the named event (ids are kept across restarts); otherwise (`0`, an id this edge never issued, or one
      // that has left the window) the whole window: a reconnecting client may see an event twice, never miss one.
      const named = /^\d{1,15}$/.test(filter.lastEventId) ? Number(filter.lastEventId) : 0
      const from = named <= this.#store.latest() ? named : 0
      for (const entry of this.#store.after(from)) this.#write(subscriber, String(entry.id), entry.event)
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
