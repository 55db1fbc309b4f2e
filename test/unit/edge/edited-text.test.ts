/**
 * A text held as another text with one edit (`edited-text.ts`) reads exactly as the string it stands for:
 * its length, slices, characters, common prefix and suffix, and a diff against another text (edited or
 * not, nested edits too) equal what the flat strings give, on random texts with surrogate pairs.
 */
import { describe, expect, it } from 'vitest'
import {
  diffTexts,
  type EditedText,
  flatText,
  sliceable,
  type Text,
  textCharCodeAt,
  textCommonPrefix,
  textCommonSuffix,
  textLength,
  textSlice,
} from '../../../src/durable/session/edited-text.ts'
import { applyTextDelta, commonPrefix, commonSuffix, diffText } from '../../../src/durable/session/text-delta.ts'

function seeded(seed: number) {
  return (n: number) => {
    seed = (seed * 1103515245 + 12345) % 2147483648
    return Math.floor(seed / 65536) % n
  }
}

/** Random text over a small alphabet (long common runs) with a surrogate pair now and then. */
function randomText(random: (n: number) => number, length: number): string {
  let out = ''
  while (out.length < length) out += random(12) === 0 ? '😀' : 'ab{}"'.charAt(random(5))
  return out
}

/** `text` with a random edit of it: `{ base, delta }`, where applying the delta gives a variant of the text. */
function randomEdit(random: (n: number) => number, base: Text): EditedText {
  const length = textLength(base)
  const prefix = random(length + 1)
  const suffix = random(length - prefix + 1)
  return { base, delta: { prefix, suffix, middle: randomText(random, random(6)) } }
}

describe('edited text', () => {
  it('reads like the flat string it stands for: length, slices, characters, a coding base', () => {
    const random = seeded(3)
    for (let round = 0; round < 300; round++) {
      const root = randomText(random, random(60))
      const once = randomEdit(random, root)
      const text: EditedText = random(2) ? once : randomEdit(random, once)
      const flat = applyTextDelta(flatText(text.base), text.delta)
      expect(flatText(text)).toBe(flat)
      expect(textLength(text)).toBe(flat.length)
      const start = random(flat.length + 1)
      const end = start + random(flat.length - start + 1)
      expect(textSlice(text, start, end)).toBe(flat.slice(start, end))
      expect(textSlice(text, start)).toBe(flat.slice(start))
      expect(sliceable(text).slice(start, end)).toBe(flat.slice(start, end))
      expect(sliceable(text).length).toBe(flat.length)
      if (start < flat.length) expect(textCharCodeAt(text, start)).toBe(flat.charCodeAt(start))
    }
  })

  it('compares and diffs exactly as the flat strings do (never splitting a surrogate pair)', () => {
    const random = seeded(7)
    for (let round = 0; round < 2000; round++) {
      const root = randomText(random, 1 + random(80))
      const a: Text = random(3) === 0 ? root : randomEdit(random, root)
      const b: Text = random(4) === 0 ? randomText(random, random(80)) : randomEdit(random, random(2) ? root : a)
      const fa = flatText(a)
      const fb = flatText(b)
      expect(textCommonPrefix(a, b)).toBe(commonPrefix(fa, fb))
      const max = random(Math.min(fa.length, fb.length) + 1)
      expect(textCommonSuffix(a, b, max)).toBe(commonSuffix(fa, fb, max))
      expect(diffTexts(a, b)).toEqual(diffText(fa, fb))
    }
  })

  it('compares long texts in parts: a 500 KB body and its edit', () => {
    const body = `{"messages":[${'"line of a tool output",'.repeat(20_000)}"end"]}`
    const end = body.lastIndexOf('}')
    const served: EditedText = { base: body, delta: { prefix: end, suffix: 0, middle: ',"stream":false}' } }
    const next = `${body.slice(0, -2)},"more"]}`
    const nextServed: EditedText = { base: next, delta: { prefix: next.lastIndexOf('}'), suffix: 0, middle: ',"stream":false}' } }
    expect(diffTexts(served, nextServed)).toEqual(diffText(flatText(served), flatText(nextServed)))
    expect(diffTexts(served, served)).toEqual({ prefix: textLength(served), suffix: 0, middle: '' })
  })
})
