/**
 * @module
 * One memory budget for the delta-base caches of every completion log in the isolate.
 *
 * workerd runs many Durable Objects of a class in one isolate (128 MB in production), so a bound per object
 * is no bound: 16 busy sessions at 524 KB kept ~400 MB of bases under the old 24 MiB per object, and the
 * collector walked that heap on every call (`docs/hot-path.md`). Here each log owns a `BaseCache` (its
 * entries live and die with it) and all caches share one `BaseBudget` (`isolateBudget`, module state: one
 * per isolate). Over the budget, entries go in this order:
 * 1. the least recently used entry, across all objects, that is not *protected*. Each log protects its
 *    newest completion per agent among its delta base candidates (`BaseCache.protect`): the base the next
 *    turn of each agent compares against, so a sub-agent's calls between the main agent's never evict the
 *    main chain's base (each miss walks the chain back from storage);
 * 2. then protected entries, of another object than the one adding (its own last): of the object used
 *    fewest times (by `protect` calls, in powers of two), and among those the most recently used. Least
 *    recently used would be the worst order for sessions calling in turn whose newest bases do not all fit
 *    (16 at 524 KB were 16 × 5.6 MiB, over 64, before bases were slimmed; 17 of today's 3.74 MiB fit): each
 *    call's base would be the one evicted the longest ago.
 *    Evicting the most recently used other object keeps the bases of the ones calling next, but in a mix of
 *    hot and warm sessions it evicts a hot one; so the rarely used go first, and in turn the latest of them.
 *    Simulated on this class with each order planted (5.6 MiB bases, 64 MiB, 8 MiB rest; the test "sessions
 *    taking turns" in `test/unit/edge/base-cache-budget.test.ts` pins this order's counts),
 *    misses of a protected newest base, (a) 16 sessions in round robin, 6 rounds after the first, and (b) 2 hot
 *    sessions alternating with one call of 14 warm ones (round robin) after every 4 hot calls, 600 hot calls:
 *    | order among protected entries | (a) misses | (b) hot / warm misses |
 *    | --- | --- | --- |
 *    | least recently used object (before) | 96 of 96 | 0 of 598 / 136 of 136 |
 *    | most recently used other object | 36 of 96 | 216 of 598 / 54 of 136 |
 *    | a seeded-random other object | 64 of 96 | 22 of 598 / 101 of 136 |
 *    | fewest uses (log2), then most recently used (this) | 38 of 96 | 0 of 598 / 65 of 136 |
 *    Counts in powers of two, so that sessions taking turns (counts one apart) rank alike. They do not
 *    decay: an object idle for `idleMs` protects nothing anyway, and a new object (fewest uses, first to lose
 *    its base) has the shortest chain to walk back.
 * The unprotected entries are also held within a smaller `restLimit` (`BASE_REST_BYTES`): the isolate keeps the
 * bases the next turns need and little else.
 * An object unused for `idleMs` protects nothing (its entries are evicted as unprotected, by age): a Durable
 * Object dropped by workerd keeps no entry ahead of live ones. The budget holds only caches that have
 * entries (an emptied one leaves the set), so the structure never grows with the sessions an isolate has
 * seen; a dropped object's entries are at most the budget and the first to go. No `WeakRef` (workerd hides
 * it without the `enable_weak_ref` flag) and nothing left to the collector's timing.
 *
 * A cache may name the object it belongs to (`key`: the session id). workerd drops an idle Durable Object and
 * makes a new one for the next request, in the same isolate; the old object's cache, used often and recently,
 * would keep its protected bases for `idleMs` ahead of the new object's (fewest uses: evicted first), so
 * every call of the new object walked its chain back (`docs/hot-path.md`, "Slimmer delta bases": 48 objects
 * for 16 sessions in one benchmark). A new cache under a key therefore empties the caches held under it.
 *
 * Which entries are cached never changes what a log stores: a base is chosen from storage only.
 */

/**
 * What a cache holds: an entry of `bytes` under its completion's seq (`baseBytes` in `completion-log.ts`: an
 * upper bound of the entry's heap, measured in `test/unit/edge/base-heap.test.ts`).
 */
export interface CachedBase {
  readonly seq: number
  bytes: number
}

/**
 * The isolate-wide bound, by the entries' charge (an upper bound of their heap: bodies are charged two bytes a
 * character, and V8 keeps ASCII JSON at one, so ASCII bases hold ~0.8 of it), half of workerd's 128 MB per
 * isolate. A 524 KB call's base is charged ~2.5 MiB with ~134k prompt ids (3.74 MiB with the bench stub's
 * 262k; 5.6 MiB before its separators were kept for every 64th id only and its upstream body as an edit of
 * the original: `docs/hot-path.md`, "Slimmer delta bases"), so this holds the newest bases of 17–25 such
 * sessions. More sessions taking turns than fit walk their chains back on most calls ("one budget per
 * isolate": 48 MiB cost more CPU per call than 64 there; memory is what this bounds).
 */
