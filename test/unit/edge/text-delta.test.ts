import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { applyTextDelta, diffText } from '../../../src/durable/session/text-delta.ts'

describe('text delta', () => {
  it('reconstructs any text from any base exactly', () => {
    // Code units, not characters: JSON punctuation, a two-unit emoji's halves (also alone: lone surrogates),
    // and NUL. A small alphabet and pairs built from shared pieces make long common prefixes and suffixes
    // (the interesting case) common; `unit: 'binary'` strings cost seconds to generate and rarely share any.
    const unit = fc.constantFrom('a', 'b', '"', '{', '\\', '\u00e9', '\ud83d', '\ude42', '\ude43', '\u0000')
    const text = fc.string({ unit, maxLength: 24 })
    const related = fc
      .tuple(text, text, text, text)
      .map(([head, middle, tail, other]) => [head + middle + tail, head + other + tail] as const)
    fc.assert(
      fc.property(fc.oneof(fc.tuple(text, text), related), ([base, target]) => applyTextDelta(base, diffText(base, target)) === target),
      { numRuns: 1000 },
    )
  })

  it('stores only the changed middle of a growing JSON conversation', () => {
    const messages = Array.from({ length: 200 }, (_, i) => ({ role: i % 2 ? 'assistant' : 'user', content: `message ${i} `.repeat(20) }))
    const tools = [{ type: 'function', function: { name: 'bash', parameters: { type: 'object' } } }]
    const before = JSON.stringify({ model: 'm', messages, tools })
    const after = JSON.stringify({ model: 'm', messages: [...messages, { role: 'user', content: 'new turn' }], tools })
    const delta = diffText(before, after)
    expect(delta.middle.length).toBeLessThan(40)
    expect(applyTextDelta(before, delta)).toBe(after)
  })

  it('never splits a surrogate pair (the middle stays valid UTF-16)', () => {
    const base = 'a🙂b'
    const text = 'a🙃b'
    const delta = diffText(base, text)
    expect(delta.middle).toBe('🙃')
    expect(delta.middle.isWellFormed()).toBe(true)
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme' }), fc.string({ unit: 'grapheme' }), (a, b) => {
        expect(diffText(a, b).middle.isWellFormed()).toBe(true)
      }),
      { numRuns: 1000 },
    )
  })
})
