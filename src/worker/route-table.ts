/**
 * @module
 * Which methods the edge serves at a path, from the route table (`openapi/operations.ts`): an unmatched request
 * on a known path is a 405 with `allow`, not a 404. Session routes are also served under `/s/<token>` and
 * `/s/<token>/a/<agent>`, admin and rollout routes under `/t/<token>`.
 */
import { OPERATIONS } from './openapi/operations.ts'

const PREFIX = /^\/(s\/[^/]+(\/a\/[^/]+)?|t\/[^/]+)(?=\/)/

function pattern(path: string): RegExp {
  const source = path
    .split(/(:[A-Za-z_]+)/)
    .map((part) => (part.startsWith(':') ? '[^/:]+' : part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
    .join('')
  return new RegExp(`^${source}/?$`)
}

const ROUTES = OPERATIONS.map((operation) => ({ method: operation.method.toUpperCase(), pattern: pattern(operation.path) }))

/** Methods served at this path (HEAD wherever GET is), sorted; empty when no route has the path. */
export function allowedMethods(pathname: string): string[] {
  const candidates = [pathname, pathname.replace(PREFIX, '')]
  const methods = new Set<string>()
  for (const route of ROUTES) {
    if (candidates.some((candidate) => route.pattern.test(candidate))) {
      methods.add(route.method)
      if (route.method === 'GET') methods.add('HEAD')
    }
  }
  return [...methods].sort()
}
