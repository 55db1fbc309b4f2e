import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { applyCopyCode, applyTextDelta, commonPrefix, copyCode, copyCodePieces, diffText } from '../../../src/durable/session/text-delta.ts'
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

// The checks below hold the coding to its exact output (not only to a round trip): the shortest middle,
// copies as long as they can be, the nearest source of equal matches, the budget to the character.

const isLow = (code: number) => code >= 0xdc00 && code <= 0xdfff
const isHigh = (code: number) => code >= 0xd800 && code <= 0xdbff

/** A pseudo-random text over letters and digits (16-unit blocks of it are practically unique). */
function noise(length: number, salt: number): string {
  const letters = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789'
  let state = (salt * 2654435761 + 1) >>> 0
  let out = ''
  for (let i = 0; i < length; i++) {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0
    out += letters[state % letters.length]
  }
  return out
}

/** `diffText` by definition: the longest common prefix and suffix, each given back one unit if it would split a pair. */
function referenceDiff(base: string, text: string) {
  const limit = Math.min(base.length, text.length)
  let prefix = 0
  while (prefix < limit && base.charCodeAt(prefix) === text.charCodeAt(prefix)) prefix++
  if (prefix > 0 && prefix < text.length && isLow(text.charCodeAt(prefix))) prefix--
  let suffix = 0
  while (suffix < limit - prefix && base.charCodeAt(base.length - 1 - suffix) === text.charCodeAt(text.length - 1 - suffix)) suffix++
  if (suffix > 0 && suffix < text.length - prefix && isLow(text.charCodeAt(text.length - suffix))) suffix--
  return { prefix, suffix, middle: text.slice(prefix, text.length - suffix) }
}

/** What `copyCode` counts against its budget: the literals and each copy's three numbers as JSON. */
function cost(code: { ops: number[]; literals: string }): number {
  let total = code.literals.length
  for (const n of code.ops) total += String(n).length + 1
  return total
}

