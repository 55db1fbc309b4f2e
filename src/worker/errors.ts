/**
 * @module
 * The one gateway error: status, kind and field, rendered by the caller's adapter in its own wire shape.
 */
import type { NormalizedError } from '../normalize/types.ts'

export class GatewayError extends Error {
  readonly status: number
  readonly kind: NormalizedError['kind']
  readonly param: string | null
  /** Extra response headers (`allow` on a 405). */
  readonly headers: Record<string, string>

  constructor(
    status: number,
    kind: NormalizedError['kind'],
    message: string,
    param: string | null = null,
    headers: Record<string, string> = {},
  ) {
    super(message)
    this.name = 'GatewayError'
    this.status = status
    this.kind = kind
    this.param = param
    this.headers = headers
  }

  toNormalized(): NormalizedError {
    return { status: this.status, kind: this.kind, message: this.message, param: this.param }
  }
}

/** The error for a request no route serves: 405 with `allow` when the path is served under other methods, else 404. */
export function unmatchedRoute(method: string, pathname: string, allowed: readonly string[]): GatewayError {
  if (allowed.length > 0 && !allowed.includes(method)) {
    return new GatewayError(
      405,
      'invalid_request',
      `method ${method} is not allowed on ${pathname}; allowed: ${allowed.join(', ')}`,
      null,
      {
        allow: allowed.join(', '),
      },
    )
  }
  return new GatewayError(404, 'not_found', `no route for ${method} ${pathname}`)
}
