/**
 * @module engine/lru-cache
 * A least-recently-used map bounded both by entry count and by a caller-defined weight
 * (characters, bytes, …), so a handful of huge values cannot pin unbounded memory.
 */

interface Entry<V> {
  value: V
  weight: number
}

export interface LruCacheOptions {
  /** Hard cap on the number of entries. */
  maxEntries: number
  /** Cap on the summed weight of all entries; `Infinity` when omitted. */
  maxWeight?: number
}

export class LruCache<K, V> {
  readonly #entries = new Map<K, Entry<V>>()
  readonly #maxEntries: number
  readonly #maxWeight: number
  #weight = 0
  hits = 0
  misses = 0

  constructor(options: LruCacheOptions) {
    this.#maxEntries = Math.max(1, options.maxEntries)
    this.#maxWeight = options.maxWeight ?? Number.POSITIVE_INFINITY
  }

  get size(): number {
    return this.#entries.size
  }

  get weight(): number {
    return this.#weight
  }

  get(key: K): V | undefined {
    const entry = this.#entries.get(key)
    if (entry === undefined) {
      this.misses++
      return undefined
    }
    // Re-insert to mark as most recently used (Map keeps insertion order).
    this.#entries.delete(key)
    this.#entries.set(key, entry)
    this.hits++
    return entry.value
  }

  set(key: K, value: V, weight = 1): void {
    if (weight > this.#maxWeight) return
    const previous = this.#entries.get(key)
    if (previous !== undefined) {
      this.#entries.delete(key)
      this.#weight -= previous.weight
    }
    this.#entries.set(key, { value, weight })
    this.#weight += weight
    this.#evict()
  }

  clear(): void {
    this.#entries.clear()
    this.#weight = 0
  }

  #evict(): void {
    while (this.#entries.size > this.#maxEntries || this.#weight > this.#maxWeight) {
      const oldest = this.#entries.keys().next()
      if (oldest.done === true) return
      const entry = this.#entries.get(oldest.value)
      this.#entries.delete(oldest.value)
      if (entry !== undefined) this.#weight -= entry.weight
    }
  }
}
