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

/**
 * Parse or throw a `RequestValidationError` naming the most specific bad field: for unions (string or
 * block list) the branch error with the deepest path wins, so a bad block type reads
 * `messages[0].content[1].type`, not `messages[0].content`.
 */
export function parseOrThrow<T>(schema: z.ZodType<T>, value: unknown): T {
  const result = schema.safeParse(value)
  if (result.success) return result.data
  const best = deepestIssue(result.error.issues, [])
  const param = best ? pathOf(best.path) : ''
  const detail = best?.message ?? 'invalid request'
  throw new RequestValidationError(param ? `${param}: ${detail}` : detail, param || null)
}

interface FlatIssue {
  path: PropertyKey[]
  message: string
}

function deepestIssue(issues: readonly z.core.$ZodIssue[], prefix: PropertyKey[]): FlatIssue | null {
  let best: FlatIssue | null = null
  for (const issue of issues) {
    const path = [...prefix, ...issue.path]
    let candidate: FlatIssue = { path, message: issue.code === 'invalid_union' ? unionMessage(issue) : issue.message }
    if (issue.code === 'invalid_union' && issue.errors.length > 0) {
      for (const branch of issue.errors) {
        const inner = deepestIssue(branch, path)
        if (inner && inner.path.length > candidate.path.length) candidate = inner
      }
    }
    if (!best || candidate.path.length > best.path.length) best = candidate
  }
  return best
}

/**
 * A union whose every branch failed on the value's type reads `expected string or number, received boolean`
 * (zod's own message for it is a bare "Invalid input").
 */
function unionMessage(issue: z.core.$ZodIssueInvalidUnion): string {
  const expected: string[] = []
  let received: string | null = null
  for (const branch of issue.errors) {
    const top = branch.length === 1 ? branch[0] : undefined
    if (top?.code !== 'invalid_type' || top.path.length > 0) return issue.message
    if (!expected.includes(top.expected)) expected.push(top.expected)
    received ??= /received (\w+)/.exec(top.message)?.[1] ?? null
  }
  if (expected.length === 0) return issue.message
  return `expected ${expected.join(' or ')}${received ? `, received ${received}` : ''}`
}
