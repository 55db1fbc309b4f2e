/**
 * Binary tunnel frames decode to exactly what the zod schemas say, on both ends: for metadata of every shape
 * (well-formed, missing or mistyped fields, out-of-range status, extra keys, defaults left out) the decoded
 * frame equals the schema's parse of the metadata plus the body, and a frame the schema refuses is refused.
 * The structural check that runs first for well-formed frames must never accept more, nor return other values.
 */
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { tunnelBodySchema, tunnelChunkSchema, tunnelHeadSchema, tunnelRequestSchema } from './runner-protocol.ts'
import { decodeEdgeFrame, decodeRunnerFrame, FRAME_FORMAT } from './tunnel-frames.ts'

/** A binary frame with arbitrary metadata (the encoder only writes well-formed ones). */
function frame(meta: unknown, body: Uint8Array): Uint8Array {
  const metaBytes = new TextEncoder().encode(JSON.stringify(meta))
  const out = new Uint8Array(5 + metaBytes.length + body.length)
  out[0] = FRAME_FORMAT
  new DataView(out.buffer).setUint32(1, metaBytes.length)
  out.set(metaBytes, 5)
  out.set(body, 5 + metaBytes.length)
  return out
}

const anyValue = fc.oneof(fc.string(), fc.integer(), fc.double({ noNaN: true, noDefaultInfinity: true }), fc.boolean(), fc.constant(null))
const headers = fc.oneof(fc.dictionary(fc.string(), fc.string()), fc.dictionary(fc.string(), anyValue), fc.array(fc.string()), anyValue)
/** A field that is usually right, sometimes wrong in type, sometimes absent. */
const field = <T>(good: fc.Arbitrary<T>) =>
  fc.option(fc.oneof({ weight: 4, arbitrary: good }, { weight: 1, arbitrary: anyValue }), { freq: 8 })

const runnerMeta = fc.record({
  type: fc.constantFrom('tunnel.head', 'tunnel.chunk', 'tunnel.request', 'other'),
  request_id: field(fc.string()),
  status: field(
    fc.oneof(
      fc.integer({ min: 100, max: 599 }),
      fc.constantFrom(99, 100, 599, 600),
      fc.integer({ min: -1000, max: 2000 }),
      fc.double({ noNaN: true, noDefaultInfinity: true }),
    ),
  ),
  headers: fc.option(headers, { freq: 6 }),
  more: field(fc.boolean()),
  extra: fc.option(anyValue, { freq: 3 }),
})
const edgeMeta = fc.record({
  type: fc.constantFrom('tunnel.request', 'tunnel.body', 'tunnel.head', 'other'),
  request_id: field(fc.string()),
  method: field(fc.constantFrom('POST', 'GET')),
  path: field(fc.string()),
  headers: fc.option(headers, { freq: 6 }),
  more: field(fc.boolean()),
  timeout_ms: field(fc.oneof(fc.integer(), fc.double({ noNaN: true, noDefaultInfinity: true }), fc.constant(2 ** 60))),
  extra: fc.option(anyValue, { freq: 3 }),
})

/** JSON round trip, as the metadata travels (absent fields: left out). */
const wire = (meta: Record<string, unknown>) => JSON.parse(JSON.stringify(meta, (_key, value) => (value === null ? undefined : value)))

function outcome(decode: () => unknown): { ok: true; value: unknown } | { ok: false; error: string } {
  try {
    return { ok: true, value: decode() }
  } catch (error) {
    return { ok: false, error: (error as Error).message }
  }
}

const body = new Uint8Array([123, 34, 97, 34, 58, 49, 125])

describe('binary tunnel frames', () => {
  it("a runner's frame decodes exactly as its schema parses it", () => {
    fc.assert(
      fc.property(runnerMeta, (raw) => {
        const meta = wire(raw)
        const schema = meta.type === 'tunnel.head' ? tunnelHeadSchema.omit({ body: true }) : tunnelChunkSchema.omit({ data: true })
        const expected = schema.safeParse(meta)
        const got = outcome(() => decodeRunnerFrame(frame(meta, body)))
        const known = meta.type === 'tunnel.head' || meta.type === 'tunnel.chunk'
        if (!known || !expected.success) {
          expect(got.ok).toBe(false)
          return
        }
        const key = meta.type === 'tunnel.head' ? 'body' : 'data'
        expect(got).toEqual({ ok: true, value: { ...expected.data, [key]: body } })
      }),
      { numRuns: 2_000 },
    )
  })

  it("the edge's frame decodes exactly as its schema parses it", () => {
    fc.assert(
      fc.property(edgeMeta, (raw) => {
        const meta = wire(raw)
        const schema = meta.type === 'tunnel.request' ? tunnelRequestSchema.omit({ body: true }) : tunnelBodySchema.omit({ data: true })
        const expected = schema.safeParse(meta)
        const got = outcome(() => decodeEdgeFrame(frame(meta, body)))
        const known = meta.type === 'tunnel.request' || meta.type === 'tunnel.body'
        if (!known || !expected.success) {
          expect(got.ok).toBe(false)
          return
        }
        const key = meta.type === 'tunnel.request' ? 'body' : 'data'
        expect(got).toEqual({ ok: true, value: { ...expected.data, [key]: body } })
      }),
      { numRuns: 2_000 },
    )
  })

  it('a refused frame names the schema problem', () => {
    expect(() => decodeRunnerFrame(frame({ type: 'tunnel.head', request_id: 'r', status: 700, more: false }, body))).toThrow(
      /invalid binary tunnel frame: .* at status/,
    )
    expect(() =>
      decodeEdgeFrame(
        frame({ type: 'tunnel.request', request_id: 'r', method: 'POST', path: '/', headers: {}, more: false, timeout_ms: 1.5 }, body),
      ),
    ).toThrow(/invalid binary tunnel frame: .* at timeout_ms/)
  })
})
