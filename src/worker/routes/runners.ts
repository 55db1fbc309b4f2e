/**
 * @module
 * Runner-facing route: `GET /runners/connect?runner_id=<id>` upgrades to the runner protocol
 * WebSocket (`src/contract/runner-protocol.ts`) held by that runner's own `RunnerLink` Durable Object. Accepts only
 * the runner token (`ROLLGATE_RUNNER_TOKEN`, `Authorization: Bearer`): never an admin or session token.
 */
import { Hono, type MiddlewareHandler } from 'hono'
import { timingSafeEqual } from '../auth/credentials.ts'
import { GatewayError } from '../errors.ts'
import { RUNNER_ID, RUNNER_ID_MESSAGE } from '../../durable/runner/names.ts'
import { linkStub } from '../pipeline/rollout-stubs.ts'

type AppEnv = { Bindings: Env }

export const requireRunner: MiddlewareHandler<AppEnv> = async function requireRunner(c, next) {
  const runnerToken = c.env.ROLLGATE_RUNNER_TOKEN
  if (!runnerToken) throw new GatewayError(503, 'internal', 'runner API disabled: ROLLGATE_RUNNER_TOKEN is not set')
  const match = /^Bearer\s+(.+)$/i.exec(c.req.header('authorization')?.trim() ?? '')
  if (!match?.[1]) throw new GatewayError(401, 'authentication', 'runner bearer token required')
  if (!timingSafeEqual(match[1], runnerToken)) throw new GatewayError(401, 'authentication', 'invalid runner token')
  await next()
}

export const runners = new Hono<AppEnv>()

runners.get('/runners/connect', requireRunner, async (c) => {
  if (c.req.header('upgrade')?.toLowerCase() !== 'websocket') throw new GatewayError(426, 'invalid_request', 'expected a WebSocket upgrade')
  const url = new URL(c.req.url)
  const runnerId = url.searchParams.get('runner_id') ?? ''
  if (!RUNNER_ID.test(runnerId)) throw new GatewayError(400, 'invalid_request', RUNNER_ID_MESSAGE)
  const target = new URL(`https://runner-link/connect${url.search}`)
  return linkStub(c.env, runnerId).fetch(new Request(target, c.req.raw))
})
