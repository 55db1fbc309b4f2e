/**
 * Prompt ids read from the engine's JSON text: the edge cuts the array out of the answer only where the cut is
 * proven, and the session's incremental read (copy the ids the text shares with the last prompt, parse the rest)
 * gives exactly what a whole parse gives, on number boundaries, shorter and unrelated prompts, whitespace
 * variants, non-integers and text that is not JSON.
 */
import { describe, expect, it } from 'vitest'
import {
  findPromptIds,
  MIN_CUT_CHARS,
  PROMPT_IDS_PLACEHOLDER,
  parseEngineAnswerBytes,
  parseEngineAnswerText,
  promptIdsFromText,
} from '../../../src/normalize/engine/prompt-ids-text.ts'
import { parseEngineResponse } from '../../../src/normalize/engine/engine-response.ts'
import {
  bytesCommonPrefix,
  canonicalPromptText,
  type PromptText,
  parsePromptText as parsePromptBytes,
  parsePromptTextAgainst as parsePromptBytesAgainst,
  SEP_STRIDE,
  separatorAt,
  sharedPromptIds as sharedPromptIdsOfBytes,
} from '../../../src/durable/session/prompt-ids.ts'

// The session holds a prompt's text as its UTF-8 bytes; these tests write texts as strings.
const encoder = new TextEncoder()
const decoder = new TextDecoder()
const parsePromptText = (text: string) => parsePromptBytes(encoder.encode(text))
const parsePromptTextAgainst = (text: string, base: { ids: Uint32Array; text: PromptText }, shared: number) =>
  parsePromptBytesAgainst(encoder.encode(text), base, shared)
const sharedPromptIds = (base: PromptText, text: string) => sharedPromptIdsOfBytes(base, encoder.encode(text))
/** A held prompt text (or a cut) as a string. */
const textOf = (bytes: Uint8Array | null | undefined) => (bytes ? decoder.decode(bytes) : null)

/**
 * Every id's separator as `separatorAt` finds it from the sparse marks, and the marks themselves: one per
 * `SEP_STRIDE` ids, each the separator of the last id of its group.
 */
function separators(prompt: PromptText): number[] {
  expect(prompt.marks.length).toBe(Math.floor(prompt.count / SEP_STRIDE))
  const all = Array.from({ length: prompt.count }, (_, j) => separatorAt(prompt, j))
  expect(Array.from(prompt.marks)).toEqual(all.filter((_, j) => (j + 1) % SEP_STRIDE === 0))
  return all
}

/** What the session reads for `text` against `base`, the way the completion log does it. */
function readAgainst(baseText: string | Uint32Array, text: string) {
  const base: { ids: Uint32Array; text: PromptText } =
    typeof baseText === 'string'
      ? (() => {
          const parsed = parsePromptText(baseText)
          if (!parsed.ids || !parsed.text) throw new Error('base must parse')
          return { ids: parsed.ids, text: parsed.text }
        })()
      : { ids: baseText, text: canonicalPromptText(baseText) }
  const shared = sharedPromptIds(base.text, text)
  return { shared, ...parsePromptTextAgainst(text, base, shared) }
}

/** The whole-parse reading (what the normalizer did before): JSON.parse, integers only, uint32. */
function wholeParse(text: string): number[] | null {
  try {
    const ids = promptIdsFromText(text)
    return ids ? Array.from(ids) : null
  } catch {
    return null
  }
}