export const BASE_BUDGET_BYTES = 64 * 1024 * 1024
/**
 * Of which, entries no object protects (older bases, bases of idle objects): little, since a next turn
 * compares its agent's newest first and a read rebuilds what it needs; the heap stays small when few sessions
 * are busy (a 4 MiB bound per object cut the 524 KB tail at c=1: `docs/hot-path.md`).
 */
export const BASE_REST_BYTES = 8 * 1024 * 1024
/** An object unused this long protects no entry (production drops idle objects sooner). */
export const BASE_IDLE_MS = 2 * 60 * 1000

interface Slot<E> {
  entry: E
  /** The budget's clock at the last use. */
  used: number
}

export class BaseBudget {
  readonly limit: number
  readonly idleMs: number
  readonly #now: () => number
  /** Caches holding at least one entry. */
  readonly #caches = new Set<BaseCache<CachedBase>>()
  #bytes = 0
  #clock = 0
  /** Entries evicted so far (tests and benchmarks read it). */
  evictions = 0

  /** Bound on the entries no object protects (older bases: rebuilt from storage when asked for again). */
  readonly restLimit: number

  constructor(limit: number, options: { restLimit?: number; idleMs?: number; now?: () => number } = {}) {
    this.limit = limit
    this.restLimit = Math.min(limit, options.restLimit ?? limit)
    this.idleMs = options.idleMs ?? BASE_IDLE_MS
    this.#now = options.now ?? Date.now
  }

  /** Bytes held by every cache on this budget. */
  get bytes(): number {
    return this.#bytes
  }

