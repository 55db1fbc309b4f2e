/**
 * @module
 * Errors in OpenAI's shape, `{ error: { message, type, param, code } }`, with the HTTP status kept; and
 * the stable `code` a failed stream reports (Codex maps `response.failed` codes to its own errors).
 */
import type { NormalizedError } from '../../types.ts'

const OPENAI_ERROR_TYPE: Record<NormalizedError['kind'], string> = {
  invalid_request: 'invalid_request_error',
  authentication: 'authentication_error',
  permission: 'permission_error',
  not_found: 'invalid_request_error',
  request_too_large: 'invalid_request_error',
  rate_limit: 'rate_limit_error',
  overloaded: 'server_error',
  timeout: 'timeout_error',
  upstream: 'upstream_error',
  internal: 'server_error',
}

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

export function buildResponsesError(error: NormalizedError) {
  return {
    status: error.status,
    body: {
      error: {
        message: error.message,
        type: OPENAI_ERROR_TYPE[error.kind],
        param: error.param ?? null,
        code: error.kind === 'not_found' || error.kind === 'request_too_large' ? error.kind : null,
      },
    },
  }
}
