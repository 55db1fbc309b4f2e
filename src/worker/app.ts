/**
 * @module
 * The edge's hono app: health, control plane, harness proxy; one error handler rendering every failure
 * in the caller's own wire format.
 */
import { logError, logRequest } from '../contract/log.ts'
import { type Context, Hono } from 'hono'
import { RequestValidationError } from '../normalize/adapter.ts'
import { detectAdapter } from '../normalize/registry.ts'
import { anthropic } from '../normalize/providers/anthropic/index.ts'
import { wantsAnthropicModelList } from '../normalize/providers/anthropic/anthropic-models.ts'
import { google, isGoogleClient } from '../normalize/providers/google/index.ts'
import { openaiChat } from '../normalize/providers/openai-chat/index.ts'
import type { NormalizedError } from '../normalize/types.ts'
import { GatewayError, unmatchedRoute } from './errors.ts'
import { allowedMethods } from './route-table.ts'
import { adminSessions } from './routes/admin-sessions.ts'
import { dashboard } from './routes/dashboard.ts'
import { inferenceAdmin } from './routes/inference-admin.ts'
import { openapi } from './routes/openapi.ts'
import { rollout } from './routes/rollout.ts'
import { runners } from './routes/runners.ts'
import { proxy } from './routes/proxy.ts'

export const app = new Hono<{ Bindings: Env }>()

// One request line per call, its session token redacted (the platform's invocation logs, which keep
// full URLs, are off in wrangler.toml). Health probes are not logged.
app.use('*', async (c, next) => {
  const started = Date.now()
  await next()
  // hono's path (routing already computed it; percent-decoded, so an encoded token is redacted too), not a second URL parse.
  const path = c.req.path
  if (path !== '/' && path !== '/health') logRequest(c.req.method, path, c.res.status, Date.now() - started)
})

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
  logError('unhandled edge error', error)
  return { status: 500, kind: 'internal', message: 'internal gateway error' }
}

/**
 * Render an edge failure in the caller's own wire shape: the adapter its path names; on a path no adapter
 * serves (a mistyped base URL), the one its credential headers name (`x-goog-api-key` / `?key=`: Google's,
 * `anthropic-version` / `x-api-key`: Anthropic's, as `GET /v1/models` answers); else OpenAI's.
 */
function errorResponse(c: Context<{ Bindings: Env }>, error: unknown): Response {
  const url = new URL(c.req.url)
  const headers = c.req.raw.headers
  const adapter =
    detectAdapter(url, headers) ?? (isGoogleClient(url, headers) ? google : wantsAnthropicModelList(headers) ? anthropic : openaiChat)
  const { status, body } = adapter.buildError(normalizedError(error))
  const extra = error instanceof GatewayError ? error.headers : {}
  return c.json(body, status as 400, { ...extra, 'x-rollgate-error-source': 'edge' })
}

app.onError((error, c) => errorResponse(c, error))

app.notFound((c) => {
  const { pathname } = new URL(c.req.url)
  return errorResponse(c, unmatchedRoute(c.req.method, pathname, allowedMethods(pathname)))
})
