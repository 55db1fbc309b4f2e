/**
 * The isolate-wide budget of the delta-base caches (`base-cache-budget.ts`), on plain entries: one bound
 * over every cache, least recently used first across caches, each cache's protected entries (its newest
 * base per agent) last, then another cache's: the one used fewest times, the latest of those (sessions taking
 * turns keep most bases); unprotected entries within a smaller rest limit; an idle cache protects nothing;
 * growth is charged; an emptied cache leaves the budget.
 */
import { describe, expect, it } from 'vitest'
import { BaseBudget, BaseCache, type CachedBase } from '../../../src/durable/session/base-cache-budget.ts'

const entry = (seq: number, bytes = 10): CachedBase => ({ seq, bytes })
/** The entries `put` into each cache, by seq (to ask `has` without `get`, which makes an entry the most recently used). */
const probes = new WeakMap<BaseCache<CachedBase>, Map<number, CachedBase>>()
/** Which of `candidates` the cache holds. */
function held(cache: BaseCache<CachedBase>, candidates: number[]): number[] {
  return candidates.filter((seq) => {
    const known = probes.get(cache)?.get(seq)
    return known !== undefined && cache.has(known)
  })
}
function put(cache: BaseCache<CachedBase>, item: CachedBase): CachedBase {
  const known = probes.get(cache) ?? new Map<number, CachedBase>()
  probes.set(cache, known)
  known.set(item.seq, item)
  cache.set(item)
  return item
}

