/**
 * The incremental request parser: along random conversations (appended messages, edited history,
 * changed tools or parameters, pretty-printed bodies, strings full of quotes, backslashes and brackets,
 * duplicate `messages` keys) `messages` and every other key equal `JSON.parse` of the same text, and a
 * body that extends the previous one is not parsed whole.
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
