/**
 * @module
 * A counting semaphore with explicit ownership: `tryAcquire()` hands out a `Lease`; only that lease can give
 * the slot back, and only once (a second `release()` is a no-op that is counted as `doubleReleases`, so tests
 * can prove it never happens). The pools of the runner never wait on a pool: the pipeline asks
 * `tryAcquire()` whenever something changed, so cancelling a waiting session never has to unhook a waiter.
 */

export class Lease {
  readonly pool: SlotPool
  readonly owner: string
  #released = false
  constructor(pool: SlotPool, owner: string) {
    this.pool = pool
    this.owner = owner
  }

  get released(): boolean {
    return this.#released
  }

  /** Give the slot back; true the first time, false (and counted) on any later call. */
  release(): boolean {
    if (this.#released) {
      this.pool.noteDoubleRelease()
      return false
    }
    this.#released = true
    this.pool.returnSlot(this)
    return true
  }
}

export class SlotPool {
  #inUse = 0
  #peak = 0
  #doubleReleases = 0
  readonly #owners = new Set<Lease>()

  readonly name: string
  readonly capacity: number

  constructor(name: string, capacity: number) {
    this.name = name
    this.capacity = capacity
    if (!Number.isInteger(capacity) || capacity < 0) throw new Error(`${name}: capacity must be an integer ≥ 0`)
  }

  get inUse(): number {
    return this.#inUse
  }

  get free(): number {
    return this.capacity - this.#inUse
  }

  get peak(): number {
    return this.#peak
  }

  get doubleReleases(): number {
    return this.#doubleReleases
  }

  /** Owners of the slots in use (for diagnostics and leak checks). */
  owners(): string[] {
    return [...this.#owners].map((lease) => lease.owner)
  }

  tryAcquire(owner: string): Lease | null {
    if (this.#inUse >= this.capacity) return null
    this.#inUse++
    this.#peak = Math.max(this.#peak, this.#inUse)
    const lease = new Lease(this, owner)
    this.#owners.add(lease)
    return lease
  }

  /** @internal called by Lease.release exactly once per lease. */
  returnSlot(lease: Lease): void {
    if (!this.#owners.delete(lease)) throw new Error(`${this.name}: lease of ${lease.owner} is not from this pool`)
    this.#inUse--
  }

  /** @internal */
  noteDoubleRelease(): void {
    this.#doubleReleases++
  }
}
