/**
 * @module
 * 400 messages name the field and what was expected, also for unions (zod alone says "Invalid input").
 */
import { describe, expect, it } from 'vitest'
import { z } from 'zod'
import { RequestValidationError } from '../../../src/normalize/adapter.ts'
import { parseOrThrow } from '../../../src/normalize/zod-issues.ts'

function messageOf(schema: z.ZodType, value: unknown): string {
  try {
    parseOrThrow(schema, value)
  } catch (error) {
    if (error instanceof RequestValidationError) return error.message
    throw error
  }
  throw new Error('expected a RequestValidationError')
}

describe('parseOrThrow messages', () => {
  const session = z.object({ policy_version: z.union([z.string(), z.number()]).optional(), tags: z.array(z.string()).optional() })

  it('a union of types says which types and what it got', () => {
    expect(messageOf(session, { policy_version: true })).toBe('policy_version: expected string or number, received boolean')
    expect(messageOf(session, { policy_version: null })).toBe('policy_version: expected string or number, received null')
  })

  it('keeps the deepest branch error for unions of shapes, and plain messages elsewhere', () => {
    const content = z.object({ content: z.union([z.string(), z.array(z.object({ type: z.literal('text'), text: z.string() }))]) })
    expect(messageOf(content, { content: [{ type: 'text', text: 1 }] })).toMatch(/^content\[0\]\.text: .*expected string/)
    expect(messageOf(session, { tags: [1] })).toMatch(/^tags\[0\]: .*expected string, received number/)
  })
})
