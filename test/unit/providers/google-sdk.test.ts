/**
 * @module
 * `@google/genai` 3.1.0 as the client of the Gemini adapter over real HTTP: Gemini CLI's JSON router
 * call (upper-case schema types), a streamed two-turn task with parallel calls to one function and
 * thought signatures replayed the way Gemini CLI does (thought parts dropped), countTokens, HTTP and
 * mid-stream errors — with no warnings.
 */
import { ApiError, type Content, GoogleGenAI, type Part } from '@google/genai'
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import type { ParsedRequest } from '../../../src/normalize/types.ts'
import { type AdapterServer, type Outcome, captureWarnings, engineCompletion, startAdapterServer } from './adapter-server.ts'

const REASONING = 'Two files to count; call run_shell_command twice in parallel. 😀'
const DECLARATIONS = [
  {
    name: 'run_shell_command',
    description: 'Runs a shell command',
    parametersJsonSchema: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] },
  },
]

function lastUserText(parsed: ParsedRequest): string {
  const user = parsed.request.messages.findLast((message) => message.role === 'user')
  return typeof user?.content === 'string' ? user.content : ''
}

function policy(parsed: ParsedRequest): Outcome {
  const text = lastUserText(parsed)
  if (text.includes('please fail')) return { error: { status: 503, kind: 'overloaded', message: 'engine overloaded' } }
  if (text.includes('fail midway')) return { streamError: { status: 500, kind: 'upstream', message: 'engine went away' } }
  if (parsed.request.response_format) {
    return { completion: engineCompletion({ role: 'assistant', content: '{"complexity_reasoning": "simple", "complexity_score": 12}' }) }
  }
  if (parsed.request.messages.some((message) => message.role === 'tool')) {
    return { completion: engineCompletion({ role: 'assistant', content: 'a.txt has 3 lines; b.txt has 5.' }) }
  }
  return {
    completion: engineCompletion({
      role: 'assistant',
      content: 'Counting both.',
      reasoning_content: REASONING,
      tool_calls: [
        { id: 'chatcmpl-tool-1', type: 'function', function: { name: 'run_shell_command', arguments: '{"command": "wc -l a.txt"}' } },
        { id: 'chatcmpl-tool-2', type: 'function', function: { name: 'run_shell_command', arguments: '{"command": "wc -l b.txt"}' } },
      ],
    }),
  }
}

