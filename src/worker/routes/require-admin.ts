/**
 * @module
 * Middleware: the control plane accepts only the admin token (never a session token), as
 * `Authorization: Bearer`, as newer Polar's `X-Polar-Control-Token` header (its trainer client sends
 * `POLAR_CONTROL_PLANE_TOKEN` there), or as a `/t/<token>/…` base-URL prefix (`auth/admin-path.ts`
 * turns it into the bearer header before routing).
 */
import type { MiddlewareHandler } from 'hono'
import { timingSafeEqual } from '../auth/credentials.ts'
import { edgeConfig } from '../config.ts'
import { GatewayError } from '../errors.ts'

export const requireAdmin: MiddlewareHandler<{ Bindings: Env }> = async function requireAdmin(c, next) {
  const { adminToken } = edgeConfig(c.env)
  if (!adminToken) throw new GatewayError(503, 'internal', 'admin API disabled: ROLLGATE_ADMIN_TOKEN is not set')
  const match = /^Bearer\s+(.+)$/i.exec(c.req.header('authorization')?.trim() ?? '')
  const presented = match?.[1] ?? c.req.header('x-polar-control-token')?.trim()
  if (!presented) throw new GatewayError(401, 'authentication', 'admin bearer token required')
  if (!timingSafeEqual(presented, adminToken)) throw new GatewayError(401, 'authentication', 'invalid admin token')
  await next()
}
