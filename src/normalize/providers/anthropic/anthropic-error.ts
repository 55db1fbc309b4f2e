/**
 * @module
 * Errors in Anthropic's shape, `{ type: "error", error: { type, message } }`, with the HTTP status kept
 * (SDK retries depend on 408/409/429/5xx).
 * @see https://docs.anthropic.com/en/api/errors
 */
import type { NormalizedError } from '../../types.ts'

const ANTHROPIC_ERROR_TYPE: Record<NormalizedError['kind'], string> = {
  invalid_request: 'invalid_request_error',
  authentication: 'authentication_error',
  permission: 'permission_error',
  not_found: 'not_found_error',
  request_too_large: 'request_too_large',
  rate_limit: 'rate_limit_error',
  overloaded: 'overloaded_error',
  timeout: 'timeout_error',
  upstream: 'api_error',
  internal: 'api_error',
}

export function anthropicErrorBody(error: NormalizedError) {
  return { type: 'error' as const, error: { type: ANTHROPIC_ERROR_TYPE[error.kind], message: error.message } }
}

export function buildAnthropicError(error: NormalizedError) {
  return { status: error.status, body: anthropicErrorBody(error) }
}