function expectSameAsWhole(base: string | Uint32Array, text: string) {
  const read = readAgainst(base, text)
  expect(read.ids === null ? null : Array.from(read.ids)).toEqual(wholeParse(text))
  // Unreadable means not JSON at all (JSON that is not a prompt, e.g. non-integers, is read as no ids).
  let json = true
  try {
    JSON.parse(text)
  } catch {
    json = false
  }
  expect(read.unreadable).toBe(!json)
  // The separators found must be the text's: each id's text ends at a `,` (or the closing `]`).
  if (read.text) {
    expect(read.text.count).toBe(read.ids?.length)
    // One assertion over all of them (an `expect` per separator was most of the random-edits test's time).
    const seps = separators(read.text)
    const misplaced: { separator: number; at: number; found: string | undefined }[] = []
    for (let j = 0; j < seps.length; j++) {
      const at = seps[j] as number
      if (text[at] !== (j === seps.length - 1 ? ']' : ',')) misplaced.push({ separator: j, at, found: text[at] })
    }
    expect(misplaced).toEqual([])
  }
  return read
}

describe('incremental prompt ids', () => {
  it('shares ids only up to a number boundary: [1,2,3 vs [1,2,34', () => {
    const read = expectSameAsWhole('[1,2,3]', '[1,2,34,5]')
    expect(read.shared).toBe(2)
    expect(read.copied).toBe(2)
    expect(expectSameAsWhole('[1,2,34]', '[1,2,3,4]').shared).toBe(2)
    expect(expectSameAsWhole('[10,20,3]', '[10,20,3,4]').shared).toBe(3)
  })

  it('copies all of an extended prompt and parses only the new ids', () => {
    const base = Uint32Array.from({ length: 5000 }, (_, i) => (i * 7919) % 151000)
    const next = [...base, 11, 151644, 0, 42]
    const read = expectSameAsWhole(base, JSON.stringify(next))
    expect(read.copied).toBe(base.length)
    expect(read.parsedChars).toBeLessThan(40)
  })

  it('writes a stored prompt canonically with its separators (the base after a wake)', () => {
    const ids = Uint32Array.from([0, 9, 10, 99, 100, 151645, 4294967295, 7])
    const written = canonicalPromptText(ids)
    const text = textOf(written.bytes) as string
    expect(text).toBe(JSON.stringify(Array.from(ids)))
    expect(separators(written)).toEqual(
      Array.from(ids, (_, j) => (j === ids.length - 1 ? text.length - 1 : text.split(',', j + 1).join(',').length)),
    )
    expect(canonicalPromptText(new Uint32Array(0))).toEqual({ bytes: encoder.encode('[]'), count: 0, marks: new Uint32Array(0) })
    // Held at its own length, not in the scratch buffer the digits were written into (11 bytes an id).
    expect(written.bytes.buffer.byteLength).toBe(text.length)
    // Random ids of every digit count (the digits are written into bytes): the text is `JSON.stringify`'s.
    let seed = 7
    const next = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31
      return seed
    }
    for (let run = 0; run < 200; run++) {
      const random = Uint32Array.from({ length: next() % 300 }, () => Math.floor((next() / 2 ** 31) * 10 ** (1 + (next() % 10))) >>> 0)
      const written = canonicalPromptText(random)
      expect(textOf(written.bytes)).toBe(JSON.stringify(Array.from(random)))
      expect(separators(written).map((at) => String.fromCharCode(written.bytes[at] as number))).toEqual(
        Array.from(random, (_, j) => (j === random.length - 1 ? ']' : ',')),
      )
    }
    // Read against it, the next prompt copies every id.
    expect(expectSameAsWhole(ids, JSON.stringify([...ids, 5])).copied).toBe(ids.length)
  })

  it('handles a shorter prompt, an identical one, an empty one and a completely different one', () => {
    expect(expectSameAsWhole('[1,2,3,4]', '[1,2]').shared).toBe(2)
    expect(expectSameAsWhole('[1,2,3,4]', '[1,2,3]').shared).toBe(3)
    expect(expectSameAsWhole('[1,2,3,4]', '[1,2,3,4]').shared).toBe(4)
    expect(expectSameAsWhole('[1,2,3,4]', '[]').shared).toBe(0)
    expect(expectSameAsWhole('[]', '[1,2]').shared).toBe(0)
    expect(expectSameAsWhole('[1,2,3,4]', '[9,8,7]').shared).toBe(0)
    expect(expectSameAsWhole('[1,2,3,4]', '[12,3,4]').shared).toBe(0)
    // The same text again (a retried call) holds the base's bytes, not the second copy that came over RPC.
    const base = parsePromptText('[1,2,3,4]')
    const again = parsePromptTextAgainst('[1,2,3,4]', base as { ids: Uint32Array; text: PromptText }, 4)
    expect(again.text?.bytes).toBe(base.text?.bytes)
    // Not once a later prompt has written its separator over the base's bracket: the new text is held then.
    const grown = parsePromptTextAgainst('[1,2,3,4,5]', base as { ids: Uint32Array; text: PromptText }, 4) as {
      ids: Uint32Array
      text: PromptText
    }
    const appended = parsePromptTextAgainst('[1,2,3,4,5,6]', grown, 5)
    expect(appended.text?.bytes.buffer).toBe(grown.text.bytes.buffer)
    expect(textOf(grown.text.bytes)).toBe('[1,2,3,4,5,')
    const third = parsePromptTextAgainst('[1,2,3,4,5]', grown, sharedPromptIds(grown.text, '[1,2,3,4,5]'))
    expect(textOf(third.text?.bytes)).toBe('[1,2,3,4,5]')
    // Bytes that came as a view into a larger buffer (the edge's slice of an engine answer) are held as a copy
    // of their own, so the rest of the answer is not kept and the next prompt still appends in place.
    const answer = encoder.encode('{"x":1,"prompt_token_ids":[1,2,3,4,5,6,7],"y":2}')
    const start = answer.indexOf(0x5b)
    const other = parsePromptText('[1,2,3,4,9]') as { ids: Uint32Array; text: PromptText }
    const branched = parsePromptBytesAgainst(answer.subarray(start, answer.indexOf(0x5d) + 1), other, 4) as {
      ids: Uint32Array
      text: PromptText
    }
    expect(branched.text.bytes.byteOffset).toBe(0)
    expect(branched.text.bytes.buffer).not.toBe(answer.buffer)
    const next = parsePromptTextAgainst('[1,2,3,4,5,6,7,8]', branched, 7) as { ids: Uint32Array; text: PromptText }
    expect(textOf(next.text.bytes)).toBe('[1,2,3,4,5,6,7,8]')
    const last = parsePromptTextAgainst('[1,2,3,4,5,6,7,8,9]', next, 8)
    expect(last.text?.bytes.buffer).toBe(next.text.bytes.buffer)
  })

  it('reads whitespace variants of the engine JSON exactly', () => {
    expectSameAsWhole('[1, 2, 3]', '[1, 2, 3, 4]')
    expect(expectSameAsWhole('[1, 2, 3]', '[1, 2, 3, 4]').copied).toBe(3)
    expectSameAsWhole('[1, 2, 3]', '[1,2,3,4]')
    expectSameAsWhole('[ 1 ,2 ,3 ]', '[ 1 ,2 ,3 ,4 ]')
    expectSameAsWhole('[\n  1,\n  2\n]', '[\n  1,\n  2,\n  3\n]')
    expectSameAsWhole('[1,2]', '[1,2 ,3]')
    expectSameAsWhole('[1,2]', '[1,2 ]')
    expectSameAsWhole('[1,2,3]', '[1,2\t]')
  })

  it('reads numbers the way the whole parse does (non-integers void the prompt, uint32 wraps)', () => {
    expect(expectSameAsWhole('[1,2,3]', '[1,2,3,4.5]').ids).toBeNull()
    expectSameAsWhole('[1,2,3]', '[1,2,3,4.0]')
    expectSameAsWhole('[1,2,3]', '[1,2,3,1e2]')
    expectSameAsWhole('[1,2,3]', '[1,2,3,-1]')
    expectSameAsWhole('[1,2,3]', '[1,2,3,4294967297]')
    expectSameAsWhole('[1,2,3]', '[1,2,3,"4"]')
    expectSameAsWhole('[100,2]', '[1e2,2,3]')
  })

  it('records text that is not JSON as unreadable, never as a guess', () => {
    for (const bad of ['[1,2,3,]', '[1,2,3,,4]', '[1,2,3 4]', '[1,2,03]', '[1,2,3']) {
      const read = readAgainst('[1,2,3]', bad)
      expect(read.ids, bad).toBeNull()
      expect(read.unreadable, bad).toBe(true)
    }
  })

  it('grows a shared buffer past its spare room (a turn adding more ids than it holds) and keeps earlier prompts intact', () => {
    const expected: number[] = [7, 8, 9]
    const first = parsePromptText(JSON.stringify(expected))
    const kept = [{ ids: first.ids as Uint32Array, text: first.text as PromptText, expected: [...expected] }]
    for (const added of [700, 1500, 40, 5000, 3]) {
      for (let i = 0; i < added; i++) expected.push((expected.length * 7919) % 151_000)
      const base = kept.at(-1) as (typeof kept)[number]
      const text = JSON.stringify(expected)
      const read = parsePromptTextAgainst(text, base, sharedPromptIds(base.text, text))
      expect(read.copied).toBe(base.expected.length)
      expect(Array.from(read.ids as Uint32Array)).toEqual(expected)
      expect(separators(read.text as PromptText)).toEqual(separators(canonicalPromptText(Uint32Array.from(expected))))
      kept.push({ ids: read.ids as Uint32Array, text: read.text as PromptText, expected: [...expected] })
    }
    for (const prompt of kept) expect(Array.from(prompt.ids)).toEqual(prompt.expected)
  })

  it('keeps every earlier prompt intact while later ones append to or branch from shared buffers', () => {
    let seed = 11
    const random = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2147483648
      return Math.floor(seed / 65536) % n
    }
    const first = parsePromptText(JSON.stringify([1, 2, 3]))
    const kept: { ids: Uint32Array; text: PromptText; expected: number[]; written: string }[] = [
      { ids: first.ids as Uint32Array, text: first.text as PromptText, expected: [1, 2, 3], written: '[1,2,3]' },
    ]
    let inPlace = 0
    for (let step = 0; step < 400; step++) {
      const base = kept[random(3) === 0 ? random(kept.length) : kept.length - 1] as (typeof kept)[number]
      const next = base.expected.slice(0, random(4) === 0 ? random(base.expected.length + 1) : base.expected.length)
      for (let i = random(30); i > 0; i--) next.push(random(152000))
      const text = random(5) === 0 ? JSON.stringify(next).replaceAll(',', ', ') : JSON.stringify(next)
      const shared = sharedPromptIds(base.text, text)
      const read = parsePromptTextAgainst(text, base, shared)
      expect(Array.from(read.ids as Uint32Array)).toEqual(next)
      const held = (read.text as PromptText).bytes
      if (held.buffer === base.text.bytes.buffer && held.length > base.text.bytes.length) inPlace++
      kept.push({ ids: read.ids as Uint32Array, text: read.text as PromptText, expected: next, written: text })
    }
    // Most steps extend the newest prompt: their text is written into its buffer, over its closing bracket.
    expect(inPlace).toBeGreaterThan(50)
    for (const prompt of kept) {
      expect(Array.from(prompt.ids)).toEqual(prompt.expected)
      // Every byte as written but the last, which is its `]` or the separator a later prompt wrote over it.
      const { bytes } = prompt.text
      expect(textOf(bytes.subarray(0, -1))).toBe(prompt.written.slice(0, -1))
      const found = separators(prompt.text).map((at) => String.fromCharCode(bytes[at] as number))
      const last = found.pop()
      expect(found).toEqual(prompt.expected.slice(1).map(() => ','))
      expect([']', ',']).toContain(last)
    }
  })

  it('marks every 64th separator only, and reads exactly at and around every mark', () => {
    const ids = (n: number, salt = 0) => Array.from({ length: n }, (_, i) => ((i + salt) * 7919) % 151000)
    const write = (values: number[], spaced: boolean) => (spaced ? JSON.stringify(values).replaceAll(',', ', ') : JSON.stringify(values))
    const edges = [1, SEP_STRIDE - 1, SEP_STRIDE, SEP_STRIDE + 1, 2 * SEP_STRIDE - 1, 2 * SEP_STRIDE, 2 * SEP_STRIDE + 1, 3 * SEP_STRIDE]
    for (const length of edges) {
      for (const cut of edges.filter((k) => k <= length)) {
        for (const spaced of [false, true]) {
          const base = ids(length)
          // Cut at the mark, extend; cut and change the last kept id’s digits (against a canonical base a spaced
          // text shares its first id only); a shorter prompt.
          expect(expectSameAsWhole(write(base, spaced), write([...base.slice(0, cut), ...ids(70, 5)], spaced)).shared).toBe(cut)
          const edited = base.slice(0, cut)
          edited[cut - 1] = Number(`${edited[cut - 1]}7`)
          expect(expectSameAsWhole(Uint32Array.from(base), write([...edited, 3], spaced)).shared).toBe(
            spaced ? Math.min(1, cut - 1) : cut - 1,
          )
          expect(expectSameAsWhole(write(base, spaced), write(base.slice(0, cut), spaced)).shared).toBe(cut)
        }
      }
    }
    // One id more, ending a group; the last shared id's separator after a space (marked where the new text has it).
    for (const length of [SEP_STRIDE - 1, SEP_STRIDE, 2 * SEP_STRIDE - 1]) {
      const base = ids(length)
      expect(expectSameAsWhole(write(base, false), write([...base, 9], false)).shared).toBe(length)
      const spacedEnd = `${JSON.stringify(base).slice(0, -1)} ,9,8]`
      expect(expectSameAsWhole(write(base, false), spacedEnd).shared).toBe(length)
      expect(expectSameAsWhole(write(base, false), `${JSON.stringify(base).slice(0, -1)} ]`).shared).toBe(length)
    }
    // A 262k-id prompt keeps 16 KB of marks, not 1 MiB of separators.
    const large = canonicalPromptText(Uint32Array.from(ids(262_144)))
    expect(large.marks.byteLength).toBe((262_144 / SEP_STRIDE) * 4)
  })

  it('agrees with the whole parse on random edits of random prompts', () => {
    let seed = 7
    const random = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2147483648
      return Math.floor(seed / 65536) % n
    }
    const ids = () => Array.from({ length: random(40) }, () => (random(4) === 0 ? random(10) : random(200000)))
    for (let round = 0; round < 2000; round++) {
      const base = ids()
      const next = base.slice(0, random(base.length + 1))
      // Edit the last kept id's digits sometimes (a prefix that matches in text, not in ids).
      if (next.length && random(3) === 0) next[next.length - 1] = Number(`${next.at(-1)}${random(10)}`)
      next.push(...ids())
      const spaced = random(4) === 0
      const write = (values: number[]) => (spaced ? JSON.stringify(values).replaceAll(',', ', ') : JSON.stringify(values))
      expectSameAsWhole(random(2) ? write(base) : Uint32Array.from(base), write(next))
    }
  })
})

