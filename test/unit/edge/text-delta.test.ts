import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { applyTextDelta, diffText } from '../../../src/durable/session/text-delta.ts'

describe('text delta', () => {
  it('reconstructs any text from any base exactly', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary' }), fc.string({ unit: 'binary' }), (base, text) => {
        expect(applyTextDelta(base, diffText(base, text))).toBe(text)
      }),
      { numRuns: 2000 },
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
