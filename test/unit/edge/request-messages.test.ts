/**
 * The incremental request parser: along random conversations (appended messages, edited history,
 * changed tools or parameters, pretty-printed bodies, strings full of quotes, backslashes and brackets,
 * duplicate `messages` keys) `messages` and every other key equal `JSON.parse` of the same text, and a
 * body that extends the previous one is not parsed whole. Fixed cases pin the structural scan's exact answers
 * (each space character, each structural character, the failures), the extension's edges (an empty array
 * growing, a last element that grew, a key spelled with escapes, bodies that are not JSON) and when the
 * delta coding's shared-prefix hint is trusted.
 */
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { locateMessages, RequestParser, valueEnd } from '../../../src/durable/session/request-messages.ts'

const tricky = fc.constantFrom('plain', 'quote " inside', 'back\\slash\\', 'brackets ] } [ {', '"messages":[', 'ü ☃ 😀', '\\"', '')
const message = fc.record({
  role: fc.constantFrom('user', 'assistant', 'tool'),
  content: fc.oneof(tricky, fc.string(), fc.array(fc.record({ type: fc.constant('text'), text: tricky }), { maxLength: 2 })),
})

type Step =
  | { kind: 'append'; messages: Record<string, unknown>[] }
  | { kind: 'edit'; index: number; content: string }
  | { kind: 'tools' }
  | { kind: 'param' }
const step: fc.Arbitrary<Step> = fc.oneof(
  { weight: 5, arbitrary: fc.record({ kind: fc.constant('append' as const), messages: fc.array(message, { maxLength: 3 }) }) },
  fc.record({ kind: fc.constant('edit' as const), index: fc.nat(), content: tricky }),
  fc.record({ kind: fc.constant('tools' as const) }),
  fc.record({ kind: fc.constant('param' as const) }),
)

function render(body: Record<string, unknown>, style: number): string {
  if (style === 1) return JSON.stringify(body, null, 2)
  if (style === 2) return `{"model":"first","messages":"not these",${JSON.stringify(body).slice(1)}`
  return JSON.stringify(body)
}

describe('RequestParser', () => {
  it('equals JSON.parse along random conversations', () => {
    fc.assert(
      fc.property(fc.array(step, { minLength: 1, maxLength: 12 }), fc.constantFrom(0, 1, 2), (steps, style) => {
        const parser = new RequestParser()
        const messages: Record<string, unknown>[] = [{ role: 'system', content: 'sys' }]
        let tools = [{ type: 'function', function: { name: 'bash' } }]
        let maxTokens = 100
        steps.forEach((change, seq) => {
          if (change.kind === 'append') messages.push(...change.messages)
          else if (change.kind === 'edit') (messages[change.index % messages.length] as Record<string, unknown>).content = change.content
          else if (change.kind === 'tools') tools = [...tools, { type: 'function', function: { name: `t${seq}` } }]
          else maxTokens++
          const text = render({ model: 'm', messages, tools, max_tokens: maxTokens, stream: false }, style)
          const parsed = parser.parse(text, seq)
          const expected = JSON.parse(text) as Record<string, unknown>
          expect(parsed.messages).toEqual(expected.messages)
          expect({ ...parsed, messages: null }).toEqual({ ...expected, messages: null })
        })
      }),
      { numRuns: 300 },
    )
  })

  it('parses only appended messages when a body extends the previous one, whole otherwise', () => {
    const parser = new RequestParser()
    const messages: Record<string, unknown>[] = [{ role: 'system', content: 'sys' }]
    for (let turn = 0; turn < 20; turn++) {
      messages.push({ role: 'assistant', content: `a${turn} "quoted" ]` }, { role: 'tool', content: `out ${turn} \\` })
      parser.parse(JSON.stringify({ model: 'm', messages, tools: [] }), turn)
    }
    expect(parser.wholeParses).toBe(1)
    messages[1] = { role: 'assistant', content: 'history rewritten' }
    const text = JSON.stringify({ model: 'm', messages, tools: [] })
    expect(parser.parse(text, 20, { seq: 19, length: 0 }).messages).toEqual(messages)
    expect(parser.wholeParses).toBe(2)
  })

  it('finds value ends and the messages array in raw text', () => {
    const text = ' {"a":"x\\"]","messages" : [ {"k":[1,{"b":"}"}]} , 2 ],"z":-1.5e3}'
    const located = locateMessages(text)
    expect(located).not.toBeNull()
    expect(JSON.parse(text.slice(located!.open, located!.close + 1))).toEqual([{ k: [1, { b: '}' }] }, 2])
    expect(text.slice(text.indexOf('-'), valueEnd(text, text.indexOf('-')))).toBe('-1.5e3')
    expect(locateMessages('{"messages":{}}')).toBeNull()
    expect(locateMessages('[]')).toBeNull()
  })
})

