/**
 * @module
 * The shared adapter contract (style-guide habit 2): one suite run against every adapter in the
 * registry. It checks, per adapter: path detection; every recorded request fixture parses into a
 * sensible chat request; every synthetic completion builds a JSON answer and a stream that re-parse
 * to the same frames byte for byte, decode to the same summary, and carry the sampled text, reasoning
 * and tool arguments byte for byte; the answer replayed as history parses back to the same assistant
 * turn (ids, reasoning, arguments); errors keep their status in the API's own shape; bad input is a
 * `RequestValidationError`.
 */
import { readFileSync, readdirSync, existsSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { type ProviderAdapter, type ResponseContext, RequestValidationError } from '../../../src/normalize/adapter.ts'
import { detectAdapter } from '../../../src/normalize/registry.ts'
import type { ChatMessage, Completion, NormalizedError } from '../../../src/normalize/types.ts'
import { type ProviderCodec, type WireSummary, normalizeArguments } from './codecs.ts'
import { SYNTHETIC_COMPLETIONS } from './completions.ts'
import { encodeSseFrames, parseSseFrames } from './sse-frames.ts'

export interface RequestFixture {
  name: string
  path: string
  headers: Record<string, string>
  body: Record<string, unknown>
}

export interface AdapterFixtures {
  requests: RequestFixture[]
  codec: ProviderCodec
}

const ORIGIN = 'http://edge.test'
const COMPLETION_ID = 'cmpl_0123456789abcdef01234567'

/** `src/normalize/providers/<id>/__fixtures__/*.request.json`: `{path, headers, body}` as harnesses send them. */
export function loadRequestFixtures(adapterId: string): RequestFixture[] {
  const dir = join(import.meta.dirname, '../../../src/normalize/providers', adapterId, '__fixtures__')
  if (!existsSync(dir)) return []
  return readdirSync(dir)
    .filter((file) => file.endsWith('.request.json'))
    .sort()
    .map((file) => {
      const fixture = JSON.parse(readFileSync(join(dir, file), 'utf8')) as Omit<RequestFixture, 'name'>
      return { name: file, path: fixture.path, headers: fixture.headers ?? {}, body: fixture.body }
    })
}

function context(responseOptions?: Record<string, unknown>, completionId = COMPLETION_ID): ResponseContext {
  return { modelRequested: 'client-model', completionId, streamUsage: true, created: 1_760_000_000, responseOptions }
}

const CONTEXT_VARIANTS: Record<string, Record<string, unknown> | undefined> = {
  'no response options': undefined,
  'custom tools, thoughts shown': { customTools: ['apply_patch'], includeThoughts: true },
  'thoughts hidden': { customTools: [], includeThoughts: false },
}

function expectJsonValue(value: unknown) {
  expect(JSON.parse(JSON.stringify(value))).toEqual(value)
}

/** What every engine-bound chat request must look like, whatever API it came from. */
export function expectSensibleChat(
  messages: ChatMessage[],
  tools: unknown[] | undefined,
  toolChoice: unknown,
  options: { jsonArguments: boolean } = { jsonArguments: true },
) {
  expect(messages.length).toBeGreaterThan(0)
  const toolNames = new Set<string>()
  for (const tool of (tools ?? []) as { type: string; function: { name: string; parameters?: Record<string, unknown> } }[]) {
    expect(tool.type).toBe('function')
    expect(tool.function.name).toMatch(/\S/)
    expect(toolNames.has(tool.function.name)).toBe(false)
    toolNames.add(tool.function.name)
    if (tool.function.parameters?.type !== undefined) expect(tool.function.parameters.type).toBe('object')
  }
  if (!tools?.length) expect(toolChoice).toBeUndefined()
  let openCalls = new Set<string>()
  messages.forEach((message, index) => {
    expect(['system', 'user', 'assistant', 'tool']).toContain(message.role)
    // A later system message is a mid-conversation system turn (Claude Code's notes): text, never between a
    // tool call and its results (the tool-message check below), and not a user query to the template.
    if (message.role === 'system' && index > 0) expect(typeof message.content).toBe('string')
    if (message.role !== 'assistant') expect(message.reasoning_content).toBeUndefined()
    const content = message.content
    if (Array.isArray(content)) {
      for (const part of content as { type: string }[]) expect(['text', 'image_url']).toContain(part.type)
    } else expect(content === null || typeof content === 'string').toBe(true)
    if (message.role === 'assistant') {
      openCalls = new Set()
      for (const call of (message.tool_calls ?? []) as { id: string; type: string; function: { name: string; arguments: string } }[]) {
        expect(call.type).toBe('function')
        expect(call.id).toMatch(/\S/)
        expect(openCalls.has(call.id)).toBe(false)
        openCalls.add(call.id)
        expect(call.function.name).toMatch(/\S/)
        // vLLM json.loads() history arguments before templating: invalid JSON there is a 400.
        if (options.jsonArguments) expect(() => JSON.parse(call.function.arguments)).not.toThrow()
      }
    }
    if (message.role === 'tool') {
      const previous = messages[index - 1]
      expect(previous?.role === 'tool' || (previous?.role === 'assistant' && previous.tool_calls !== undefined)).toBe(true)
      expect(openCalls.has(message.tool_call_id as string)).toBe(true)
      expect(typeof content).toBe('string')
    }
  })
  expectJsonValue(messages)
}

/** Argument text exists only where the wire streams text; compare the rest. */
function withoutStreamText(summary: WireSummary) {
  return { ...summary, toolCalls: summary.toolCalls.map(({ argumentsText: _text, ...call }) => call) }
}

function expectMatchesCompletion(summary: WireSummary, completion: Completion) {
  const { message } = completion
  expect(summary.text).toBe(message.content ?? '')
  expect(summary.reasoning).toBe(message.reasoning_content ?? '')
  const calls = message.tool_calls ?? []
  expect(summary.toolCalls.map((call) => call.name)).toEqual(calls.map((call) => call.function.name))
  summary.toolCalls.forEach((call, index) => {
    const sampled = calls[index]?.function.arguments ?? ''
    expect(call.arguments).toEqual(normalizeArguments(sampled))
    let sampledIsObject = false
    try {
      const parsed: unknown = JSON.parse(sampled)
      sampledIsObject = parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed)
    } catch {}
    if (call.argumentsText !== null && sampledIsObject) expect(call.argumentsText).toBe(sampled)
  })
  expect(new Set(summary.toolCalls.map((call) => call.id)).size).toBe(calls.length)
}