  /**
   * @internal (`BaseCache`, before the new cache of the object named `key` holds anything): the caches under
   * that key belong to an object workerd replaced; their entries go.
   */
  supersede(key: string): void {
    for (const cache of [...this.#caches]) {
      if (cache.key !== key) continue
      for (const seq of cache.seqs()) {
        cache.evict(seq)
        this.evictions++
      }
    }
  }

  /** Caches holding entries now. */
  get caches(): number {
    return this.#caches.size
  }

  /** @internal (`BaseCache`) */
  tick(): number {
    return ++this.#clock
  }

  /** @internal */
  now(): number {
    return this.#now()
  }

  /** @internal: `cache` grew (or shrank) by `delta` bytes and holds `size` entries now. */
  account(cache: BaseCache<CachedBase>, delta: number, size: number): void {
    this.#bytes += delta
    if (size === 0) this.#caches.delete(cache)
    else this.#caches.add(cache)
  }

  /** Bytes of the entries no cache protects now (idle caches protect none). */
  restBytes(now = this.#now()): number {
    let rest = this.#bytes
    for (const cache of this.#caches) rest -= cache.protectedBytes(now)
    return rest
  }

  /**
   * @internal: `owner` added or grew `keep`; evict until the total is within `limit` and the unprotected entries within `restLimit`;
   * `keep` (the entry just added or grown) stays.
   */
  fit(owner: BaseCache<CachedBase>, keep: CachedBase): void {
    for (;;) {
      const now = this.#now()
      const over = this.#bytes > this.limit
      if (!over && (this.#bytes <= this.restLimit || this.restBytes(now) <= this.restLimit)) return
      let victim: { cache: BaseCache<CachedBase>; slot: Slot<CachedBase> } | null = null
      for (const cache of this.#caches) {
        const slot = cache.oldestEvictable(keep, now)
        if (slot && (victim === null || slot.used < victim.slot.used)) victim = { cache, slot }
      }
      if (victim === null && !over) return
      victim ??= this.#protectedVictim(owner, keep)
      if (victim === null) return
      victim.cache.evict(victim.slot.entry.seq)
      this.evictions++
    }
  }

  /**
   * Only protected entries are left: the oldest entry of the other object used fewest times (in powers of
   * two), the most recently used of those; `owner`'s own when no other object has one.
   */
  #protectedVictim(owner: BaseCache<CachedBase>, keep: CachedBase): { cache: BaseCache<CachedBase>; slot: Slot<CachedBase> } | null {
    let victim: { cache: BaseCache<CachedBase>; slot: Slot<CachedBase>; rank: number } | null = null
    for (const cache of this.#caches) {
      if (cache === owner) continue
      const slot = cache.oldest(keep)
      if (slot === undefined) continue
      const rank = Math.floor(Math.log2(cache.uses))
      if (victim === null || rank < victim.rank || (rank === victim.rank && cache.used > victim.cache.used)) {
        victim = { cache, slot, rank }
      }
    }
    if (victim !== null) return victim
    const slot = owner.oldest(keep)
    return slot === undefined ? null : { cache: owner, slot }
  }
}

/** The one budget of this isolate (module state: every object of every class in the isolate shares it). */
export const isolateBudget = new BaseBudget(BASE_BUDGET_BYTES, { restLimit: BASE_REST_BYTES })

const NONE: ReadonlySet<number> = new Set()

/** One log's cached bases, least recently used first, charged to a shared `BaseBudget`. */
export class BaseCache<E extends CachedBase> {
  readonly #budget: BaseBudget
  readonly #slots = new Map<number, Slot<E>>()
  #bytes = 0
  #protected: ReadonlySet<number> = NONE
  #used = 0
  #usedAt = 0
  #uses = 0

  /** The object this cache belongs to (the session id), when named: a new cache under it empties this one. */
  readonly key: string | undefined

  constructor(budget: BaseBudget = isolateBudget, key?: string) {
    this.#budget = budget
    this.key = key
    if (key !== undefined) budget.supersede(key)
  }

  /** @internal: the seqs cached now. */
  seqs(): number[] {
    return [...this.#slots.keys()]
  }

  /** Bytes this cache holds. */
  get bytes(): number {
    return this.#bytes
  }

  get size(): number {
    return this.#slots.size
  }

  /** The entries' own sizes added up now (tests: checks what `bytes` charged, growth included). */
  entryBytes(): number {
    let sum = 0
    for (const slot of this.#slots.values()) sum += slot.entry.bytes
    return sum
  }

  /** The budget's clock when this cache was last used. */
  get used(): number {
    return this.#used
  }

  /** `protect` calls so far (one a record, one when a woken log first reads its rows): how often this object is used. */
  get uses(): number {
    return this.#uses
  }

  /** The entry cached under `seq` (now the most recently used), if any. */
  get(seq: number): E | undefined {
    const slot = this.#slots.get(seq)
    if (slot === undefined) return undefined
    this.#touch(slot)
    return slot.entry
  }

  has(entry: E): boolean {
    return this.#slots.get(entry.seq)?.entry === entry
  }

  /** Cache `entry` (replacing one of its seq) as the most recently used, then fit the budget. */
  set(entry: E): void {
    const old = this.#slots.get(entry.seq)
    if (old !== undefined) {
      this.#slots.delete(entry.seq)
      this.#charge(-old.entry.bytes)
    }
    const slot: Slot<E> = { entry, used: 0 }
    this.#slots.set(entry.seq, slot)
    this.#touch(slot)
    this.#charge(entry.bytes)
    this.#budget.fit(this as unknown as BaseCache<CachedBase>, entry)
  }

  /** `entry` (cached) grew by `bytes` (a layout or a prompt text added when first asked for): charged, then fit. */
  grew(entry: E, bytes: number): void {
    entry.bytes += bytes
    if (!this.has(entry)) return
    this.#charge(bytes)
    this.#budget.fit(this as unknown as BaseCache<CachedBase>, entry)
  }

  /** The seqs evicted last of this cache (its newest completion per agent); replaces the previous set. */
  protect(seqs: ReadonlySet<number>): void {
    this.#protected = seqs
    this.#uses++
    this.#used = this.#budget.tick()
    this.#usedAt = this.#budget.now()
  }

  isProtected(seq: number): boolean {
    return this.#protected.has(seq)
  }

  /** @internal: bytes of the entries this cache protects now (none when idle). */
  protectedBytes(now: number): number {
    if (now - this.#usedAt > this.#budget.idleMs) return 0
    let sum = 0
    for (const seq of this.#protected) sum += this.#slots.get(seq)?.entry.bytes ?? 0
    return sum
  }

  /** @internal (`BaseBudget.fit`): the least recently used entry that is not protected (none protected when idle), not `keep`. */
  oldestEvictable(keep: CachedBase, now: number): Slot<E> | undefined {
    const idle = now - this.#usedAt > this.#budget.idleMs
    for (const slot of this.#slots.values()) {
      if (slot.entry !== keep && (idle || !this.#protected.has(slot.entry.seq))) return slot
    }
    return undefined
  }

  /** @internal: the least recently used entry, not `keep`. */
  oldest(keep: CachedBase): Slot<E> | undefined {
    for (const slot of this.#slots.values()) if (slot.entry !== keep) return slot
    return undefined
  }

  /** @internal */
  evict(seq: number): void {
    const slot = this.#slots.get(seq)
    if (slot === undefined) return
    this.#slots.delete(seq)
    this.#charge(-slot.entry.bytes)
  }

  #touch(slot: Slot<E>): void {
    const tick = this.#budget.tick()
    slot.used = tick
    this.#used = tick
    this.#usedAt = this.#budget.now()
    // Most recently used last (a Map keeps insertion order).
    this.#slots.delete(slot.entry.seq)
    this.#slots.set(slot.entry.seq, slot)
  }

  #charge(delta: number): void {
    this.#bytes += delta
    this.#budget.account(this as unknown as BaseCache<CachedBase>, delta, this.#slots.size)
  }
}
