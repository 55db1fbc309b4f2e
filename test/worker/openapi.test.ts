/**
 * `GET /openapi.json` against the routes actually mounted: every mounted route is documented, every
 * documented route answers (never the unmatched-route 404), and every request example validates
 * against the schema the route itself parses with.
 */
import { SELF } from 'cloudflare:test'
import { describe, expect, it } from 'vitest'
import { app } from '../../src/worker/app.ts'
import { openApiPath } from '../../src/worker/openapi/document.ts'
import { OPERATIONS, PATH_EXAMPLES } from '../../src/worker/openapi/operations.ts'

const EDGE = 'https://edge.test'
/** Base-URL prefixes under which the session routes are served again (documented once). */
const PREFIXES = [/^\/s\/:token\/a\/:agent(?=\/)/, /^\/s\/:token(?=\/)/, /^\/t\/:token(?=\/)/]
/** Catch-all routes (the proxy dispatches on the path): covered by the documented model-API operations. */
const CATCH_ALL = new Set(['POST /*', 'POST /:version/models/*', 'GET /:version/models/*', 'GET /dashboard/*'])

function mountedRoutes(): Set<string> {
  const routes = new Set<string>()
  for (const route of app.routes) {
    if (route.method === 'ALL') continue
    let path = route.path
    for (const prefix of PREFIXES) path = path.replace(prefix, '')
    path = path.replace(/\{[^}]*\}/g, '') || '/'
    routes.add(`${route.method} ${path}`)
  }
  return routes
}

const documented = new Set(OPERATIONS.map((operation) => `${operation.method.toUpperCase()} ${operation.path}`))

function concrete(path: string): string {
  return path.replace(/:([A-Za-z_]+)/g, (_, name: string) => PATH_EXAMPLES[name] ?? 'x')
}

describe('openapi.json', () => {
  it('is an OpenAPI 3.1 document with every operation and its schemas', async () => {
    const response = await SELF.fetch(`${EDGE}/openapi.json`)
    expect(response.status).toBe(200)
    const doc = (await response.json()) as {
      openapi: string
      servers: { url: string }[]
      paths: Record<string, Record<string, { requestBody?: { content: Record<string, { schema: { type?: string } }> } }>>
    }
    expect(doc.openapi).toBe('3.1.0')
    expect(doc.servers[0]!.url).toBe(EDGE)
    for (const operation of OPERATIONS) {
      const entry = doc.paths[openApiPath(operation.path)]?.[operation.method]
      expect(entry, `${operation.method} ${operation.path}`).toBeDefined()
      if (operation.body) expect(entry!.requestBody!.content['application/json']!.schema).toBeTypeOf('object')
    }
    // The task schema carries Polar's field names.
    const submit = doc.paths['/rollout/task/submit']!.post!.requestBody!.content['application/json']!.schema as {
      properties: Record<string, unknown>
    }
    expect(Object.keys(submit.properties)).toEqual(expect.arrayContaining(['task_id', 'instruction', 'num_samples', 'agent', 'builder']))
  })

  it('documents every mounted route', () => {
    const missing = [...mountedRoutes()].filter((route) => !CATCH_ALL.has(route) && !documented.has(route))
    expect(missing).toEqual([])
  })

  it('every documented route exists (answers something other than the unmatched-route 404)', async () => {
    for (const operation of OPERATIONS) {
      const method = operation.method.toUpperCase()
      const response = await SELF.fetch(`${EDGE}${concrete(operation.path)}`, {
        method,
        ...(operation.method === 'post' ? { body: '{}', headers: { 'content-type': 'application/json' } } : {}),
      })
      const text = method === 'HEAD' ? '' : await response.text()
      expect(`${method} ${operation.path} → ${response.status} ${text.slice(0, 80)}`).not.toMatch(/ → 404 .*no route/)
      expect(response.status, `${method} ${operation.path}`).not.toBe(405)
    }
  })

  it('every request example validates against the schema the route parses with', () => {
    for (const operation of OPERATIONS) {
      if (!operation.body) continue
      expect(operation.example, `${operation.method} ${operation.path} needs an example`).toBeDefined()
      const parsed = operation.body.safeParse(operation.example)
      expect(parsed.success, `${operation.method} ${operation.path}: ${parsed.error?.message}`).toBe(true)
    }
  })
})
