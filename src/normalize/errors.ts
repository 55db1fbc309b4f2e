/**
 * @module
 * Provider-neutral error helpers shared by adapters and the pipeline.
 */
import type { NormalizedError } from './types.ts'

/** Statuses SDKs retry (vercel/ai `isRetryable`): keep them when relaying upstream failures. */
export const RETRYABLE_STATUSES: ReadonlySet<number> = new Set([408, 409, 429, 500, 502, 503, 504])

export function errorKindForStatus(status: number): NormalizedError['kind'] {
  if (status === 401) return 'authentication'
  if (status === 403) return 'permission'
  if (status === 404) return 'not_found'
  if (status === 408 || status === 504) return 'timeout'
  if (status === 413) return 'request_too_large'
  if (status === 429) return 'rate_limit'
  if (status === 503 || status === 529) return 'overloaded'
  if (status >= 400 && status < 500) return 'invalid_request'
  return 'upstream'
}

/** Best-effort message out of an upstream error body (OpenAI, vLLM, Anthropic or Google shaped). */
export function upstreamErrorMessage(body: unknown, fallback: string): string {
  if (body && typeof body === 'object') {
    const record = body as Record<string, unknown>
    const error = record.error
    if (typeof error === 'string') return error
    if (error && typeof error === 'object') {
      const message = (error as Record<string, unknown>).message
      if (typeof message === 'string' && message) return message
    }
    if (typeof record.message === 'string' && record.message) return record.message
    if (typeof record.detail === 'string' && record.detail) return record.detail
  }
  return fallback
}
