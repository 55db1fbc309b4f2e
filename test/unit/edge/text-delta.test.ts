import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { applyCopyCode, applyTextDelta, copyCode, copyCodePieces, diffText } from '../../../src/durable/session/text-delta.ts'
import { buildEngineRequest } from '../../../src/normalize/engine/engine-request.ts'
import type { ChatRequest } from '../../../src/normalize/types.ts'

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

  describe('copy code', () => {
    // Pieces of a shared alphabet with surrogate halves, so copies start and end next to pairs.
    const unit = fc.constantFrom('a', 'b', '"', '{', '\\', '\u00e9', '😀', '\ud83d', '\ude42', ':', ',')
    const chunk = fc.string({ unit, minLength: 20, maxLength: 80 })
    /** A target made of the source's chunks (reordered, some twice) and new text. */
    const related = fc
      .tuple(fc.array(chunk, { minLength: 1, maxLength: 6 }), fc.array(fc.oneof(fc.nat(), chunk), { maxLength: 10 }))
      .map(([chunks, picks]) => {
        const source = chunks.join('')
        const target = picks.map((pick) => (typeof pick === 'number' ? (chunks[pick % chunks.length] as string) : pick)).join('')
        return [source, target] as const
      })

    it('gives back the target exactly, with literals as valid as the target (any source, any budget)', () => {
      fc.assert(
        fc.property(fc.oneof(related, fc.tuple(chunk, chunk)), fc.constantFrom(Infinity, 40), ([source, target], budget) => {
          const code = copyCode(source, target, budget)
          if (code === null) return
          expect(applyCopyCode(code, source)).toBe(target)
          expect(code.literals.length + code.ops.length).toBeLessThanOrEqual(budget)
          if (target.isWellFormed()) expect(code.literals.isWellFormed()).toBe(true)
        }),
        { numRuns: 2000 },
      )
    })

    it('maps any range of the target to literal and source pieces that spell it', () => {
      fc.assert(
        fc.property(related, fc.nat(), fc.nat(), ([source, target], a, b) => {
          const code = copyCode(source, target, Infinity)
          if (code === null) return
          const start = a % (target.length + 1)
          const end = start + (b % (target.length - start + 1))
          let spelled = ''
          copyCodePieces(code.ops, start, end, (literal, from, to) => {
            spelled += (literal ? code.literals : source).slice(from, to)
          })
          expect(spelled).toBe(target.slice(start, end))
        }),
        { numRuns: 2000 },
      )
    })

    it('stores an engine body renaming reasoning_content as a few copies and a few characters', () => {
      const messages = Array.from({ length: 6 }, (_, i) => ({
        role: 'assistant',
        content: '',
        reasoning_content: `Turn ${i}: the matches so far do not show the failing call, list more of them.`,
        tool_calls: [{ id: `call_${i}`, type: 'function', function: { name: 'bash', arguments: `{"command":"grep -n x | head -${i}"}` } }],
      }))
      const harness = JSON.stringify({ model: 'm', messages })
      const engine = JSON.stringify(buildEngineRequest(JSON.parse(harness) as ChatRequest, { kind: 'vllm', servedModel: null }))
      expect(engine).toContain('"reasoning":"Turn 5')
      const code = copyCode(harness, engine, engine.length)
      expect(code).not.toBeNull()
      expect(applyCopyCode(code!, harness)).toBe(engine)
      // Per message: three copies (the tool call and the reasoning change places) and the renamed key's
      // `,"reasoning`; then the capture keys the engine body adds.
      expect(code!.ops.length / 3).toBeLessThanOrEqual(3 * messages.length + 1)
      expect(code!.literals.length).toBeLessThanOrEqual(
        11 * messages.length + '}],"return_token_ids":true,"logprobs":true,"top_logprobs":0}'.length,
      )
    })

    it('gives up (null) when the target shares too little with the source, or over the budget', () => {
      expect(copyCode('a'.repeat(100), 'b'.repeat(300), 1000)).toBeNull()
      const source = 'x0123456789abcdefghijklmnopqrstuvwxyz'.repeat(4)
      expect(copyCode(source, source, 10)).not.toBeNull()
      expect(copyCode(source, `${'#'.repeat(30)}${source}`, 20)).toBeNull()
      expect(copyCode(source, `${'#'.repeat(30)}${source}`, 50)).not.toBeNull()
    })
  })
})