describe('cutting the prompt ids out of an engine answer', () => {
  const ids = Array.from({ length: 8000 }, (_, i) => (i * 7919) % 151000)
  const vllm = {
    id: 'chatcmpl-1',
    model: 'Qwen/Qwen3-8B',
    choices: [{ index: 0, message: { role: 'assistant', content: 'hi' }, finish_reason: 'stop', token_ids: [5, 151645] }],
    prompt_token_ids: ids,
    usage: { prompt_tokens: ids.length, completion_tokens: 2 },
  }

  it('leaves a vLLM answer’s ids as text and the rest parsed, and the text reads back to the ids', () => {
    const text = JSON.stringify(vllm)
    expect(text.length).toBeGreaterThan(MIN_CUT_CHARS)
    const answer = parseEngineAnswerText(text)
    expect(textOf(answer.promptIdsBytes)).toBe(JSON.stringify(ids))
    const completion = parseEngineResponse(answer.json, answer.promptIdsBytes)
    expect(completion.promptTokenIds).toBeNull()
    expect(Array.from(promptIdsFromText(textOf(completion.promptTokenText) as string) ?? [])).toEqual(ids)
    expect(completion.usage.inputTokens).toBe(ids.length)
    expect(completion.responseTokenIds).toEqual([5, 151645])
  })

  it('parses a short answer whole: below 32 KB the cut costs more than the ids it saves parsing', () => {
    const short = { ...vllm, prompt_token_ids: ids.slice(0, 3000), usage: { prompt_tokens: 3000, completion_tokens: 2 } }
    const text = JSON.stringify(short)
    expect(text.length).toBeGreaterThan(16 * 1024)
    expect(text.length).toBeLessThan(MIN_CUT_CHARS)
    const answer = parseEngineAnswerText(text)
    expect(textOf(answer.promptIdsBytes)).toBeNull()
    expect(parseEngineResponse(answer.json, answer.promptIdsBytes).promptTokenIds).toEqual(ids.slice(0, 3000))
  })

  it('cuts SGLang’s choice-level prompt_token_ids and Python’s spaced JSON', () => {
    const sglang = { ...vllm, prompt_token_ids: undefined, choices: [{ ...vllm.choices[0], prompt_token_ids: ids }] }
    expect(textOf(parseEngineAnswerText(JSON.stringify(sglang)).promptIdsBytes)).toBe(JSON.stringify(ids))
    const spaced = JSON.stringify(vllm).replaceAll(',', ', ').replaceAll(':', ': ')
    const answer = parseEngineAnswerText(spaced)
    expect(textOf(answer.promptIdsBytes)).toBe(JSON.stringify(ids).replaceAll(',', ', '))
    expect(parseEngineResponse(answer.json, answer.promptIdsBytes).message.content).toBe('hi')
  })

  it('parses it all when the cut is not proven', () => {
    const whole = (value: unknown) => parseEngineAnswerText(JSON.stringify(value)).promptIdsBytes
    // No usage count: the ids' length is needed.
    expect(whole({ ...vllm, usage: {} })).toBeNull()
    // SGLang's input_token_ids take precedence.
    expect(whole({ ...vllm, choices: [{ ...vllm.choices[0], input_token_ids: [1] }] })).toBeNull()
    // The key twice: which one counts is the parser's call.
    expect(whole({ ...vllm, choices: [{ ...vllm.choices[0], prompt_token_ids: [1] }] })).toBeNull()
    // Nested, strings, objects inside the array: its first `]` may not close it.
    expect(whole({ ...vllm, prompt_token_ids: [[1], ...ids] })).toBeNull()
    expect(whole({ ...vllm, prompt_token_ids: ['1]', ...ids] })).toBeNull()
    // Not at a place the ids are read from.
    expect(whole({ ...vllm, prompt_token_ids: undefined, usage: { ...vllm.usage, prompt_token_ids: ids } })).toBeNull()
    // Small answers are parsed whole.
    expect(whole({ ...vllm, prompt_token_ids: [1, 2, 3] })).toBeNull()
  })

  it('is not fooled by the key quoted inside a string', () => {
    const quoting = { ...vllm, choices: [{ ...vllm.choices[0], message: { role: 'assistant', content: '{"prompt_token_ids": [1]}' } }] }
    const answer = parseEngineAnswerText(JSON.stringify(quoting))
    expect(textOf(answer.promptIdsBytes)).toBe(JSON.stringify(ids))
    expect(parseEngineResponse(answer.json, answer.promptIdsBytes).message.content).toBe('{"prompt_token_ids": [1]}')
  })

  it('cuts the same text from an answer with output past Latin-1 (as UTF-8 bytes: no width to copy, base-heap.test.ts)', () => {
    const wide = { ...vllm, choices: [{ ...vllm.choices[0], message: { role: 'assistant', content: '完成 ☃ é' } }] }
    const answer = parseEngineAnswerText(JSON.stringify(wide))
    expect(textOf(answer.promptIdsBytes)).toBe(JSON.stringify(ids))
    expect(parseEngineResponse(answer.json, answer.promptIdsBytes).message.content).toBe('完成 ☃ é')
    // A character past ASCII inside the array is not JSON ids: the text is cut as sent, for the session to refuse.
    const broken = JSON.stringify(wide).replace('"prompt_token_ids":[', '"prompt_token_ids":[☃')
    expect(textOf(parseEngineAnswerText(broken).promptIdsBytes)).toBe(`[☃${JSON.stringify(ids).slice(1)}`)
  })

  it('cuts the same from the answer’s bytes at any alignment, four bytes a step (parseEngineAnswerBytes)', () => {
    for (const extra of [0, 1, 2, 3]) {
      const spaced = { ...vllm, id: `chatcmpl-${'x'.repeat(extra)}`, prompt_token_ids: ids.slice(0, 7000 + extra) }
      const text = JSON.stringify(spaced)
      for (const offset of [0, 1, 2, 3]) {
        const held = new Uint8Array(offset + text.length + 5)
        held.set(encoder.encode(text), offset)
        const answer = parseEngineAnswerBytes(held.subarray(offset, offset + text.length))
        expect(textOf(answer.promptIdsBytes)).toBe(JSON.stringify(spaced.prompt_token_ids))
        expect(parseEngineResponse(answer.json, answer.promptIdsBytes).message.content).toBe('hi')
      }
      // A quote, a bracket or a letter anywhere inside: not cut, parsed whole (or refused as JSON is).
      for (const bad of ['"1"', '[1]', '{}', 'true', '1e3']) {
        const planted = text.replace(`,${ids[5000 + extra]},`, `,${bad},`)
        const answer = parseEngineAnswerBytes(encoder.encode(planted))
        if (bad === 'true' || bad === '1e3') expect(textOf(answer.promptIdsBytes)).toContain(`,${bad},`)
        else expect(answer.promptIdsBytes).toBeNull()
      }
    }
  })

  it('finds only a real key followed by an array', () => {
    const find = (text: string) => findPromptIds(encoder.encode(text))
    expect(find('{"prompt_token_ids": null}')).toBeNull()
    expect(find('{"a":"\\"prompt_token_ids\\": [1]"}')).toBeNull()
    expect(find('{"prompt_token_ids" :\n [1, 2]}')).toEqual({ at: 1, start: 23, end: 29 })
    expect(PROMPT_IDS_PLACEHOLDER).toContain('\u0000')
  })
})

describe('the common prefix of two prompt texts’ bytes', () => {
  it('is exact at every length and offset, word-aligned or not', () => {
    const text = encoder.encode(JSON.stringify(Array.from({ length: 400 }, (_, i) => (i * 7919) % 151000)))
    for (const offset of [0, 1, 2, 3, 4]) {
      const buffer = new Uint8Array(text.length + 8)
      buffer.set(text, offset)
      const a = buffer.subarray(offset, offset + text.length)
      for (const at of [0, 1, 3, 4, 5, 7, 8, 100, 1001, text.length - 2, text.length - 1]) {
        const b = text.slice()
        b[at] = 0x20
        expect(bytesCommonPrefix(a, b)).toBe(at)
        expect(bytesCommonPrefix(b, a)).toBe(at)
      }
      expect(bytesCommonPrefix(a, text)).toBe(text.length)
      expect(bytesCommonPrefix(a, text.subarray(0, 13))).toBe(13)
      expect(bytesCommonPrefix(a.subarray(0, 6), text)).toBe(6)
    }
  })
})
