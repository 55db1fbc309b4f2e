/**
 * @module
 * Errors in OpenAI's shape, `{ error: { message, type, param, code } }`, with the HTTP status kept; and
 * the stable `code` a failed stream reports (Codex maps `response.failed` codes to its own errors).
 */
import { buildOpenaiError } from '../../openai-error.ts'
import type { NormalizedError } from '../../types.ts'

const STREAM_ERROR_CODE: Record<NormalizedError['kind'], string> = {
  invalid_request: 'invalid_request',
  authentication: 'invalid_api_key',
  permission: 'permission_denied',
  not_found: 'not_found',
  request_too_large: 'request_too_large',
  rate_limit: 'rate_limit_exceeded',
  overloaded: 'server_is_overloaded',
  timeout: 'timeout',
  upstream: 'server_error',
  internal: 'server_error',
}

export function responsesStreamErrorCode(error: NormalizedError): string {
  return STREAM_ERROR_CODE[error.kind]
}

export const buildResponsesError = buildOpenaiError
