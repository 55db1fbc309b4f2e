/**
 * @module
 * Turn a zod failure into one readable message with the offending field path, for 4xx bodies.
 */
import type { z } from 'zod'
import { RequestValidationError } from './adapter.ts'

export function pathOf(path: ReadonlyArray<PropertyKey>): string {
  let out = ''
  for (const key of path) out += typeof key === 'number' ? `[${key}]` : out ? `.${String(key)}` : String(key)
  return out
}

/** Parse or throw a `RequestValidationError` naming the first bad field. */
export function parseOrThrow<T>(schema: z.ZodType<T>, value: unknown): T {
  const result = schema.safeParse(value)
  if (result.success) return result.data
  const issue = result.error.issues[0]
  const param = issue ? pathOf(issue.path) : null
  const detail = issue ? issue.message : 'invalid request'
  throw new RequestValidationError(param ? `${param}: ${detail}` : detail, param || null)
}
