/**
 * @module
 * The operator dashboard: static files under `assets/dashboard/` (Workers static assets: `app.js`,
 * `style.css`, `index.html`), served before the Worker runs; deep links (`/dashboard/session/<id>`, …)
 * get the same `index.html` here. The page holds no data: every view reads the admin API with the token
 * the operator typed into the login form, kept only in the browser tab's `sessionStorage`.
 *
 * Also `POST /v1/sessions/:id/detokenize` (admin): token text for the trajectory view.
 */
import { Hono } from 'hono'
import { z } from 'zod'
import { parseOrThrow } from '../../normalize/zod-issues.ts'
import { edgeConfig, upstreamKeyFor } from '../config.ts'
import { GatewayError } from '../errors.ts'
import { detokenizeSegments } from '../pipeline/detokenize.ts'
import { parseJsonBody, readBodyText } from '../pipeline/read-body.ts'
import { sessionStub } from '../pipeline/session-access.ts'
import { requireAdmin } from './require-admin.ts'

/** One request detokenizes at most this many segments and ids (the page asks in pages). */
const MAX_SEGMENTS = 256
const MAX_IDS = 400_000

export const detokenizeBodySchema = z.object({
  segments: z
    .array(z.array(z.number().int().min(0)))
    .max(MAX_SEGMENTS)
    .refine((segments) => segments.reduce((sum, segment) => sum + segment.length, 0) <= MAX_IDS, {
      message: `at most ${MAX_IDS} token ids per request`,
    }),
})

export const dashboard = new Hono<{ Bindings: Env }>()

async function shell(c: { env: Env; req: { url: string } }): Promise<Response> {
  const index = await c.env.ASSETS.fetch(new URL('/dashboard/index.html', c.req.url))
  return new Response(index.body, {
    status: index.status,
    headers: { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store', 'x-frame-options': 'DENY' },
  })
}

dashboard.get('/dashboard', (c) => shell(c))
dashboard.get('/dashboard/*', (c) => shell(c))

dashboard.post('/v1/sessions/:id/detokenize', requireAdmin, async (c) => {
  const body = parseOrThrow(detokenizeBodySchema, parseJsonBody(await readBodyText(c.req.raw, 8 * 1024 * 1024)))
  const session = await sessionStub(c.env, c.req.param('id')).config()
  if (!session) throw new GatewayError(404, 'not_found', `session ${c.req.param('id')} not found`)
  const config = edgeConfig(c.env)
  const texts = await detokenizeSegments(session.upstream, body.segments, { apiKey: upstreamKeyFor(config, session.upstream.url) })
  return c.json({ texts, source: texts.every((text) => text !== null) ? 'engine' : 'unavailable' })
})
