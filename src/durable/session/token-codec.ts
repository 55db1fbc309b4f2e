/**
 * @module
 * Packed storage for token ids and logprobs: 4 bytes per id (uint32 LE), logprobs as float32 when every
 * value is exactly a float32 (vLLM samples in float32, so real logprobs are), else float64 — lossless.
 */

export const LOGPROBS_NONE = 0
export const LOGPROBS_F32 = 1
export const LOGPROBS_F64 = 2

export function packTokens(ids: ArrayLike<number>): ArrayBuffer {
  const out = new Uint32Array(ids.length)
  for (let i = 0; i < ids.length; i++) out[i] = ids[i] as number
  return out.buffer
}

export function unpackTokens(buffer: ArrayBuffer | null): Uint32Array {
  return buffer ? new Uint32Array(buffer) : new Uint32Array(0)
}

export function packLogprobs(values: ArrayLike<number> | null): { format: number; buffer: ArrayBuffer | null } {
  if (values === null) return { format: LOGPROBS_NONE, buffer: null }
  let exact = true
  for (let i = 0; i < values.length; i++) {
    const value = values[i] as number
    if (Math.fround(value) !== value) {
      exact = false
      break
    }
  }
  const out = exact ? new Float32Array(values.length) : new Float64Array(values.length)
  for (let i = 0; i < values.length; i++) out[i] = values[i] as number
  return { format: exact ? LOGPROBS_F32 : LOGPROBS_F64, buffer: out.buffer }
}

export function unpackLogprobs(format: number, buffer: ArrayBuffer | null): number[] | null {
  if (format === LOGPROBS_NONE) return null
  const view = format === LOGPROBS_F32 ? new Float32Array(buffer ?? new ArrayBuffer(0)) : new Float64Array(buffer ?? new ArrayBuffer(0))
  return Array.from(view)
}

/** Length of the common prefix of two token sequences, given that the first `from` are known equal. */
export function commonPrefixLength(a: ArrayLike<number>, b: ArrayLike<number>, from = 0): number {
  const limit = Math.min(a.length, b.length)
  let i = Math.min(from, limit)
  while (i < limit && a[i] === b[i]) i++
  return i
}
