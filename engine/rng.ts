/**
 * @module engine/rng
 * Small deterministic hashing and PRNG helpers. Everything the stand-in "samples" is derived
 * from (seed, prompt hash, position, label) so identical requests give identical answers.
 */

/** 32-bit FNV-1a offset basis. */
const FNV_OFFSET_BASIS = 0x811c9dc5
const FNV_PRIME = 0x01000193
const GOLDEN_RATIO_32 = 0x9e3779b9
const TWO_POW_32 = 4294967296

export function hashString(text: string, seed = FNV_OFFSET_BASIS): number {
  let hash = seed >>> 0
  for (let index = 0; index < text.length; index++) {
    hash ^= text.charCodeAt(index)
    hash = Math.imul(hash, FNV_PRIME)
  }
  return hash >>> 0
}

export function hashIds(ids: ArrayLike<number>, seed = FNV_OFFSET_BASIS): number {
  let hash = seed >>> 0
  for (let index = 0; index < ids.length; index++) {
    hash = Math.imul(hash ^ (ids[index] ?? 0), FNV_PRIME)
    hash ^= hash >>> 15
  }
  return mix32(hash ^ ids.length)
}

/** Avalanche finalizer (murmur3 fmix32). */
export function mix32(value: number): number {
  let hash = value >>> 0
  hash ^= hash >>> 16
  hash = Math.imul(hash, 0x85ebca6b)
  hash ^= hash >>> 13
  hash = Math.imul(hash, 0xc2b2ae35)
  hash ^= hash >>> 16
  return hash >>> 0
}

/** Combines any number of 32-bit values into one well-mixed 32-bit hash. */
export function combineHashes(...values: number[]): number {
  let hash = GOLDEN_RATIO_32
  for (const value of values) hash = mix32(Math.imul(hash ^ (value >>> 0), FNV_PRIME) + GOLDEN_RATIO_32)
  return hash
}

/** Uniform float in [0, 1) determined by the given values. */
export function unitFloat(...values: number[]): number {
  return combineHashes(...values) / TWO_POW_32
}

export interface Rng {
  /** Uniform float in [0, 1). */
  next(): number
  /** Uniform integer in [0, bound). */
  int(bound: number): number
  pick<T>(items: readonly T[]): T
  /** An independent stream derived from this one's seed and a label. */
  fork(label: string): Rng
}

/** mulberry32: tiny, fast, good enough for choosing phrasings and drift positions. */
export function createRng(seed: number): Rng {
  let state = seed >>> 0
  const next = (): number => {
    state = (state + 0x6d2b79f5) >>> 0
    let value = state
    value = Math.imul(value ^ (value >>> 15), value | 1)
    value ^= value + Math.imul(value ^ (value >>> 7), value | 61)
    return ((value ^ (value >>> 14)) >>> 0) / TWO_POW_32
  }
  const int = (bound: number): number => Math.floor(next() * bound)
  return {
    next,
    int,
    pick: <T>(items: readonly T[]): T => {
      const item = items[int(items.length)]
      if (item === undefined) throw new Error('Rng.pick on an empty list')
      return item
    },
    fork: (label) => createRng(combineHashes(seed, hashString(label))),
  }
}
