/**
 * @module
 * Errors in Google's shape, `{ error: { code, message, status } }` with the canonical gRPC status name,
 * and the HTTP status kept (SDK retries depend on 408/409/429/5xx).
 * @see https://ai.google.dev/gemini-api/docs/troubleshooting#error-codes
 */
import type { NormalizedError } from '../../types.ts'

function googleStatus(error: NormalizedError): string {
  switch (error.status) {
    case 400:
      return 'INVALID_ARGUMENT'
    case 401:
      return 'UNAUTHENTICATED'
    case 403:
      return 'PERMISSION_DENIED'
    case 404:
      return 'NOT_FOUND'
    case 408:
    case 504:
      return 'DEADLINE_EXCEEDED'
    case 409:
      return 'ABORTED'
    case 413:
      return 'INVALID_ARGUMENT'
    case 429:
      return 'RESOURCE_EXHAUSTED'
    case 501:
      return 'UNIMPLEMENTED'
    case 503:
    case 529:
      return 'UNAVAILABLE'
    default:
      if (error.kind === 'overloaded') return 'UNAVAILABLE'
      if (error.kind === 'timeout') return 'DEADLINE_EXCEEDED'
      return error.status >= 500 ? 'INTERNAL' : 'FAILED_PRECONDITION'
  }
}

export function googleErrorBody(error: NormalizedError) {
  return { error: { code: error.status, message: error.message, status: googleStatus(error) } }
}

export function buildGoogleError(error: NormalizedError) {
  return { status: error.status, body: googleErrorBody(error) }
}
