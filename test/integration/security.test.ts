/**
 * Security properties of the edge under `wrangler dev` (security issue): what goes to which upstream
 * (the upstream API key only to the configured upstream's origin, never to a URL from a request body;
 * credentials in an upstream URL are never stored, recorded or sent).
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type EdgeProcess, startEdge } from '../../scripts/lib/processes.ts'
import { eventually } from '../support/stack.ts'
import { type CaptureUpstream, startCaptureUpstream } from '../support/capture-upstream.ts'

const ADMIN_TOKEN = 'itest-admin-token'
const UPSTREAM_KEY = 'itest-upstream-key-7f3a'

let configured: CaptureUpstream
let foreign: CaptureUpstream
let edge: EdgeProcess
let persistTo: string

async function admin(path: string, init: RequestInit = {}): Promise<Response> {
  return fetch(`${edge.url}${path}`, {
    ...init,
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json', ...init.headers },
  })
}

async function createSession(body: Record<string, unknown>): Promise<{ session_id: string; token: string }> {
  const res = await admin('/v1/sessions', { method: 'POST', body: JSON.stringify(body) })
  if (res.status !== 201) throw new Error(`create session ${res.status}: ${await res.text()}`)
  return (await res.json()) as { session_id: string; token: string }
}

async function chat(token: string): Promise<Response> {
  return fetch(`${edge.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }),
  })
}

async function countTokens(token: string): Promise<Response> {
  return fetch(`${edge.url}/v1/messages/count_tokens`, {
    method: 'POST',
    headers: { 'x-api-key': token, 'anthropic-version': '2023-06-01', 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }),
  })
}

beforeAll(async () => {
  configured = await startCaptureUpstream()
  foreign = await startCaptureUpstream()
  persistTo = mkdtempSync(join(tmpdir(), 'rollgate-security-itest-'))
  edge = await startEdge({
    persistTo,
    vars: {
      ROLLGATE_ADMIN_TOKEN: ADMIN_TOKEN,
      ROLLGATE_SIGNING_KEY: 'itest-signing-key',
      ROLLGATE_UPSTREAM_URL: configured.url,
      ROLLGATE_UPSTREAM_API_KEY: UPSTREAM_KEY,
    },
    logLevel: 'debug',
  })
})

afterAll(async () => {
  await edge?.stop()
  await configured?.close()
  await foreign?.close()
  if (persistTo) rmSync(persistTo, { recursive: true, force: true })
})

describe('upstream API key scope', () => {
  it('sends the key to the configured upstream (chat and /tokenize)', async () => {
    const session = await createSession({})
    expect((await chat(session.token)).status).toBe(200)
    expect((await countTokens(session.token)).status).toBe(200)
    const calls = configured.seen.filter((request) => request.method === 'POST')
    expect(calls.map((request) => request.path)).toEqual(['/v1/chat/completions', '/tokenize'])
    for (const request of calls) expect(request.headers.authorization).toBe(`Bearer ${UPSTREAM_KEY}`)
  })

  it('never sends it to an upstream URL that came in a request body', async () => {
    const session = await createSession({ upstream: { url: `${foreign.url}/v1` } })
    expect((await chat(session.token)).status).toBe(200)
    expect((await countTokens(session.token)).status).toBe(200)
    const calls = foreign.seen.filter((request) => request.method === 'POST')
    expect(calls.map((request) => request.path)).toEqual(['/v1/chat/completions', '/tokenize'])
    for (const request of foreign.seen) expect(request.headers.authorization).toBeUndefined()
    expect(JSON.stringify(foreign.seen)).not.toContain(UPSTREAM_KEY)
  })
})

describe('credentials in upstream URLs', () => {
  it('are stripped before the URL is stored: never recorded in provenance, never sent', async () => {
    const before = foreign.seen.length
    const session = await createSession({ upstream: { url: `http://trainer:hunter2@127.0.0.1:${foreign.port}/v1` } })
    expect((await chat(session.token)).status).toBe(200)
    const info = await (await admin(`/v1/sessions/${session.session_id}`)).text()
    expect(info).not.toContain('hunter2')
    const page = await (await admin(`/v1/sessions/${session.session_id}/completions`)).json()
    const records = (page as { completions: { provenance: { upstream_url: string } }[] }).completions
    expect(records).toHaveLength(1)
    expect(records[0]!.provenance.upstream_url).toBe(`http://127.0.0.1:${foreign.port}/v1`)
    expect(JSON.stringify(page)).not.toContain('hunter2')
    const sent = foreign.seen.slice(before)
    expect(sent.length).toBeGreaterThan(0)
    for (const request of sent) expect(request.headers.authorization).toBeUndefined()
  })
})

describe('logs', () => {
  it('never print a session token: request lines carry the redacted path, errors are redacted too', async () => {
    const session = await createSession({})
    const token = session.token
    await fetch(`${edge.url}/s/${token}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }),
    })
    await fetch(`${edge.url}/v1beta/models/m:generateContent?key=${token}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ contents: [{ role: 'user', parts: [{ text: 'hi' }] }] }),
    })
    // Both requests' lines arrive asynchronously (wrangler relays the Worker's console): wait for both.
    const marker = '"path":"/s/rg_…/v1/chat/completions"'
    await eventually(async () => {
      expect(edge.output()).toContain(marker)
      expect(edge.output()).toContain('"path":"/v1beta/models/m:generateContent"')
    })
    // wrangler dev's own access lines (`[wrangler:info] POST /s/<token>/…`) come from the dev server, not the
    // Worker (SECURITY.md); everything else — the Worker's lines, and at debug level the inspector traffic — is checked.
    const workerLines = edge
      .output()
      .split('\n')
      .filter((line) => !/^\[wrangler(-ProxyWorker)?:info\] /.test(line))
      .join('\n')
    expect(workerLines).toContain('"path":"/v1beta/models/m:generateContent"')
    expect(workerLines).not.toContain(token.slice(3, 20))
    expect(workerLines).not.toContain(token.split('.')[1])
  })
})
