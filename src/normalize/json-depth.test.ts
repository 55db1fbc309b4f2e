import { describe, expect, it } from 'vitest'
import { exceedsJsonDepth, MAX_JSON_DEPTH } from './json-depth.ts'

function nested(levels: number): unknown {
  let value: unknown = 1
  for (let i = 0; i < levels; i++) value = i % 2 ? [value] : { a: value }
  return value
}

describe('exceedsJsonDepth', () => {
  it('counts the top-level container as level 1 and scalars as no level', () => {
    expect(exceedsJsonDepth(1, 0)).toBe(false)
    expect(exceedsJsonDepth({}, 1)).toBe(false)
    expect(exceedsJsonDepth([[]], 1)).toBe(true)
    expect(exceedsJsonDepth(nested(MAX_JSON_DEPTH))).toBe(false)
    expect(exceedsJsonDepth(nested(MAX_JSON_DEPTH + 1))).toBe(true)
  })

  it('finds a deep branch beside shallow ones, and walks a million levels without recursion', () => {
    expect(exceedsJsonDepth({ shallow: [1, 2, { x: 3 }], deep: nested(MAX_JSON_DEPTH) })).toBe(true)
    expect(exceedsJsonDepth(nested(1_000_000))).toBe(true)
  })
})
