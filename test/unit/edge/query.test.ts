/**
 * @module
 * Strict query numbers: empty means the default; `0x0`, `%20`, `1e3`, `1.0` and out-of-range values are a 400
 * naming the parameter (they were once read as 0 and silently skipped record 0).
 */
import { describe, expect, it } from 'vitest'
import { GatewayError } from '../../../src/worker/errors.ts'
import { intParam, numberParam } from '../../../src/worker/query.ts'

function rejection(run: () => unknown): GatewayError {
  try {
    run()
  } catch (error) {
    if (error instanceof GatewayError) return error
    throw error
  }
  throw new Error('expected a GatewayError')
}

describe('intParam', () => {
  const range = { min: -1, max: 10 }
  it('reads integers and defaults absent or empty values', () => {
    expect(intParam(undefined, 'after_seq', -1, range)).toBe(-1)
    expect(intParam('', 'after_seq', -1, range)).toBe(-1)
    expect(intParam('0', 'after_seq', -1, range)).toBe(0)
    expect(intParam('-1', 'after_seq', 5, range)).toBe(-1)
    expect(intParam('10', 'after_seq', -1, range)).toBe(10)
  })

  it('rejects anything that is not plainly an integer in range, naming the parameter', () => {
    for (const raw of [' ', '0x0', '1e1', '1.0', '01', '+1', '-0', 'abc', '11', '-2', '9007199254740993']) {
      const error = rejection(() =>
        intParam(raw, 'after_seq', -1, { min: -1, max: raw === '9007199254740993' ? Number.MAX_SAFE_INTEGER : 10 }),
      )
      expect(error.status, raw).toBe(400)
      expect(error.param).toBe('after_seq')
      expect(error.message).toContain(`got ${JSON.stringify(raw)}`)
    }
  })
})

describe('numberParam', () => {
  const range = { min: 0, max: 3600 }
  it('reads decimals and defaults', () => {
    expect(numberParam(undefined, 'timeout_seconds', 300, range)).toBe(300)
    expect(numberParam('', 'timeout_seconds', 300, range)).toBe(300)
    expect(numberParam('0', 'timeout_seconds', 300, range)).toBe(0)
    expect(numberParam('0.5', 'timeout_seconds', 300, range)).toBe(0.5)
    expect(numberParam('3600', 'timeout_seconds', 300, range)).toBe(3600)
  })

  it('rejects out-of-range and malformed values', () => {
    for (const raw of ['99999', '3600.5', '-1', '1e3', 'Infinity', ' 1', '.5']) {
      const error = rejection(() => numberParam(raw, 'timeout_seconds', 300, range))
      expect(error.param, raw).toBe('timeout_seconds')
      expect(error.message).toBe(`timeout_seconds must be a number in [0, 3600], got ${JSON.stringify(raw)}`)
    }
  })
})