describe('text delta, exactly', () => {
  // Surrogate halves at both ends of their range, a high one, and the first unit past them.
  const unit = fc.constantFrom('a', 'b', '"', '\ud83d', '\ude42', '\udc00', '\udfff', '\udbff', '\ue000')
  const short = fc.string({ unit, maxLength: 6 })

  it('keeps the longest common prefix and suffix that split no pair, over long shared runs', () => {
    fc.assert(
      fc.property(
        fc.record({ head: fc.nat(20_000), tail: fc.nat(20_000), salt: fc.nat() }),
        short,
        short,
        short,
        short,
        ({ head, tail, salt }, a, b, c, d) => {
          const shared = noise(head, salt)
          const end = noise(tail, salt + 1)
          for (const [base, text] of [
            [shared + a + b + end, shared + c + d + end],
            [shared + a + end, shared + a + b + end],
            [a + shared + b, c + shared + d],
            [shared + a, shared + b],
          ] as const) {
            expect(diffText(base, text)).toEqual(referenceDiff(base, text))
            let common = 0
            while (common < Math.min(base.length, text.length) && base[common] === text[common]) common++
            expect(commonPrefix(base, text)).toBe(common)
          }
        },
      ),
      { numRuns: 120, seed: 20261126 },
    )
  })

  it('gives back a prefix or suffix unit rather than split a pair at either end of the surrogate range', () => {
    for (const low of ['\udc00', '\udfff']) {
      const delta = diffText(`x\ud83d${low === '\udc00' ? '\udfff' : '\udc00'}y`, `x\ud83d${low}y`)
      expect(delta).toEqual({ prefix: 1, suffix: 1, middle: `\ud83d${low}` })
      const tail = diffText(`${low === '\udc00' ? '\ud800' : '\udbff'}${low}z`, `q${low}z`)
      expect(tail).toEqual({ prefix: 0, suffix: 1, middle: `q${low}` })
    }
    // A suffix that is the whole text keeps its lone low half (nothing is split: there is no middle).
    expect(diffText('x\udc00', '\udc00')).toEqual({ prefix: 0, suffix: 1, middle: '' })
    // Past the range (U+E000) nothing is given back.
    expect(diffText('x\ud83d\udfffy', 'x\ud83d\ue000y')).toEqual({ prefix: 2, suffix: 1, middle: '\ue000' })
  })

  /** Each copy of `code` as [literals before it, source start, length, start in the target]. */
  function copies(code: { ops: number[] }) {
    const out: [number, number, number, number][] = []
    let position = 0
    for (let i = 0; i < code.ops.length; i += 3) {
      const [before, from, length] = code.ops.slice(i, i + 3) as [number, number, number]
      out.push([before, from, length, position + before])
      position += before + length
    }
    return out
  }

  /** The promises of any code: round trip, cost within and exactly at the budget, copies ≥ 24 units and maximal. */
  function checkCode(source: string, target: string) {
    const code = copyCode(source, target, Infinity)
    if (code === null) return null
    expect(applyCopyCode(code, source)).toBe(target)
    const exact = cost(code)
    expect(copyCode(source, target, exact)).toEqual(code)
    expect(copyCode(source, target, exact - 1)).toBeNull()
    for (const [before, from, length, start] of copies(code)) {
      const end = start + length
      expect(length).toBeGreaterThanOrEqual(24)
      // Not longer either way (but into the previous copy, or by the unit kept out before a low surrogate).
      const backwards = before > 0 && from > 0 && source[from - 1] === target[start - 1] && !isLow(target.charCodeAt(start - 1))
      expect(backwards).toBe(false)
      const forwards =
        end < target.length && from + length < source.length && source[from + length] === target[end] && !isLow(target.charCodeAt(end + 1))
      expect(forwards).toBe(false)
    }
    return code
  }

  /** A source of chunks over `units`, and a target of its chunks (reordered, some twice) and new ones. */
  const related = (...units: string[]) => {
    const chunk = fc.string({ unit: fc.constantFrom(...units), minLength: 20, maxLength: 80 })
    return fc
      .tuple(fc.array(chunk, { minLength: 1, maxLength: 6 }), fc.array(fc.oneof(fc.nat(), chunk), { maxLength: 10 }))
      .map(([chunks, picks]) => {
        const source = chunks.join('')
        return [source, picks.map((pick) => (typeof pick === 'number' ? (chunks[pick % chunks.length] as string) : pick)).join('')] as const
      })
  }

  it('copies as long as they can be, no shorter than 24 units, costed to the character', () => {
    // Lone surrogate halves too: a request text is decoded UTF-8 (always well formed), but the coding must not care.
    fc.assert(
      fc.property(related('a', 'b', '"', '{', '\\', '😀', '\ud83d', '\ude42', ':', ','), ([source, target]) => {
        checkCode(source, target)
      }),
      { numRuns: 1500, seed: 20261126 },
    )
  })

  it('never starts or ends a copy inside a surrogate pair of a well-formed text', () => {
    // Pairs sharing their high half (😀 🙂) or their low half (😀 🈀), so matches stop between the halves.
    fc.assert(
      fc.property(related('a', '"', '😀', '🙂', '🈀'), ([source, target]) => {
        const code = checkCode(source, target)
        if (code === null) return
        for (const [, , length, start] of copies(code)) {
          expect(isHigh(target.charCodeAt(start - 1)) && isLow(target.charCodeAt(start))).toBe(false)
          expect(isHigh(target.charCodeAt(start + length - 1)) && isLow(target.charCodeAt(start + length))).toBe(false)
        }
        expect(code.literals.isWellFormed()).toBe(true)
      }),
      { numRuns: 1500, seed: 20261126 },
    )
  })

  it('copies from a source too long to index every position (a match found a few units late is extended back)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 70_000, max: 200_000 }),
        fc.array(fc.tuple(fc.nat(), fc.integer({ min: 24, max: 3000 }), fc.string({ maxLength: 30 })), { minLength: 1, maxLength: 8 }),
        fc.nat(),
        (length, pieces, salt) => {
          const source = noise(length, salt)
          const target = pieces
            .map(([at, size, between]) => source.slice(at % (length - size), (at % (length - size)) + size) + between)
            .join('')
          const code = checkCode(source, target)
          expect(code).not.toBeNull()
          // Every piece is one copy (or continues the one before it).
          expect((code as { ops: number[] }).ops.length / 3).toBeLessThanOrEqual(pieces.length)
        },
      ),
      { numRuns: 12, seed: 20261126 },
    )
  })

  it('a copy of exactly 24 units is taken; 23 are left as literals', () => {
    const source = noise(200, 7)
    const run = source.slice(100, 124)
    expect(copyCode(source, `${'#'.repeat(20)}${run}${'#'.repeat(20)}`, Infinity)?.ops).toEqual([20, 100, 24])
    expect(copyCode(source, `${'#'.repeat(20)}${run.slice(0, 23)}${'#'.repeat(20)}`, Infinity)).toBeNull()
  })

  it('of equally long matches takes the nearest after the last copy; one behind it counts as farther', () => {
    const [p, q, r, s, x] = [noise(30, 1), noise(30, 2), noise(30, 3), noise(30, 4), noise(40, 5)]
    /** The source start of the copy after `q` and a literal gap. */
    const second = (source: string) => {
      const code = copyCode(source, `${q}${'#'.repeat(11)}${x}!`, Infinity) as { ops: number[] }
      expect(code.ops).toHaveLength(6)
      expect(code.ops[1]).toBe(source.indexOf(q))
      return code.ops[4]
    }
    // The nearer one comes later in the hash chain (lower in the source) or first.
    expect(second(q + x + r + x + s)).toBe(30)
    expect(second(p + x + q + x + r)).toBe(100)
    // Right where the last copy ended (distance 0) against one further on.
    expect(second(q + x + x + r)).toBe(30)
    // A longer match wins over a nearer one.
    const longer = copyCode(q + x + r + x + s, `${q}${'#'.repeat(11)}${x}${s.slice(0, 5)}`, Infinity) as { ops: number[] }
    expect(longer.ops.slice(3)).toEqual([11, 100, 45])
  })

  it('refuses a code that does not fit its source or literals', () => {
    const source = 'abcdefghij'
    expect(applyCopyCode({ ops: [1, 0, 3], literals: 'xy' }, source)).toBe('xabcy')
    expect(() => applyCopyCode({ ops: [1, 0], literals: 'xy' }, source)).toThrow('copy code: ops are not triples')
    for (const ops of [
      [3, 0, 3],
      [0, -1, 3],
      [0, 8, 3],
    ]) {
      expect(() => applyCopyCode({ ops, literals: 'xy' }, source)).toThrow('copy code: a range lies outside its literals or its source')
    }
    expect(applyCopyCode({ ops: [2, 7, 3], literals: 'xy' }, source)).toBe('xyhij')
  })
})
