/**
 * @module
 * The edge's hono app: health, control plane, harness proxy; one error handler rendering every failure
 * in the caller's own wire format.
 */
import { Hono } from 'hono'
import { RequestValidationError } from '../normalize/adapter.ts'
import { detectAdapter } from '../normalize/registry.ts'
import { openaiChat } from '../normalize/providers/openai-chat/index.ts'
import type { NormalizedError } from '../normalize/types.ts'
import { GatewayError } from './errors.ts'
import { adminSessions } from './routes/admin-sessions.ts'
import { dashboard } from './routes/dashboard.ts'
import { inferenceAdmin } from './routes/inference-admin.ts'
import { openapi } from './routes/openapi.ts'
import { rollout } from './routes/rollout.ts'
import { runners } from './routes/runners.ts'
import { proxy } from './routes/proxy.ts'

export const app = new Hono<{ Bindings: Env }>()

app.on(['GET', 'HEAD'], '/', (c) => c.json({ status: 'ok', service: 'rollgate' }))
// Polar's launch scripts poll `GET /health` on the rollout server.
app.on(['GET', 'HEAD'], '/health', (c) => c.json({ status: 'ok', service: 'rollgate' }))
app.route('/', openapi)
app.route('/', dashboard)
app.route('/v1/sessions', adminSessions)
app.route('/', rollout)
app.route('/', runners)
app.route('/', inferenceAdmin)
app.route('/s/:token/a/:agent', proxy)
app.route('/s/:token', proxy)
app.route('/', proxy)

function normalizedError(error: unknown): NormalizedError {
  if (error instanceof GatewayError) return error.toNormalized()
  if (error instanceof RequestValidationError) {
    return { status: error.status, kind: 'invalid_request', message: error.message, param: error.param }
  }
  console.error('unhandled edge error', error)
  return { status: 500, kind: 'internal', message: 'internal gateway error' }
}

app.onError((error, c) => {
  const adapter = detectAdapter(new URL(c.req.url), c.req.raw.headers) ?? openaiChat
  const { status, body } = adapter.buildError(normalizedError(error))
  return c.json(body, status as 400, { 'x-rollgate-error-source': 'edge' })
})

app.notFound((c) => {
  const { status, body } = openaiChat.buildError({
    status: 404,
    kind: 'not_found',
    message: `no route for ${c.req.method} ${new URL(c.req.url).pathname}`,
  })
  return c.json(body, status as 404)
})
