/**
 * `json-select.ts` (what `rollgate generate-sft` reads a task's results with): on random documents of the
 * TaskStatus shape (any JSON in the places it skips, strings with escapes and non-ASCII text) split into
 * random byte chunks, the selected values equal what `JSON.parse` of the whole document gives; a document
 * cut short or broken where it is walked is an error.
 */
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { JsonSelect, type Selection, selectJson } from '../../cli/lib/json-select.ts'
import { resultSummaries } from '../../cli/lib/task-results.ts'

const CAPTURE = { capture: true } as const

async function* byteChunks(text: string, cuts: number[]): AsyncGenerator<Uint8Array> {
  const bytes = new TextEncoder().encode(text)
  let start = 0
  for (const cut of [...cuts.map((c) => c % (bytes.length + 1))].sort((a, b) => a - b)) {
    yield bytes.subarray(start, Math.max(start, cut))
    start = Math.max(start, cut)
  }
  yield bytes.subarray(start)
}

async function collect<T>(values: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = []
  for await (const value of values) out.push(value)
  return out
}

const text = fc.string({ unit: fc.constantFrom('a', '"', '\\', '\n', 'é', '😀', '{', ']', ',', ' ', '\u2028') })
const anyJson = fc.jsonValue({ maxDepth: 3 })
const trace = fc.record({
  prompt_ids: fc.array(fc.nat()),
  reward: fc.option(fc.double({ noNaN: true, noDefaultInfinity: true })),
  metadata: anyJson,
  note: text,
})
const result = fc.record({
  session_id: text,
  extra: anyJson,
  task_id: text,
  status: fc.constantFrom('COMPLETED', 'ERROR', 'TIMEOUT'),
  trajectory: fc.record({
    status: text,
    traces: fc.array(trace, { maxLength: 4 }),
    metadata: fc.record({ evaluation: fc.option(anyJson), other: anyJson }, { requiredKeys: ['other'] }),
    error: fc.option(text),
  }),
  error: fc.option(text),
})
const status = fc.record({
  task_id: text,
  sessions: fc.array(anyJson, { maxLength: 3 }),
  results: fc.array(result, { maxLength: 4 }),
  after: anyJson,
})

describe('json-select', () => {
  it('selects what JSON.parse of the whole document holds, at any chunking', async () => {
    await fc.assert(
      fc.asyncProperty(status, fc.array(fc.nat(), { maxLength: 12 }), fc.boolean(), async (doc, cuts, pretty) => {
        const text = pretty ? JSON.stringify(doc, null, 2) : JSON.stringify(doc)
        const got = await collect(resultSummaries(byteChunks(text, cuts)))
        const parsed = JSON.parse(text) as typeof doc
        expect(got).toEqual(
          parsed.results.map((r) => ({
            session_id: r.session_id,
            task_id: r.task_id,
            status: r.status,
            error: r.error,
            trajectory: {
              metadata: 'evaluation' in r.trajectory.metadata ? { evaluation: r.trajectory.metadata.evaluation } : {},
              traces: r.trajectory.traces.map((t) => ({ reward: t.reward })),
            },
          })),
        )
      }),
      { numRuns: 300 },
    )
  })

  it('captures a value at the root or anywhere, and walks nested arrays', async () => {
    const selection: Selection = { fields: { a: { each: { emit: true, fields: { b: { each: CAPTURE } } } } } }
    const got = await collect(
      selectJson(
        byteChunks('{"x":[1,{"a":2}],"a":[{"b":[1,"two",{"c":[3]},4],"z":"]"},{"y":1,"b":[ ]},{"b":[true]}]}', [3, 17, 30]),
        selection,
      ),
    )
    expect(got).toEqual([{ b: [1, 'two', { c: [3] }, 4] }, { b: [] }, { b: [true] }])
    const root = new JsonSelect(CAPTURE, () => {})
    root.write(' 12')
    root.write('5 ')
    root.end()
    expect(root.root).toBe(125)
  })

  it('fails on a document cut short or broken where it walks', async () => {
    const selection: Selection = { fields: { results: { each: { emit: true, fields: { id: CAPTURE } } } } }
    await expect(collect(selectJson(byteChunks('{"results":[{"id":1},{"id":', []), selection))).rejects.toThrow(/ended early/)
    await expect(collect(selectJson(byteChunks('{"results":[{"id":1} {"id":2}]}', []), selection))).rejects.toThrow(/expected ',' or '\]'/)
    await expect(collect(selectJson(byteChunks('{"results":[{"id":tru}]}', []), selection))).rejects.toThrow(/invalid JSON value/)
    await expect(collect(selectJson(byteChunks('{"results":[]} x', []), selection))).rejects.toThrow(/expected the end of the document/)
    await expect(collect(selectJson(byteChunks('{"results":[{"id":1},null]}', []), selection))).rejects.toThrow(
      /expected an object or array to hand out/,
    )
  })
})
