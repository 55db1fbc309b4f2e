/**
 * Bodies near the 32 MiB cap (issue #17.3): a call is either captured or refused with a 413 in the
 * caller's shape *before* the engine is called — never answered and then lost. The real Worker in
 * Miniflare (workerd's 32 MiB Durable Object RPC limit applies) against a counting vLLM-shaped upstream.
 */
import { once } from 'node:events'
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type MiniflareEdge, startMiniflareEdge } from '../../scripts/lib/miniflare-edge.ts'

const MIB = 1024 * 1024
const ADMIN = { authorization: 'Bearer size-admin', 'content-type': 'application/json' }

let upstream: Server
let upstreamUrl = ''
let engineCalls = 0
let edge: MiniflareEdge
let persistTo = ''

function engineAnswer(): string {
  return JSON.stringify({
    id: 'chatcmpl-size',
    object: 'chat.completion',
    created: 1760000000,
    model: 'Qwen/Qwen3-8B',
    prompt_token_ids: [1, 2, 3, 4],
    choices: [
      {
        index: 0,
        message: { role: 'assistant', content: 'ok', tool_calls: [] },
        logprobs: { content: [{ token: 'ok', logprob: -0.5, bytes: [111, 107], top_logprobs: [] }] },
        finish_reason: 'stop',
        stop_reason: null,
        token_ids: [1000, 151645],
      },
    ],
    usage: { prompt_tokens: 4, completion_tokens: 2, total_tokens: 6 },
  })
}

