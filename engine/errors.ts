/**
 * @module engine/errors
 * One error class for everything the engine rejects, rendered in vLLM ≥0.11's shape:
 * `{"error": {"message", "type", "param", "code"}}` (`ErrorResponse` in
 * `vllm/entrypoints/openai/engine/protocol.py`; older vLLM used a flat `{"object": "error", …}`).
 */

const ERROR_TYPES: Record<number, string> = {
  400: 'BadRequestError',
  401: 'AuthenticationError',
  403: 'PermissionDeniedError',
  404: 'NotFoundError',
  408: 'RequestTimeoutError',
  409: 'ConflictError',
  413: 'PayloadTooLargeError',
  422: 'UnprocessableEntityError',
  429: 'RateLimitError',
  500: 'InternalServerError',
  501: 'NotImplementedError',
  502: 'BadGatewayError',
  503: 'ServiceUnavailableError',
  504: 'GatewayTimeoutError',
}

export function errorTypeForStatus(status: number): string {
  return ERROR_TYPES[status] ?? (status >= 500 ? 'InternalServerError' : 'BadRequestError')
}

export class EngineError extends Error {
  override readonly name = 'EngineError'
  readonly status: number
  readonly type: string
  readonly param: string | null

  constructor(status: number, message: string, options: { type?: string; param?: string } = {}) {
    super(message)
    this.status = status
    this.type = options.type ?? errorTypeForStatus(status)
    this.param = options.param ?? null
  }
}

export function badRequest(message: string, param?: string): EngineError {
  return new EngineError(400, message, param === undefined ? {} : { param })
}

export function errorBody(error: EngineError): string {
  return JSON.stringify({
    error: { message: error.message, type: error.type, param: error.param, code: error.status },
  })
}
