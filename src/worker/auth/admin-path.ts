/**
 * @module
 * The admin credential as a base-URL prefix: `/t/<admin token>/…` for the control-plane and rollout
 * routes, mirroring `/s/<session token>/…` for harnesses. Polar's trainer client sends no credential
 * (its rollout server has no auth), so `polar_rollout_url = https://edge/t/<token>` is the only way
 * it can authenticate unchanged. The prefix is stripped before routing and the token moves into the
 * `Authorization` header, so no route, log line, error body or stored record ever sees the path
 * with the token in it. Only the admin route families below are reachable this way; anything else
 * under `/t/` is a 404 that does not echo the path.
 */

/** Route families that take the admin credential (harness, runner and session routes do not). */
const ADMIN_PATHS = [
  /^\/rollout(\/|$)/,
  /^\/v1\/tasks(\/|$)/,
  /^\/v1\/sessions(\/|$)/,
  /^\/v1\/events$/,
  /^\/admin\//,
  /^\/health$/,
  /^\/$/,
]

const PREFIX = /^\/t\/([^/]+)(\/.*)?$/

export type AdminPathResult = { kind: 'none' } | { kind: 'rewritten'; request: Request } | { kind: 'not_found' }

const NONE: AdminPathResult = { kind: 'none' }

/** Strip a `/t/<token>` prefix into an `Authorization: Bearer` header (admin routes only). */
export function rewriteAdminPath(request: Request): AdminPathResult {
  // Most requests are not under `/t/`: told from the URL's text without parsing it (`scheme://host/path`).
  const raw = request.url
  const pathStart = raw.indexOf('/', raw.indexOf('//') + 2)
  if (pathStart < 0 || !raw.startsWith('/t/', pathStart)) return NONE
  const url = new URL(raw)
  const match = PREFIX.exec(url.pathname)
  if (!match) return NONE
  const token = decodeURIComponent(match[1] ?? '')
  const rest = match[2] ?? '/'
  if (!token || !ADMIN_PATHS.some((pattern) => pattern.test(rest))) return { kind: 'not_found' }
  url.pathname = rest
  const headers = new Headers(request.headers)
  headers.set('authorization', `Bearer ${token}`)
  return { kind: 'rewritten', request: new Request(url, new Request(request, { headers })) }
}
