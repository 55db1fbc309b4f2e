/**
 * @module
 * OpenAI's error shape, `{ error: { message, type, param, code } }` with the HTTP status kept: shared by
 * the chat-completions and Responses adapters (both APIs use it).
 */
import type { NormalizedError } from './types.ts'

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

export function buildOpenaiError(error: NormalizedError) {
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