describe('base cache budget', () => {
  it('one bound over every cache: the least recently used entry goes first, whichever cache holds it', () => {
    const budget = new BaseBudget(50)
    const a = new BaseCache(budget)
    const b = new BaseCache(budget)
    put(a, entry(1))
    put(b, entry(1))
    put(a, entry(2))
    put(b, entry(2))
    put(a, entry(3))
    expect(budget.bytes).toBe(50)
    a.get(1) // a's 1 is now the most recently used: b's 1 is the oldest
    put(b, entry(3))
    expect(budget.bytes).toBe(50)
    expect(held(b, [1, 2, 3])).toEqual([2, 3])
    expect(held(a, [1, 2, 3])).toEqual([1, 2, 3])
    put(b, entry(4))
    expect(held(a, [1, 2, 3])).toEqual([1, 3])
    expect(a.bytes + b.bytes).toBe(budget.bytes)
  })

  it('protected entries (the newest base per agent) go after every unprotected one, of any cache', () => {
    const budget = new BaseBudget(40)
    const a = new BaseCache(budget)
    const b = new BaseCache(budget)
    put(a, entry(1))
    a.protect(new Set([1]))
    for (let seq = 1; seq <= 6; seq++) put(b, entry(seq))
    // b's own older entries went; a's protected one stayed although it is the oldest.
    expect(held(a, [1])).toEqual([1])
    expect(held(b, [1, 2, 3, 4, 5, 6])).toEqual([4, 5, 6])
    b.protect(new Set([5, 6]))
    put(b, entry(7))
    expect(held(b, [4, 5, 6, 7])).toEqual([5, 6, 7])
    expect(budget.evictions).toBe(4)
  })

  it('when the protected entries alone are over the budget, another cache’s go: the one used fewest times, the latest of those', () => {
    const budget = new BaseBudget(30)
    const caches = [0, 1, 2, 3].map(() => new BaseCache(budget))
    caches.forEach((cache, i) => {
      put(cache, entry(1))
      cache.protect(new Set([1]))
      expect(budget.bytes, `after cache ${i}`).toBeLessThanOrEqual(30)
    })
    // Caches 0–2 used once each when cache 3 added its entry: the latest of them, cache 2, lost its entry.
    expect(caches.map((cache) => held(cache, [1]).length)).toEqual([1, 1, 0, 1])
    for (let use = 0; use < 3; use++) caches[0]?.protect(new Set([1])) // cache 0: used 4 times, the latest
    put(caches[2] as BaseCache<CachedBase>, entry(1))
    // Not cache 0 (most recently used, but used most), not cache 1 (least recently used): cache 3.
    expect(caches.map((cache) => cache.size)).toEqual([1, 1, 1, 0])
    expect(budget.caches).toBe(3)
  })

  it('a new cache of a session empties the caches of its replaced objects, no other', () => {
    const budget = new BaseBudget(100)
    const old = new BaseCache(budget, 'ses_a')
    const other = new BaseCache(budget, 'ses_b')
    const unnamed = new BaseCache(budget)
    for (const cache of [old, other, unnamed]) {
      put(cache, entry(1))
      cache.protect(new Set([1]))
    }
    expect(budget.caches).toBe(3)
    const renewed = new BaseCache(budget, 'ses_a')
    expect(held(old, [1])).toEqual([])
    expect(held(other, [1])).toEqual([1])
    expect(held(unnamed, [1])).toEqual([1])
    expect(budget.caches).toBe(2)
    expect(budget.bytes).toBe(other.bytes + unnamed.bytes)
    put(renewed, entry(2))
    expect(held(renewed, [2])).toEqual([2])
  })

  it('the adding cache’s own protected entries go last (after another cache’s, even one used more), oldest first', () => {
    const budget = new BaseBudget(25)
    const a = new BaseCache(budget)
    put(a, entry(1))
    put(a, entry(2))
    a.protect(new Set([1, 2]))
    put(a, entry(3))
    expect(held(a, [1, 2, 3])).toEqual([2, 3])
    // Another cache, used more often, still loses its entry before the adding cache's own protected one.
    const b = new BaseCache(budget)
    put(b, entry(1))
    for (let use = 0; use < 4; use++) b.protect(new Set([1]))
    const c = new BaseCache(budget)
    put(c, entry(1))
    c.protect(new Set([1]))
    expect(held(b, [1])).toEqual([1])
    put(c, entry(2))
    expect(held(b, [1])).toEqual([])
    expect(held(c, [1, 2])).toEqual([1, 2])
  })

  it('sessions taking turns whose newest bases do not fit do not each evict the next one’s base; hot sessions keep theirs', () => {
    const MiB = 1024 * 1024
    const base = 5.6 * MiB // a 524 KB call's base with the bench stub's 262k prompt ids, before slimmer bases (the policy's worst case)
    /** Misses of each session's newest base (its previous record), per session, over `schedule`. */
    function misses(sessions: number, schedule: number[]): { missed: number[]; calls: number[] } {
      const budget = new BaseBudget(64 * MiB, { restLimit: 8 * MiB, now: () => 0 })
      const caches = Array.from({ length: sessions }, () => new BaseCache(budget))
      const newest: number[] = caches.map(() => 0)
      const missed: number[] = caches.map(() => 0)
      const calls: number[] = caches.map(() => 0)
      for (const s of schedule) {
        const cache = caches[s] as BaseCache<CachedBase>
        const previous = newest[s] as number
        if (previous > 0) {
          calls[s] = (calls[s] as number) + 1
          if (cache.get(previous) === undefined) {
            missed[s] = (missed[s] as number) + 1
            cache.set(entry(previous, base)) // walked back from storage
          }
        }
        newest[s] = previous + 1
        cache.set(entry(previous + 1, base))
        cache.protect(new Set([previous + 1]))
      }
      return { missed, calls }
    }
    const sum = (values: number[]) => values.reduce((total, value) => total + value, 0)
    // (a) 16 sessions in round robin, 7 rounds: least recently used first would miss all 96.
    const roundRobin = Array.from({ length: 7 * 16 }, (_, i) => i % 16)
    const a = misses(16, roundRobin)
    expect(sum(a.calls)).toBe(96)
    expect(sum(a.missed)).toBeLessThanOrEqual(40)
    // (b) 2 hot sessions alternating, one call of 14 warm ones (in turn) after every 4 hot calls: the most
    // recently used other session first would miss 216 of the hot sessions' 598 bases.
    const mixed: number[] = []
    for (let i = 0, warm = 0; i < 600; i++) {
      mixed.push(i % 2)
      if ((i + 1) % 4 === 0) mixed.push(2 + (warm++ % 14))
    }
    const b = misses(16, mixed)
    expect(sum(b.calls.slice(0, 2))).toBe(598)
    expect(sum(b.missed.slice(0, 2))).toBe(0)
    expect(sum(b.calls.slice(2))).toBe(136)
    expect(sum(b.missed.slice(2))).toBeLessThanOrEqual(70)
  })

  it('an entry larger than the budget stays alone (it is in use), and a cache emptied by others leaves the budget', () => {
    const budget = new BaseBudget(25)
    const a = new BaseCache(budget)
    const b = new BaseCache(budget)
    put(a, entry(1))
    put(a, entry(2))
    expect(budget.caches).toBe(1)
    put(b, entry(1, 100))
    expect(a.size).toBe(0)
    expect(budget.caches).toBe(1)
    expect(budget.bytes).toBe(100)
    put(b, entry(2))
    expect(held(b, [1, 2])).toEqual([2])
    expect(budget.bytes).toBe(10)
  })

  it('growth of a cached entry is charged and fitted; growth of an evicted one is not charged', () => {
    const budget = new BaseBudget(40)
    const a = new BaseCache(budget)
    const first = put(a, entry(1))
    const second = put(a, entry(2))
    a.grew(second, 15)
    expect(second.bytes).toBe(25)
    expect(budget.bytes).toBe(35)
    a.grew(second, 10)
    // 45 > 40: the other entry goes, the grown one stays.
    expect(held(a, [1, 2])).toEqual([2])
    expect(budget.bytes).toBe(35)
    a.grew(first, 5)
    expect(first.bytes).toBe(15)
    expect(budget.bytes).toBe(35)
  })

  it('entries nobody protects are held within the smaller rest limit; protected ones only count toward the total', () => {
    let now = 0
    const budget = new BaseBudget(100, { restLimit: 25, idleMs: 1000, now: () => now })
    const a = new BaseCache(budget)
    const b = new BaseCache(budget)
    put(a, entry(1))
    a.protect(new Set([1]))
    put(b, entry(1))
    b.protect(new Set([1]))
    for (let seq = 2; seq <= 5; seq++) put(a, entry(seq))
    // Four unprotected entries of 10 bytes: the oldest two went (rest 20 ≤ 25), the protected ones stayed.
    expect(held(a, [1, 2, 3, 4, 5])).toEqual([1, 4, 5])
    expect(held(b, [1])).toEqual([1])
    expect(budget.restBytes()).toBe(20)
    expect(budget.bytes).toBe(40)
    // b idle: its entry is rest now, and the next entry pushes out the oldest rest entries (b's first).
    now = 1500
    a.protect(new Set([1]))
    put(a, entry(6))
    expect(held(b, [1])).toEqual([])
    expect(held(a, [1, 4, 5, 6])).toEqual([1, 5, 6])
    expect(budget.restBytes()).toBe(20)
  })

  it('a cache unused for the idle time protects nothing: its entries go before a busy cache’s', () => {
    let now = 0
    const budget = new BaseBudget(40, { idleMs: 1000, now: () => now })
    const idle = new BaseCache(budget)
    const busy = new BaseCache(budget)
    put(idle, entry(1))
    put(idle, entry(2))
    idle.protect(new Set([1, 2]))
    now = 500
    put(busy, entry(1))
    put(busy, entry(2))
    busy.protect(new Set([2]))
    put(busy, entry(3))
    // Within the idle time: the busy cache's unprotected entry went.
    expect(held(idle, [1, 2])).toEqual([1, 2])
    expect(held(busy, [1, 2, 3])).toEqual([2, 3])
    now = 1600 // the idle cache was last used at 0: past the idle time now
    busy.protect(new Set([3]))
    put(busy, entry(4))
    expect(held(idle, [1, 2])).toEqual([2])
    expect(held(busy, [2, 3, 4])).toEqual([2, 3, 4])
  })
})
