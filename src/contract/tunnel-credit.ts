/**
 * @module
 * Per-request flow control of the inference tunnel (capability `tunnel.credit`, see `runner-protocol.ts`),
 * the same code on both ends of the link:
 * - `CreditWindow` (the sender of a request's body bytes: the edge for request bodies, the runner for
 *   answers): how much more may be sent; `tunnel.credit` from the receiver grants more.
 * - `CreditedQueue` (the receiver): body frames queue until the consumer takes them (the engine call for
 *   request bodies, the Worker's reader for answers), and only then is the sender granted credit back, in
 *   batches of half a window (fewer messages; the sender never stalls on a full window). A sender that
 *   goes beyond the window it was granted is refused (`push` → `'window'`).
 * Without credit (a plain v1 peer) a queue has no window to hold the sender to: it takes frames up to a
 * fixed `capBytes` of unread bytes and refuses beyond (`'cap'`), so a stalled consumer still bounds it.
 */

/** The sender's side of one request's window. */
export class CreditWindow {
  /** Bytes the receiver still lets this side send. */
  allowance: number
  /** Sent and not yet acknowledged (at most the window). */
  unacked = 0
  /** Largest `unacked` seen (tests and stats assert the bound on it). */
  maxUnacked = 0
  #wake: (() => void) | null = null

  constructor(windowBytes: number) {
    this.allowance = windowBytes
  }

  /** Count bytes as sent. */
  spend(bytes: number): void {
    this.allowance -= bytes
    this.unacked += bytes
    if (this.unacked > this.maxUnacked) this.maxUnacked = this.unacked
  }

  /** The receiver acknowledged `bytes` (a `tunnel.credit`). */
  grant(bytes: number): void {
    this.allowance += bytes
    this.unacked = Math.max(0, this.unacked - bytes)
    const wake = this.#wake
    this.#wake = null
    wake?.()
  }

  /** Resolves once some credit is there, or the signal aborted. */
  async available(signal: AbortSignal): Promise<void> {
    while (this.allowance <= 0 && !signal.aborted) {
      await new Promise<void>((resolve) => {
        const done = () => {
          signal.removeEventListener('abort', done)
          this.#wake = null
          resolve()
        }
        this.#wake = done
        signal.addEventListener('abort', done)
      })
    }
  }
}

export interface CreditedQueueOptions {
  /** The credit window (bytes); null: no credit (a plain v1 peer), `capBytes` bounds the queue instead. */
  windowBytes: number | null
  /** Without credit: the most unread bytes held before `push` refuses. */
  capBytes?: number
  /** Grant the sender `bytes` more (send `tunnel.credit`); only with a window. */
  grant?(bytes: number): void
  /** The consumer took `bytes` (called before any grant). */
  taken?(bytes: number): void
  /** Queued bytes were dropped unread (the queue failed). */
  dropped?(bytes: number): void
  /** The consumer cancelled the stream (the queue has failed already). */
  cancel?(): void
}

/** Why `push` refused a frame (null: taken). */
export type QueueRefusal = 'window' | 'cap' | null

/** The receiver's side of one request's body: a queue of frames the consumer reads at its own pace. */
export class CreditedQueue {
  readonly #options: CreditedQueueOptions
  readonly #frames: Uint8Array[] = []
  /** Received and not yet taken. */
  #queued = 0
  /** Received and not yet acknowledged to the sender (taken bytes are acknowledged in batches). */
  #unacked = 0
  /** Taken and not yet acknowledged. */
  #taken = 0
  #ended = false
  #failed: Error | null = null
  #waiter: { resolve(chunk: Uint8Array | null): void; reject(error: Error): void } | null = null
  #stream: ReadableStream<Uint8Array> | null = null
  /** Largest count of bytes queued and not yet taken. */
  maxQueued = 0
  /** Credit messages granted. */
  grants = 0

  constructor(options: CreditedQueueOptions) {
    this.#options = options
  }

  /** Bytes received and not yet taken by the consumer. */
  get queued(): number {
    return this.#queued
  }

  get ended(): boolean {
    return this.#ended
  }

  /** A frame from the sender (`end`: its last). Refused (nothing queued) beyond the window or the cap. */
  push(bytes: Uint8Array, end: boolean): QueueRefusal {
    const size = bytes.byteLength
    const { windowBytes, capBytes } = this.#options
    if (windowBytes !== null && this.#unacked + size > windowBytes) return 'window'
    if (windowBytes === null && capBytes !== undefined && this.#queued + size > capBytes) return 'cap'
    if (size) {
      const waiter = this.#waiter
      if (waiter && this.#frames.length === 0) {
        // A read is waiting: hand the frame over directly.
        this.#waiter = null
        this.#unacked += size
        if (end) this.#ended = true
        this.#took(size)
        waiter.resolve(bytes)
        return null
      }
      this.#frames.push(bytes)
      this.#queued += size
      this.#unacked += size
      if (this.#queued > this.maxQueued) this.maxQueued = this.#queued
    }
    if (end) {
      this.#ended = true
      if (this.#frames.length === 0 && this.#waiter) {
        const waiter = this.#waiter
        this.#waiter = null
        waiter.resolve(null)
      }
    }
    return null
  }

  /** The next frame, or null at the end; rejects once the queue failed. One read at a time. */
  read(): Promise<Uint8Array | null> {
    if (this.#failed) return Promise.reject(this.#failed)
    const next = this.#frames.shift()
    if (next) {
      this.#queued -= next.byteLength
      this.#took(next.byteLength)
      return Promise.resolve(next)
    }
    if (this.#ended) return Promise.resolve(null)
    return new Promise((resolve, reject) => {
      this.#waiter = { resolve, reject }
    })
  }

  /** Fail the queue: a waiting read and every later one reject; what was queued is dropped. */
  fail(error: Error): void {
    if (this.#failed) return
    this.#failed = error
    const dropped = this.#queued
    this.#frames.length = 0
    this.#queued = 0
    if (dropped) this.#options.dropped?.(dropped)
    const waiter = this.#waiter
    this.#waiter = null
    waiter?.reject(error)
  }

  /** The queue as a byte stream pulled by its consumer (high-water mark 0: nothing is read ahead). */
  get stream(): ReadableStream<Uint8Array> {
    this.#stream ??= new ReadableStream<Uint8Array>(
      {
        pull: async (controller) => {
          const chunk = await this.read()
          if (chunk) controller.enqueue(chunk)
          else controller.close()
        },
        cancel: () => {
          this.fail(new Error('the reader cancelled'))
          this.#options.cancel?.()
        },
      },
      { highWaterMark: 0 },
    )
    return this.#stream
  }

  #took(bytes: number): void {
    this.#options.taken?.(bytes)
    const { windowBytes, grant } = this.#options
    if (windowBytes === null || !grant) return
    this.#taken += bytes
    // After the last frame the sender needs no more credit.
    if (this.#taken >= windowBytes / 2 && !this.#ended) {
      const granted = this.#taken
      this.#taken = 0
      this.#unacked -= granted
      this.grants++
      grant(granted)
    }
  }
}