describe('the structural scan, exactly', () => {
  it('valueEnd: a literal ends at each space character and each structural character, or at the end of the text', () => {
    for (const stop of [' ', '\n', '\r', '\t', ',', ']', '}', ':']) expect(valueEnd(`-12.5${stop}7`, 0)).toBe(5)
    expect(valueEnd('true', 0)).toBe(4)
    expect(valueEnd('x null', 2)).toBe(6)
    expect(valueEnd('"a\\"b"x', 0)).toBe(6)
    expect(valueEnd('"a\\\\"x', 0)).toBe(5)
    expect(valueEnd('[1,{"b":"]"},[2]] ', 0)).toBe(17)
  })

  it('valueEnd: -1 for what is not a value (nothing before a structural character, an unterminated string or array)', () => {
    for (const text of [',', ']', '', ' 1']) expect(valueEnd(text, 0)).toBe(-1)
    expect(valueEnd('"abc', 0)).toBe(-1)
    expect(valueEnd('["abc', 0)).toBe(-1)
    expect(valueEnd('[1,[2]', 0)).toBe(-1)
    expect(valueEnd('{"a":1', 0)).toBe(-1)
  })

  it('locateMessages: only a key of the top-level object, null for a text that is not one or is cut short', () => {
    const spaced = '\t{\n"messages"\r:\n[1] }'
    expect(locateMessages(spaced)).toEqual({ open: spaced.indexOf('['), close: spaced.indexOf(']') })
    expect(locateMessages('x"messages":[1]')).toBeNull()
    expect(locateMessages('{"messages":[1')).toBeNull()
    expect(locateMessages('{"messages":[1],"a":"b')).toBeNull()
    expect(locateMessages('{"a" 1,"messages":[1]}')).toBeNull()
    expect(locateMessages('{"a"x1,"messages":[1]}')).toBeNull()
    expect(locateMessages('{"a":1} "messages":[1]')).toBeNull()
    expect(locateMessages('{"a":1}, "messages":[1]')).toBeNull()
  })
})

describe('RequestParser, edges', () => {
  it('a body without a messages array is JSON.parse of it', () => {
    const parser = new RequestParser()
    expect(parser.parse('{"model":"m"}', 0)).toEqual({ model: 'm' })
    expect(parser.parse('{"model":"m","messages":"text"}', 1)).toEqual({ model: 'm', messages: 'text' })
    expect(parser.parse('{"model":"m","messages":[1]}', 2)).toEqual({ model: 'm', messages: [1] })
  })

  it('a messages key spelled with escapes after the array overrides it, as in JSON.parse (whole and extended)', () => {
    const escaped = '"mess\\u0061ges":"x"'
    expect(new RequestParser().parse(`{"messages":[1],${escaped}}`, 0)).toEqual({ messages: 'x' })
    const parser = new RequestParser()
    parser.parse('{"messages":[1],"a":1}', 0)
    expect(parser.parse(`{"messages":[1,2],${escaped}}`, 1)).toEqual({ messages: 'x' })
  })

  it('an empty array that grows is extended, not parsed whole', () => {
    const parser = new RequestParser()
    parser.parse('{"messages":[],"a":1}', 0)
    expect(parser.parse('{"messages":[],"a":12}', 1)).toEqual({ messages: [], a: 12 })
    expect(parser.parse('{"messages":[ {"role":"user"}],"a":12}', 2)).toEqual({ messages: [{ role: 'user' }], a: 12 })
    expect(parser.parse('{"messages":[ {"role":"user"}, 2 , "three"],"a":12}', 3)).toEqual({
      messages: [{ role: 'user' }, 2, 'three'],
      a: 12,
    })
    expect(parser.wholeParses).toBe(1)
  })

  it('a last element that grew (the old text ends inside it) is parsed whole', () => {
    const parser = new RequestParser()
    parser.parse('{"messages":[1]}', 0)
    expect(parser.parse('{"messages":[12]}', 1)).toEqual({ messages: [12] })
    parser.parse('{"messages":["ab"]}', 2)
    expect(parser.parse('{"messages":["ab","c"]}', 3)).toEqual({ messages: ['ab', 'c'] })
    expect(parser.wholeParses).toBe(3)
  })

  it('an extension that is not JSON throws as JSON.parse does', () => {
    for (const [first, next] of [
      ['{"messages":[]}', '{"messages":[{"a":1} {"b":2}]}'],
      ['{"messages":[1]}', '{"messages":[1 2]}'],
      ['{"messages":[1]}', '{"messages":[1,"2]}'],
    ] as const) {
      const parser = new RequestParser()
      parser.parse(first, 0)
      expect(() => parser.parse(next, 1)).toThrow(SyntaxError)
    }
  })

  it('the rest of an extended body is parsed again only when it changed', () => {
    const parser = new RequestParser()
    const first = parser.parse('{"tools":[{"name":"bash"}],"messages":[1]}', 0)
    const same = parser.parse('{"tools":[{"name":"bash"}],"messages":[1,2]}', 1)
    expect(same.tools).toBe(first.tools)
    const changed = parser.parse('{"tools":[{"name":"bash2"}],"messages":[1,2,3]}', 2)
    expect(changed).toEqual({ tools: [{ name: 'bash2' }], messages: [1, 2, 3] })
    expect(parser.wholeParses).toBe(2)
  })

  it("trusts the delta coding's hint only when it covers the previous body up to its array's end", () => {
    const previous = '{"model":"a","messages":[1]}'
    // History edited (the first message) and one appended.
    const edited = '{"model":"a","messages":[5,7]}'
    const close = previous.indexOf(']')
    // Hints that do not cover it (another body, a shorter prefix): the text is compared, the edit seen.
    for (const hint of [
      { seq: 7, length: close },
      { seq: 0, length: close - 1 },
    ]) {
      const parser = new RequestParser()
      parser.parse(previous, 0)
      expect(parser.parse(edited, 1, hint)).toEqual({ model: 'a', messages: [5, 7] })
      expect(parser.wholeParses).toBe(2)
    }
    // One that does (here it is false, to show it): the text before the array's end is not compared.
    const parser = new RequestParser()
    parser.parse(previous, 0)
    expect(parser.parse(edited, 1, { seq: 0, length: close }).messages).toEqual([1, 7])
    expect(parser.wholeParses).toBe(1)
  })
})
