/**
 * Routing errors from the real Worker: a wrong method on a known route is a 405 with `allow`; an unknown route
 * is a 404 that says it came from the edge; both in the caller's shape.
 */
import { SELF } from 'cloudflare:test'
import { describe, expect, it } from 'vitest'

const ADMIN = { authorization: 'Bearer test-admin-token', 'content-type': 'application/json' }
const EDGE = 'https://edge.test'

describe('routing errors', () => {
  it('answers a wrong method on a known route with 405 and allow', async () => {
    for (const [method, path, allow, headers] of [
      ['GET', '/v1/chat/completions', 'POST', {}],
      ['PUT', '/v1/messages', 'POST', { 'anthropic-version': '2023-06-01' }],
      ['POST', '/v1/sessions/ses_1', 'GET, HEAD', ADMIN],
      ['DELETE', '/v1/sessions/ses_1', 'GET, HEAD', ADMIN],
      ['GET', '/v1/sessions/ses_1/finalize', 'POST', ADMIN],
      ['POST', '/rollout/status', 'GET, HEAD', ADMIN],
      ['GET', '/s/rg_x.y/v1/chat/completions', 'POST', {}],
      ['PATCH', '/rollout/task/t1', 'DELETE, GET, HEAD', ADMIN],
    ] as const) {
      const res = await SELF.fetch(`${EDGE}${path}`, {
        method,
        headers,
        ...(method === 'GET' || method === 'DELETE' ? {} : { body: '{}' }),
      })
      expect(res.status, `${method} ${path}`).toBe(405)
      expect(res.headers.get('allow'), `${method} ${path}`).toBe(allow)
      expect(res.headers.get('x-rollgate-error-source')).toBe('edge')
      const body = (await res.json()) as { error: { message: string } }
      // A credential carried in the path is never echoed back (`/s/<token>/…` is named `/s/…/…`).
      const shown = path.replace(/^\/s\/[^/]+/, '/s/…')
      expect(body.error.message).toBe(`method ${method} is not allowed on ${shown}; allowed: ${allow}`)
    }
  })

  it('answers an unknown route with a 404 from the edge, in the caller shape', async () => {
    const plain = await SELF.fetch(`${EDGE}/v2/nothing`)
    expect(plain.status).toBe(404)
    expect(plain.headers.get('x-rollgate-error-source')).toBe('edge')
    expect(await plain.json()).toMatchObject({ error: { message: 'no route for GET /v2/nothing', type: 'invalid_request_error' } })
    const post = await SELF.fetch(`${EDGE}/v2/nothing`, { method: 'POST', body: '{}' })
    expect(post.status).toBe(404)
    expect(post.headers.get('x-rollgate-error-source')).toBe('edge')
    expect(((await post.json()) as { error: { message: string } }).error.message).toBe('no route for POST /v2/nothing')
    const gemini = await SELF.fetch(`${EDGE}/v1beta/models/m:embedContent`, {
      method: 'POST',
      headers: { 'x-goog-api-key': 'k' },
      body: '{}',
    })
    expect(gemini.headers.get('x-rollgate-error-source')).toBe('edge')
    expect(await gemini.json()).toMatchObject({ error: { code: 401, status: 'UNAUTHENTICATED' } })
  })

  it('a mistyped base URL gets its 404 in the shape its credential headers name (as GET /v1/models answers)', async () => {
    const anthropicCaller = await SELF.fetch(`${EDGE}/messages`, {
      method: 'POST',
      headers: { 'x-api-key': 'k', 'anthropic-version': '2023-06-01' },
      body: '{}',
    })
    expect(anthropicCaller.status).toBe(404)
    expect(await anthropicCaller.json()).toEqual({
      type: 'error',
      error: { type: 'not_found_error', message: 'no route for POST /messages' },
    })
    const googleCaller = await SELF.fetch(`${EDGE}/v1beta/model/m:generateContent?key=k`, { method: 'POST', body: '{}' })
    expect(googleCaller.status).toBe(404)
    expect(await googleCaller.json()).toMatchObject({ error: { code: 404, status: 'NOT_FOUND' } })
    const admin = await SELF.fetch(`${EDGE}/v1/session`, { headers: ADMIN })
    expect(await admin.json()).toMatchObject({ error: { type: 'invalid_request_error', code: 'not_found' } })
  })
})