beforeAll(async () => {
  upstream = createServer((request, response) => {
    request.on('data', () => {})
    request.on('end', () => {
      if (request.url?.startsWith('/v1/chat/completions')) engineCalls++
      response.writeHead(200, { 'content-type': 'application/json' })
      response.end(
        request.url?.startsWith('/v1/models') ? JSON.stringify({ data: [{ id: 'Qwen/Qwen3-8B', max_model_len: 32768 }] }) : engineAnswer(),
      )
    })
  })
  upstream.listen(0, '127.0.0.1')
  await once(upstream, 'listening')
  upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`
  persistTo = mkdtempSync(join(tmpdir(), 'rollgate-size-'))
  edge = await startMiniflareEdge({
    persistTo,
    // Each size test below uses its own session; the session limit test fills one past 4 MiB.
    vars: {
      ROLLGATE_ADMIN_TOKEN: 'size-admin',
      ROLLGATE_SIGNING_KEY: 'k',
      ROLLGATE_UPSTREAM_URL: upstreamUrl,
      ROLLGATE_MAX_SESSION_BYTES: String(4 * MIB),
    },
  })
}, 120_000)

afterAll(async () => {
  await edge?.stop()
  upstream?.close()
  if (persistTo) rmSync(persistTo, { recursive: true, force: true })
})

async function session(): Promise<{ session_id: string; token: string }> {
  const res = await fetch(`${edge.url}/v1/sessions`, {
    method: 'POST',
    headers: ADMIN,
    body: JSON.stringify({ upstream: { url: upstreamUrl, served_model: 'Qwen/Qwen3-8B', max_model_len: 32768 } }),
  })
  expect(res.status).toBe(201)
  return (await res.json()) as { session_id: string; token: string }
}

async function completionCount(sessionId: string): Promise<number> {
  const res = await fetch(`${edge.url}/v1/sessions/${sessionId}`, { headers: ADMIN })
  return ((await res.json()) as { completion_count: number }).completion_count
}

/** A chat (or Anthropic) body of exactly `bytes` bytes: one large user message. */
function body(bytes: number, dialect: 'chat' | 'anthropic', stream = false, fill = 'x'): string {
  const shell =
    dialect === 'chat'
      ? (text: string) => JSON.stringify({ model: 'm', stream, messages: [{ role: 'user', content: text }] })
      : (text: string) => JSON.stringify({ model: 'm', stream, max_tokens: 64, messages: [{ role: 'user', content: text }] })
  return shell(fill.repeat(bytes - shell('').length))
}

async function call(token: string, text: string, dialect: 'chat' | 'anthropic') {
  const path = dialect === 'chat' ? '/v1/chat/completions' : '/v1/messages'
  const headers: Record<string, string> =
    dialect === 'chat' ? { authorization: `Bearer ${token}` } : { 'x-api-key': token, 'anthropic-version': '2023-06-01' }
  const res = await fetch(`${edge.url}${path}`, { method: 'POST', headers: { ...headers, 'content-type': 'application/json' }, body: text })
  return { status: res.status, text: await res.text(), contentType: res.headers.get('content-type') }
}

describe('capture at the size limit', () => {
  for (const mib of [16, 24]) {
    it(`captures a ${mib} MiB chat body (the engine body travels as a delta of it)`, async () => {
      const { session_id, token } = await session()
      const before = engineCalls
      const answer = await call(token, body(mib * MIB, 'chat'), 'chat')
      expect(answer.status, answer.text.slice(0, 300)).toBe(200)
      expect(engineCalls).toBe(before + 1)
      expect(await completionCount(session_id)).toBe(1)
    }, 120_000)
  }

  it('refuses a 31.9 MiB chat body with a 413 in the OpenAI shape before the engine is called, streaming or not', async () => {
    const { session_id, token } = await session()
    const before = engineCalls
    for (const stream of [false, true]) {
      const answer = await call(token, body(Math.floor(31.9 * MIB), 'chat', stream), 'chat')
      expect(answer.status).toBe(413)
      const error = (JSON.parse(answer.text) as { error: { message: string; type: string } }).error
      expect(error.message).toMatch(/request too large to capture: .* the engine was not called/)
    }
    expect(engineCalls).toBe(before)
    expect(await completionCount(session_id)).toBe(0)
  }, 120_000)

  it('a translated dialect carries two bodies: 16 MiB of Anthropic is a 413 (Anthropic shape), 12 MiB is captured', async () => {
    const { session_id, token } = await session()
    const before = engineCalls
    const refused = await call(token, body(16 * MIB, 'anthropic'), 'anthropic')
    expect(refused.status).toBe(413)
    expect((JSON.parse(refused.text) as { type: string; error: { type: string } }).type).toBe('error')
    expect(engineCalls).toBe(before)
    const captured = await call(token, body(12 * MIB, 'anthropic'), 'anthropic')
    expect(captured.status, captured.text.slice(0, 300)).toBe(200)
    expect(engineCalls).toBe(before + 1)
    expect(await completionCount(session_id)).toBe(1)
  }, 120_000)

  it('a session past ROLLGATE_MAX_SESSION_BYTES gets a 413 naming the limit on its next call, before the engine', async () => {
    const { session_id, token } = await session()
    expect((await call(token, body(3 * MIB, 'chat'), 'chat')).status).toBe(200)
    expect((await call(token, body(Math.floor(1.5 * MIB), 'chat', false, 'y'), 'chat')).status).toBe(200)
    const before = engineCalls
    const refused = await call(token, body(1024, 'chat'), 'chat')
    expect(refused.status).toBe(413)
    expect((JSON.parse(refused.text) as { error: { message: string } }).error.message).toMatch(
      /^session .* holds .* MiB of captured calls, at its 4\.0 MiB limit \(ROLLGATE_MAX_SESSION_BYTES\): it takes no more model calls; finalize it/,
    )
    expect(engineCalls).toBe(before)
    expect(await completionCount(session_id)).toBe(2)
    // Finalize still works: the limit keeps the session finalizable instead of failing there.
    const finalize = await fetch(`${edge.url}/v1/sessions/${session_id}/finalize`, { method: 'POST', headers: ADMIN, body: '{}' })
    expect(finalize.status).toBe(200)
  }, 120_000)
})