export function runAdapterContract(adapter: ProviderAdapter, fixtures: AdapterFixtures) {
  const { codec } = fixtures
  const minimal: RequestFixture = { name: 'minimal request', path: codec.minimalRequest.path, headers: {}, body: codec.minimalRequest.body }
  const requests = fixtures.requests.length > 0 ? fixtures.requests : [minimal]
  const generation = requests.filter((fixture) => !adapter.countTokens?.matches(new URL(fixture.path, ORIGIN)))
  const base = generation[0] ?? minimal
  const baseUrl = new URL(base.path, ORIGIN)

  describe(`${adapter.id} adapter contract`, () => {
    describe('request fixtures', () => {
      for (const fixture of requests) {
        const url = new URL(fixture.path, ORIGIN)
        it(`detects and parses ${fixture.name}`, () => {
          expect(detectAdapter(url, new Headers(fixture.headers))?.id).toBe(adapter.id)
          const before = structuredClone(fixture.body)
          if (adapter.countTokens?.matches(url)) {
            const tokenize = adapter.countTokens.parseRequest(fixture.body, url)
            expect(tokenize.add_generation_prompt).toBe(true)
            expectSensibleChat(tokenize.messages, tokenize.tools, undefined)
          } else {
            const parsed = adapter.parseRequest(fixture.body, url)
            expect(parsed.modelRequested).toMatch(/\S/)
            expect(parsed.request.model).toBe(parsed.modelRequested)
            expectSensibleChat(parsed.request.messages, parsed.request.tools, parsed.request.tool_choice)
            expectJsonValue(parsed.request)
            for (const warning of parsed.warnings) {
              expect(warning.code).toMatch(/^[a-z_]+$/)
              expect(warning.message).toMatch(/\S/)
            }
            expect(adapter.parseRequest(fixture.body, url)).toEqual(parsed)
          }
          expect(fixture.body).toEqual(before)
        })
      }
    })

    for (const [variant, responseOptions] of Object.entries(CONTEXT_VARIANTS)) {
      describe(`answers (${variant})`, () => {
        for (const [name, completion] of Object.entries(SYNTHETIC_COMPLETIONS)) {
          it(`${name}: JSON and stream agree with each other and with the sampled completion`, () => {
            const ctx = context(responseOptions)
            const body = adapter.buildResponse(completion, ctx)
            expectJsonValue(body)
            expect(adapter.buildResponse(completion, ctx)).toEqual(body)

            const encoder = adapter.createStreamEncoder(ctx)
            const raw = encoder.start() + encoder.heartbeat() + encoder.heartbeat() + encoder.completion(completion)
            const text = withoutBlankKeepAlives(raw)
            const frames = parseSseFrames(text)
            expect(encodeSseFrames(frames)).toBe(text)
            for (const frame of frames) {
              if (frame.data === null || frame.data === '[DONE]') continue
              const data = JSON.parse(frame.data) as { type?: string }
              if (codec.namedEvents) expect(frame.event).toBe(data.type)
              else expect(frame.event).toBeNull()
            }
            const again = adapter.createStreamEncoder(ctx)
            expect(again.start() + again.heartbeat() + again.heartbeat() + again.completion(completion)).toBe(raw)

            const fromJson = codec.decodeResponse(body)
            const fromStream = codec.decodeStream(frames)
            expect(withoutStreamText(fromStream)).toEqual(withoutStreamText(fromJson))
            expectMatchesCompletion(fromJson, completion)
            expectMatchesCompletion(fromStream, completion)
            expect(fromJson.id).toContain(COMPLETION_ID)
            if (!codec.passesHistoryThrough) {
              for (const call of fromJson.toolCalls) expect(call.id).toContain(COMPLETION_ID.slice(5))
            }

            const other = codec.decodeResponse(adapter.buildResponse(completion, context(responseOptions, 'cmpl_other')))
            expect(other.id).not.toBe(fromJson.id)
          })

          it(`${name}: the answer replayed as history parses back to the same assistant turn`, () => {
            const ctx = context(responseOptions)
            const body = adapter.buildResponse(completion, ctx)
            const shown = codec.decodeResponse(body)
            const next = codec.replay(structuredClone(base.body), body)
            const parsed = adapter.parseRequest(next, baseUrl)
            expectSensibleChat(parsed.request.messages, parsed.request.tools, parsed.request.tool_choice, {
              jsonArguments: !codec.passesHistoryThrough,
            })
            const messages = parsed.request.messages
            const index = messages.findLastIndex((message) => message.role === 'assistant')
            const assistant = messages[index] as ChatMessage
            expect((assistant.content as string | null) ?? '').toBe(shown.text)
            expect(assistant.reasoning_content ?? '').toBe(completion.message.reasoning_content ?? '')
            const calls = (assistant.tool_calls ?? []) as { id: string; function: { name: string; arguments: string } }[]
            expect(calls.map((call) => call.id)).toEqual(shown.toolCalls.map((call) => call.id))
            expect(calls.map((call) => call.function.name)).toEqual(shown.toolCalls.map((call) => call.name))
            expect(calls.map((call) => normalizeArguments(call.function.arguments))).toEqual(shown.toolCalls.map((call) => call.arguments))
            const results = messages.slice(index + 1).filter((message) => message.role === 'tool')
            expect(results.map((message) => message.tool_call_id)).toEqual(shown.toolCalls.map((call) => call.id))
            for (const result of results) expect(result.content).toContain(`result ${result.tool_call_id as string}`)
          })
        }
      })
    }

    describe('errors', () => {
      const cases: NormalizedError[] = [
        { status: 400, kind: 'invalid_request', message: 'messages[0].role: bad role', param: 'messages[0].role' },
        { status: 401, kind: 'authentication', message: 'invalid session token' },
        { status: 404, kind: 'not_found', message: 'no such thing' },
        { status: 408, kind: 'timeout', message: 'upstream timed out' },
        { status: 409, kind: 'invalid_request', message: 'conflict' },
        { status: 429, kind: 'rate_limit', message: 'slow down' },
        { status: 500, kind: 'internal', message: 'internal gateway error' },
        { status: 502, kind: 'upstream', message: 'upstream unreachable' },
        { status: 503, kind: 'overloaded', message: 'engine overloaded' },
        { status: 504, kind: 'timeout', message: 'upstream did not answer' },
      ]
      for (const error of cases) {
        it(`renders ${error.status} ${error.kind} in the API's shape, status kept`, () => {
          const built = adapter.buildError(error)
          expect(built.status).toBe(error.status)
          expectJsonValue(built.body)
          expect(codec.errorMessage(built.body)).toBe(error.message)
        })
      }

      it('ends a failed stream with the protocol error event', () => {
        const encoder = adapter.createStreamEncoder(context())
        const text = withoutBlankKeepAlives(encoder.start() + encoder.heartbeat() + encoder.error(cases[8] as NormalizedError))
        const frames = parseSseFrames(text)
        expect(encodeSseFrames(frames)).toBe(text)
        expect(codec.streamErrorMessage(frames)).toBe('engine overloaded')
      })

      for (const bad of codec.badRequests) {
        it(`rejects ${bad.name} with a RequestValidationError naming ${bad.param}, rendered as a 4xx`, () => {
          let thrown: unknown
          try {
            adapter.parseRequest(bad.body, new URL(bad.path ?? codec.minimalRequest.path, ORIGIN))
          } catch (error) {
            thrown = error
          }
          expect(thrown).toBeInstanceOf(RequestValidationError)
          const error = thrown as RequestValidationError
          expect(error.param).toBe(bad.param)
          expect(error.message).toContain(bad.param)
          const built = adapter.buildError({ status: error.status, kind: 'invalid_request', message: error.message, param: error.param })
          expect(built.status).toBeGreaterThanOrEqual(400)
          expect(built.status).toBeLessThan(500)
          expect(codec.errorMessage(built.body)).toBe(error.message)
        })
      }
    })
  })
}

/**
 * Gemini's keep-alive is a bare empty line before any frame (`google-stream.ts`: an SSE comment breaks Gemini
 * CLI's bundled SDK); the strict frame parser reads frames, so such leading newlines are removed first.
 */
function withoutBlankKeepAlives(text: string): string {
  return text.replace(/^\n+/, '')
}
