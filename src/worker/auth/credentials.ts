/**
 * @module
 * Where a harness puts its API key: `Authorization: Bearer`, `x-api-key` (Anthropic), `x-goog-api-key`
 * (Google), `?key=` (Google REST), or a `/s/<token>/…` base-URL prefix.
 */

export function presentedCredential(request: Request, url: URL, pathToken: string | undefined): string | null {
  if (pathToken) return pathToken
  const authorization = request.headers.get('authorization')
  if (authorization) {
    // Fetch hands header values over trimmed: the token is everything after the scheme and its spaces.
    // Stryker disable next-line Regex: a header value holds no line break, so `$` after a greedy `.+` changes nothing
    const match = /^Bearer\s+(.+)$/i.exec(authorization)
    if (match?.[1]) return match[1]
  }
  return request.headers.get('x-api-key') ?? request.headers.get('x-goog-api-key') ?? url.searchParams.get('key')
}

/** Constant-time string comparison for the admin token. */
export function timingSafeEqual(a: string, b: string): boolean {
  let difference = a.length ^ b.length
  // Stryker disable next-line EqualityOperator,MethodExpression: lengths that differ already make `difference` non-zero, so bounds past the shorter string change no answer
  for (let i = 0; i < Math.max(a.length, b.length); i++) difference |= (a.charCodeAt(i) || 0) ^ (b.charCodeAt(i) || 0)
  return difference === 0
}
