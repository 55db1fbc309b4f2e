/**
 * Replays the request bodies recorded from the real harness CLIs (`scripts/record-harness-fixtures.ts`,
 * `src/normalize/providers/<api>/__fixtures__/<variant>-<scenario>.<n>.request.json`; scenarios `hello`, 2–3
 * calls, and `fix-stats`, the multi-step task, 11+ calls) through the real edge
 * (wrangler dev) and the stand-in engine, one capture session per harness variant, turns in order, with the
 * harness's own auth header carrying the session token. Every call must be accepted (2xx, no error frame in
 * a stream), recorded as a trainable completion of the fixture's API with the body kept byte-for-byte, and its
 * captured prompt must equal the engine's own `/tokenize` of the normalized request. Real harness traffic in
 * CI, without the CLIs.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { engineTokenize, type Stack, startStack } from '../support/stack.ts'

const PROVIDERS_DIR = join(import.meta.dirname, '../../src/normalize/providers')
const API_FOLDERS = ['anthropic', 'openai-chat', 'openai-responses', 'google']
const RECORDED = /^(?<variant>[a-z0-9-]+?)-(?<scenario>hello|fix-stats)\.(?<n>\d+)\.request\.json$/
/** Error frames inside a 2xx synthetic stream. */
const STREAM_ERROR = /^(?:event: (?:error|response\.failed)\b|data: \{"error":)/m

interface RecordedFixture {
  file: string
  api: string
  n: number
  path: string
  headers: Record<string, string>
  body: Record<string, unknown>
}

function loadRecorded(): Map<string, RecordedFixture[]> {
  const byVariant = new Map<string, RecordedFixture[]>()
  for (const api of API_FOLDERS) {
    const dir = join(PROVIDERS_DIR, api, '__fixtures__')
    if (!existsSync(dir)) continue
    for (const file of readdirSync(dir)) {
      const match = RECORDED.exec(file)
      if (!match?.groups) continue
      const data = JSON.parse(readFileSync(join(dir, file), 'utf8')) as Omit<RecordedFixture, 'file' | 'api' | 'n'>
      const key = `${match.groups.variant!} (${match.groups.scenario!})`
      const list = byVariant.get(key) ?? []
      list.push({ file: `${api}/__fixtures__/${file}`, api, n: Number(match.groups.n), ...data })
      byVariant.set(key, list)
    }
  }
  for (const list of byVariant.values()) list.sort((a, b) => a.n - b.n)
  return byVariant
}

const recorded = loadRecorded()
let stack: Stack

beforeAll(async () => {
  // Claude Code asks for max_tokens 128000: the window must hold it plus the prompt, as a real deployment's would.
  stack = await startStack({ maxModelLen: 262_144 })
})
afterAll(async () => {
  await stack?.stop()
})

describe('recorded harness traffic through the real edge', () => {
  it('has recorded fixtures to replay, the multi-step task for every harness', () => {
    expect(recorded.size).toBeGreaterThan(0)
    const longSessions = [...recorded.keys()].filter((key) => key.endsWith('(fix-stats)'))
    for (const harness of ['claude-code', 'codex', 'gemini-cli', 'qwen-code', 'opencode', 'pi'])
      expect(longSessions, harness).toContain(`${harness} (fix-stats)`)
    for (const key of longSessions) expect(recorded.get(key)!.length, key).toBeGreaterThanOrEqual(10)
  })

  it("answers the harnesses' probes: Claude Code's HEAD /api/hello, Codex's WebSocket prewarm", async () => {
    const session = await stack.createSession({ task_id: 'replay-probes' })
    expect((await fetch(`${stack.edge.url}/api/hello`, { method: 'HEAD' })).status).toBe(200)
    // Codex (built-in OpenAI provider) tries `GET /v1/responses` as a WebSocket first; 426 sends it to HTTP
    // POST at once (a 404 costs it five reconnects). Node's fetch cannot send `Upgrade`, so plain GET here.
    const prewarm = await fetch(`${stack.edge.url}/v1/responses`, {
      headers: { authorization: `Bearer ${session.token}`, 'openai-beta': 'responses_websockets=2026-02-06' },
    })
    expect(prewarm.status).toBe(426)
    expect(((await prewarm.json()) as { error: { message: string } }).error.message).toMatch(/WebSocket/)
  })

  for (const [variant, fixtures] of recorded) {
    it(`${variant}: ${fixtures.length} recorded call(s) accepted and captured exactly`, async () => {
      const session = await stack.createSession({ task_id: `replay-${variant.replace(/[^A-Za-z0-9-]+/g, '-')}` })
      for (const fixture of fixtures) {
        const headers = Object.fromEntries(
          Object.entries(fixture.headers).map(([name, value]) => [name, value.replaceAll('<SESSION_TOKEN>', session.token)]),
        )
        const response = await fetch(`${stack.edge.url}${fixture.path.replaceAll('<SESSION_TOKEN>', session.token)}`, {
          method: 'POST',
          headers: { ...headers, 'content-type': 'application/json' },
          body: JSON.stringify(fixture.body),
        })
        const text = await response.text()
        expect(response.status, `${fixture.file}: ${text.slice(0, 500)}`).toBeGreaterThanOrEqual(200)
        expect(response.status, `${fixture.file}: ${text.slice(0, 500)}`).toBeLessThan(300)
        expect(STREAM_ERROR.test(text), `${fixture.file}: error frame in ${text.slice(0, 500)}`).toBe(false)
      }
      const records = await stack.completions(session.session_id)
      expect(records.map((record) => [record.api, record.status, record.trainable])).toEqual(
        fixtures.map((fixture) => [fixture.api, 'ok', true]),
      )
      for (const [index, record] of records.entries()) {
        const fixture = fixtures[index]!
        expect(record.original_request, fixture.file).toEqual(fixture.body)
        const { messages, tools, chat_template_kwargs } = record.request as {
          messages: unknown[]
          tools?: unknown[]
          chat_template_kwargs?: Record<string, unknown>
        }
        const expected = await engineTokenize(stack.engine.url, messages, tools, chat_template_kwargs ? { chat_template_kwargs } : {})
        expect(record.prompt_token_ids.length, fixture.file).toBe(expected.length)
        expect(record.prompt_token_ids, fixture.file).toEqual(expected)
        expect(record.response_token_ids.length, fixture.file).toBeGreaterThan(0)
      }
    })
  }
})
