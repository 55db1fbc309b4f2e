/**
 * @module
 * Where a harness puts its API key: `Authorization: Bearer`, `x-api-key` (Anthropic), `x-goog-api-key`
 * (Google), `?key=` (Google REST), or a `/s/<token>/…` base-URL prefix.
 */

export function presentedCredential(request: Request, url: URL, pathToken: string | undefined): string | null {
  if (pathToken) return pathToken
  const authorization = request.headers.get('authorization')
  if (authorization) {
    const match = /^Bearer\s+(.+)$/i.exec(authorization.trim())
    if (match?.[1]) return match[1].trim()
  }
  return request.headers.get('x-api-key') ?? request.headers.get('x-goog-api-key') ?? url.searchParams.get('key')
}

/** Constant-time string comparison for the admin token. */
export function timingSafeEqual(a: string, b: string): boolean {
  let difference = a.length ^ b.length
  for (let i = 0; i < Math.max(a.length, b.length); i++) difference |= (a.charCodeAt(i) || 0) ^ (b.charCodeAt(i) || 0)
  return difference === 0
}
