/**
 * @module
 * The one gateway error: status, kind and field, rendered by the caller's adapter in its own wire shape.
 */
import { redactSessionTokens } from '../contract/session-token.ts'
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

/**
 * A path as error messages may echo it: a credential carried as a base-URL prefix (`/s/<token>/…`,
 * `/t/<token>/…`) or anywhere as a session token is replaced by `…`, so no answer repeats a secret.
 */
export function displayPath(pathname: string): string {
  return redactSessionTokens(pathname.replace(/^\/([st])\/[^/]+/, '/$1/…'))
}

/** The error for a request no route serves: 405 with `allow` when the path is served under other methods, else 404. */
export function unmatchedRoute(method: string, rawPathname: string, allowed: readonly string[]): GatewayError {
  const pathname = displayPath(rawPathname)
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
