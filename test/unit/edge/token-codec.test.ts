import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import {
  LOGPROBS_F32,
  LOGPROBS_F64,
  packLogprobs,
  packTokens,
  unpackLogprobs,
  unpackTokens,
} from '../../../src/durable/session/token-codec.ts'

describe('token codec', () => {
  it('round-trips token ids at 4 bytes each', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 2 ** 32 - 1 })), (ids) => {
        const packed = packTokens(ids)
        expect(packed.byteLength).toBe(ids.length * 4)
        expect(Array.from(unpackTokens(packed))).toEqual(ids)
      }),
    )
  })

  it('stores float32 logprobs in 4 bytes and anything else losslessly in 8', () => {
    const f32 = [Math.fround(-0.1), Math.fround(-2.5), 0]
    const packed32 = packLogprobs(f32)
    expect(packed32.format).toBe(LOGPROBS_F32)
    expect(packed32.buffer!.byteLength).toBe(12)
    expect(unpackLogprobs(packed32.format, packed32.buffer)).toEqual(f32)
    fc.assert(
      fc.property(fc.array(fc.double({ noNaN: true })), (values) => {
        const packed = packLogprobs(values)
        expect(unpackLogprobs(packed.format, packed.buffer)).toEqual(values)
      }),
    )
    expect(packLogprobs([-0.1]).format).toBe(LOGPROBS_F64)
  })
})
