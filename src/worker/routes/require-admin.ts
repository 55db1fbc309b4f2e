/**
 * @module
 * Middleware: the control plane accepts only the admin bearer token (never a session token).
 */
import type { MiddlewareHandler } from 'hono'
import { timingSafeEqual } from '../auth/credentials.ts'
import { edgeConfig } from '../config.ts'
import { GatewayError } from '../errors.ts'

export const requireAdmin: MiddlewareHandler<{ Bindings: Env }> = async function requireAdmin(c, next) {
  const { adminToken } = edgeConfig(c.env)
  if (!adminToken) throw new GatewayError(503, 'internal', 'admin API disabled: ROLLGATE_ADMIN_TOKEN is not set')
  const match = /^Bearer\s+(.+)$/i.exec(c.req.header('authorization')?.trim() ?? '')
  if (!match?.[1]) throw new GatewayError(401, 'authentication', 'admin bearer token required')
  if (!timingSafeEqual(match[1], adminToken)) throw new GatewayError(401, 'authentication', 'invalid admin token')
  await next()
}
