/**
 * @module
 * A quick structural check for property tests that compare large trajectories many times: `expect(a).toEqual(b)`
 * costs more per element than the builders under test (its generic deep equality looks up keys and testers for
 * every token id). `expectEqual` first compares plain JSON-like values in one pass and only falls back to
 * `toEqual` (for its verdict and its diff) when that pass finds a difference or a value it does not handle, so
 * the verdict is always `toEqual`'s.
 */
import { expect } from 'vitest'

/** True only when `a` and `b` are equal plain values (arrays, plain objects, primitives); else false. */
export function samePlainValue(a: unknown, b: unknown): boolean {
  if (a === b) return true
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false
    for (let i = 0; i < a.length; i++) if (!samePlainValue(a[i], b[i])) return false
    return true
  }
  if (Array.isArray(b) || !isPlainObject(a) || !isPlainObject(b)) return false
  const defined = (value: object) => Object.keys(value).filter((key) => (value as Record<string, unknown>)[key] !== undefined)
  const keys = defined(a)
  if (keys.length !== defined(b).length) return false
  for (const key of keys) {
    if (!Object.hasOwn(b, key) || !samePlainValue((a as Record<string, unknown>)[key], (b as Record<string, unknown>)[key])) return false
  }
  return true
}

function isPlainObject(value: object): boolean {
  const proto = Object.getPrototypeOf(value)
  return proto === Object.prototype || proto === null
}

/** `expect(actual).toEqual(expected)`, with the one-pass check first. */
export function expectEqual(actual: unknown, expected: unknown, message?: string): void {
  if (!samePlainValue(actual, expected)) expect(actual, message).toEqual(expected)
}
