/**
 * @module
 * Strict query-string numbers: an integer is written as one (`12`, `-1`), never `0x0`, ` `, `1e3` or `1.0`;
 * an absent or empty parameter takes its default (the README's `?after_seq=&limit=` template reads as "from the
 * start, default page"). Anything else is a 400 naming the parameter and the accepted range.
 */
import { GatewayError } from './errors.ts'

const INTEGER = /^(0|-?[1-9][0-9]*)$/
const DECIMAL = /^(0|[1-9][0-9]*)(\.[0-9]+)?$/

export interface Range {
  min: number
  max: number
}

export function intParam(raw: string | undefined, name: string, fallback: number, range: Range): number {
  if (raw === undefined || raw === '') return fallback
  const value = INTEGER.test(raw) ? Number(raw) : Number.NaN
  if (!Number.isSafeInteger(value) || value < range.min || value > range.max) {
    throw new GatewayError(
      400,
      'invalid_request',
      `${name} must be an integer in [${range.min}, ${range.max}], got ${JSON.stringify(raw)}`,
      name,
    )
  }
  return value
}

/** A non-negative decimal number (`30`, `0.5`) within the range. */
export function numberParam(raw: string | undefined, name: string, fallback: number, range: Range): number {
  if (raw === undefined || raw === '') return fallback
  const value = DECIMAL.test(raw) ? Number(raw) : Number.NaN
  if (!Number.isFinite(value) || value < range.min || value > range.max) {
    throw new GatewayError(
      400,
      'invalid_request',
      `${name} must be a number in [${range.min}, ${range.max}], got ${JSON.stringify(raw)}`,
      name,
    )
  }
  return value
}
