/**
 * @module
 * `GET /openapi.json`: the OpenAPI 3.1 document of every route (no credential needed; it holds no secret).
 */
import { Hono } from 'hono'
import { openApiDocument } from '../openapi/document.ts'

export const openapi = new Hono<{ Bindings: Env }>()

let cached: { origin: string; body: string } | null = null

openapi.get('/openapi.json', (c) => {
  const origin = new URL(c.req.url).origin
  if (cached?.origin !== origin) cached = { origin, body: JSON.stringify(openApiDocument(origin)) }
  return c.body(cached.body, 200, { 'content-type': 'application/json' })
})
