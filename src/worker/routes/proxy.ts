/**
 * @module
 * Harness-facing routes. Mounted at `/`, `/s/:token` and `/s/:token/a/:agent`, so a session token can
 * ride in the base URL for harnesses that cannot set an API key.
 */
import { Hono } from 'hono'
import { detectAdapter } from '../../normalize/registry.ts'
import { edgeConfig } from '../config.ts'
import { GatewayError, unmatchedRoute } from '../errors.ts'
import { allowedMethods } from '../route-table.ts'
import { handleProxyRequest } from '../pipeline/handle-proxy-request.ts'
import { authenticateSession } from '../pipeline/session-access.ts'
import { countTokens } from './count-tokens.ts'
import { models } from './models.ts'

export const proxy = new Hono<{ Bindings: Env }>()

function pathCredentials(c: { req: { param(name: string): string | undefined } }) {
  return { token: c.req.param('token') || undefined, agent: c.req.param('agent') || undefined }
}

proxy.route('/', models)
proxy.route('/', countTokens)

proxy.get('/v1/models', async (c) => {
  const config = edgeConfig(c.env)
  const url = new URL(c.req.url)
  const access = await authenticateSession(c.env, config, c.req.raw, url, pathCredentials(c))
  const served = access.config.upstream.served_model
  const created = Math.floor(Date.parse(access.config.created_at) / 1000)
  const data = served ? [{ id: served, object: 'model', created, owned_by: 'rollgate' }] : []
  if (!served) {
    const upstream = await fetch(`${access.config.upstream.url.replace(/\/v1$/, '')}/v1/models`).catch(() => null)
    const body = upstream?.ok ? ((await upstream.json().catch(() => null)) as { data?: { id?: unknown }[] } | null) : null
    for (const model of body?.data ?? []) {
      if (typeof model.id === 'string') data.push({ id: model.id, object: 'model', created, owned_by: 'rollgate' })
    }
  }
  return c.json({ object: 'list', data })
})

// Claude Code's connectivity probe (`HEAD /api/hello`, no auth, before the first call when non-essential traffic is on).
proxy.on(['GET', 'HEAD'], '/api/hello', (c) => c.json({ status: 'ok', service: 'rollgate' }))

// Codex's built-in OpenAI provider first tries the Responses WebSocket transport (`GET /v1/responses` with
// `Upgrade: websocket`). 426 makes it fall back to HTTP POST at once; a 404 costs it five reconnects (≈6 s).
proxy.get('/v1/responses', () => {
  throw new GatewayError(426, 'invalid_request', 'WebSocket transport is not supported; use POST /v1/responses')
})

proxy.post('*', async (c) => {
  const url = new URL(c.req.url)
  const adapter = detectAdapter(url, c.req.raw.headers)
  if (!adapter) throw unmatchedRoute(c.req.method, url.pathname, allowedMethods(url.pathname))
  return handleProxyRequest(
    {
      env: c.env,
      config: edgeConfig(c.env),
      request: c.req.raw,
      url,
      path: pathCredentials(c),
      waitUntil: (promise) => c.executionCtx.waitUntil(promise),
    },
    adapter,
  )
})