describe('@google/genai against the Gemini adapter', () => {
  let server: AdapterServer
  let ai: GoogleGenAI
  let warnings: ReturnType<typeof captureWarnings>

  beforeAll(async () => {
    server = await startAdapterServer(policy)
    // Gemini CLI's SDK speaks v1beta; 3.x defaults to v1 (used by the countTokens test below).
    ai = new GoogleGenAI({ apiKey: 'rg_test', httpOptions: { baseUrl: server.url, apiVersion: 'v1beta' } })
  })
  afterAll(() => server.close())
  beforeEach(() => {
    warnings = captureWarnings()
  })
  afterEach(() => {
    warnings.restore()
    expect(warnings.seen).toEqual([])
  })

  it("answers Gemini CLI's router call with JSON that its upper-case schema accepts", async () => {
    const response = await ai.models.generateContent({
      model: 'gemini-3.5-flash-lite',
      contents: [{ role: 'user', parts: [{ text: 'create hello.txt' }] }],
      config: {
        systemInstruction: 'You are a specialized Task Routing AI.',
        responseMimeType: 'application/json',
        responseJsonSchema: {
          type: 'OBJECT',
          properties: { complexity_reasoning: { type: 'STRING' }, complexity_score: { type: 'INTEGER' } },
          required: ['complexity_reasoning', 'complexity_score'],
        },
        thinkingConfig: { includeThoughts: true },
      },
    })
    expect(JSON.parse(response.candidates?.[0]?.content?.parts?.[0]?.text ?? '')).toEqual({
      complexity_reasoning: 'simple',
      complexity_score: 12,
    })
    expect(response.candidates?.[0]?.finishReason).toBe('STOP')
    expect(response.modelVersion).toBe('gemini-3.5-flash-lite')
    const call = server.calls.at(-1)
    expect(call?.path).toBe('/v1beta/models/gemini-3.5-flash-lite:generateContent')
    expect(call?.parsed?.request.response_format).toEqual({
      type: 'json_schema',
      json_schema: {
        name: 'response',
        schema: {
          type: 'object',
          properties: { complexity_reasoning: { type: 'string' }, complexity_score: { type: 'integer' } },
          required: ['complexity_reasoning', 'complexity_score'],
        },
      },
    })
  })

  it('streams parallel calls to one function with distinct ids, and replays them like Gemini CLI', async () => {
    const contents: Content[] = [{ role: 'user', parts: [{ text: 'count lines in a.txt and b.txt' }] }]
    const config = { tools: [{ functionDeclarations: DECLARATIONS }], thinkingConfig: { includeThoughts: true } }
    const parts: Part[] = []
    let finishReason: string | undefined
    for await (const chunk of await ai.models.generateContentStream({ model: 'gemini-3.8-flash', contents, config })) {
      parts.push(...(chunk.candidates?.[0]?.content?.parts ?? []))
      finishReason = chunk.candidates?.[0]?.finishReason ?? finishReason
      if (chunk.usageMetadata)
        expect(chunk.usageMetadata).toMatchObject({ promptTokenCount: 900, totalTokenCount: 942, cachedContentTokenCount: 300 })
    }
    expect(server.calls.at(-1)?.path).toBe('/v1beta/models/gemini-3.8-flash:streamGenerateContent?alt=sse')
    expect(finishReason).toBe('STOP')
    expect(parts[0]).toEqual({ text: REASONING, thought: true })
    expect(parts[1]).toEqual({ text: 'Counting both.' })
    const calls = parts.flatMap((part) => (part.functionCall ? [part.functionCall] : []))
    expect(calls.map((call) => call.args)).toEqual([{ command: 'wc -l a.txt' }, { command: 'wc -l b.txt' }])
    expect(new Set(calls.map((call) => call.id)).size).toBe(2)
    expect(parts[2]?.thoughtSignature).toBeTruthy()

    // Gemini CLI keeps the model turn without thought parts, signature on the first functionCall.
    const modelTurn: Content = { role: 'model', parts: parts.filter((part) => !part.thought) }
    const responses: Part[] = [...calls].reverse().map((call) => ({
      functionResponse: { id: call.id, name: call.name, response: { output: `${call.args?.command} → ok` } },
    }))
    const second = await ai.models.generateContent({
      model: 'gemini-3.8-flash',
      contents: [...contents, modelTurn, { role: 'user', parts: responses }],
      config,
    })
    expect(second.candidates?.[0]?.content?.parts?.[0]?.text).toBe('a.txt has 3 lines; b.txt has 5.')
    const history = server.calls.at(-1)?.parsed?.request.messages ?? []
    const assistant = history.find((message) => message.role === 'assistant')
    expect(assistant?.reasoning_content).toBe(REASONING)
    expect(assistant?.content).toBe('Counting both.')
    const ids = calls.map((call) => call.id)
    expect((assistant?.tool_calls as { id: string }[] | undefined)?.map((call) => call.id)).toEqual(ids)
    expect(history.filter((message) => message.role === 'tool').map((message) => message.tool_call_id)).toEqual([...ids].reverse())
  })

  it('counts tokens', async () => {
    const v1 = new GoogleGenAI({ apiKey: 'rg_test', httpOptions: { baseUrl: server.url } })
    const result = await v1.models.countTokens({ model: 'gemini-2.5-flash', contents: 'How many tokens is this?' })
    expect(result.totalTokens).toBeGreaterThan(0)
    expect(server.calls.at(-1)?.path).toBe('/v1/models/gemini-2.5-flash:countTokens')
  })

  it('raises ApiError with the status kept', async () => {
    const error = await ai.models.generateContent({ model: 'm', contents: 'please fail' }).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(ApiError)
    expect((error as ApiError).status).toBe(503)
    expect((error as ApiError).message).toContain('UNAVAILABLE')
  })

  it('raises a mid-stream error frame', async () => {
    const run = async () => {
      for await (const _chunk of await ai.models.generateContentStream({ model: 'm', contents: 'fail midway' })) {
        // drain
      }
    }
    const error = await run().catch((e: unknown) => e)
    expect(error).toBeInstanceOf(ApiError)
    expect((error as ApiError).message).toContain('engine went away')
  })

  it('rejects bad input with a 400 INVALID_ARGUMENT naming the field', async () => {
    const error = await ai.models
      .generateContent({ model: 'm', contents: [{ role: 'robot', parts: [{ text: 'hi' }] }] })
      .catch((e: unknown) => e)
    expect(error).toBeInstanceOf(ApiError)
    expect((error as ApiError).status).toBe(400)
    expect((error as ApiError).message).toContain('INVALID_ARGUMENT')
    expect((error as ApiError).message).toContain('contents[0].role')
  })
})
