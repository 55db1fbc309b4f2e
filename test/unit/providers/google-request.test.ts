/**
 * @module
 * Gemini → chat mapping on recorded harness requests, the mapping rules one by one, schema
 * lower-casing and thought signatures.
 */
import { describe, expect, it } from 'vitest'
import { decodeThoughtSignature, encodeThoughtSignature } from '../../../src/normalize/providers/google/google-ids.ts'
import { toJsonSchema } from '../../../src/normalize/providers/google/google-json-schema.ts'
import { google } from '../../../src/normalize/providers/google/index.ts'
import { mapGoogleFinishReason } from '../../../src/normalize/providers/google/map-google-finish-reason.ts'
import { SYNTHETIC_COMPLETIONS } from '../contract/completions.ts'
import { codes, fixture, parseFixture } from './fixtures.ts'

const GENERATE = new URL('http://edge.test/v1beta/models/gemini-2.5-flash:generateContent')
const parse = (body: Record<string, unknown>) => google.parseRequest(body, GENERATE)

describe('Gemini CLI requests', () => {
  it('maps the router call: model from the URL, JSON schema lower-cased, thinking on', () => {
    const parsed = parseFixture(google, 'google', 'google-gemini-cli-router')
    expect(parsed.modelRequested).toBe('gemini-3.5-flash-lite')
    expect(parsed.stream).toBe(false)
    expect(parsed.request).toMatchObject({
      temperature: 1,
      top_p: 0.95,
      top_k: 64,
      chat_template_kwargs: { enable_thinking: true },
      response_format: {
        type: 'json_schema',
        json_schema: {
          name: 'response',
          schema: {
            type: 'object',
            properties: {
              complexity_reasoning: { type: 'string', description: 'Brief explanation' },
              complexity_score: { type: 'integer', minimum: 1, maximum: 100 },
            },
          },
        },
      },
    })
    expect(parsed.request.messages.map((message) => message.role)).toEqual(['system', 'user', 'user'])
  })

  it('streams main turns, keeps turn 1 a prefix of turn 2 and recovers reasoning from the call signature', () => {
    const turn1 = parseFixture(google, 'google', 'google-gemini-cli-turn1')
    const turn2 = parseFixture(google, 'google', 'google-gemini-cli-turn2')
    expect(turn1.stream).toBe(true)
    expect(turn1.responseOptions).toEqual({ includeThoughts: true })
    expect(turn2.request.messages.slice(0, turn1.request.messages.length)).toEqual(turn1.request.messages)
    const id = 'call_cmpl_9a8b7c6d5e4f30211203f4e5_0'
    expect(turn2.request.messages.slice(turn1.request.messages.length)).toEqual([
      {
        role: 'assistant',
        content: null,
        reasoning_content: 'I will write the file with write_file.',
        tool_calls: [
          { id, type: 'function', function: { name: 'write_file', arguments: '{"file_path":"/work/hello.txt","content":"hi"}' } },
        ],
      },
      { role: 'tool', tool_call_id: id, content: '{"output":"Successfully created and wrote to new file: /work/hello.txt."}' },
    ])
    const names = (turn1.request.tools as { function: { name: string } }[]).map((tool) => tool.function.name)
    expect(names).toEqual(['list_directory', 'write_file', 'run_shell_command', 'google_web_search'])
  })

  it('treats skip_thought_signature_validator as no reasoning', () => {
    const parsed = parseFixture(google, 'google', 'google-gemini-cli-skip-signature')
    const assistant = parsed.request.messages.find((message) => message.role === 'assistant')
    expect(assistant?.reasoning_content).toBeUndefined()
    expect((assistant?.tool_calls as { id: string }[] | undefined)?.[0]?.id).toBe('write_file_1777700000000_0')
  })
})

describe('other harnesses', () => {
  it('gives id-less parallel calls to one function distinct ids and pairs responses in order', () => {
    const parsed = parseFixture(google, 'google', 'google-pi-parallel')
    const [, , assistant, first, second] = parsed.request.messages
    expect(assistant).toMatchObject({ role: 'assistant', content: 'Checking both.' })
    expect((assistant?.tool_calls as { id: string }[] | undefined)?.map((call) => call.id)).toEqual(['call_1_1', 'call_1_2'])
    expect(first).toEqual({ role: 'tool', tool_call_id: 'call_1_1', content: '{"output":"3 a.txt"}' })
    expect(second).toEqual({ role: 'tool', tool_call_id: 'call_1_2', content: '{"error":"wc: b.txt: No such file"}' })
    expect(parsed.request.max_tokens).toBe(16384)
    expect(codes(parsed)).toEqual(['tool_stripped'])
  })

  it('gives id-less calls of a turn our signature names self-describing ids (the turn stays identifiable)', () => {
    const signature = encodeThoughtSignature('cmpl_abc', 'Look first.')
    const body = {
      contents: [
        { role: 'user', parts: [{ text: 'Fix it.' }] },
        {
          role: 'model',
          parts: [
            { text: 'Listing.\n' },
            { functionCall: { name: 'bash', args: { command: 'ls' } }, thoughtSignature: signature },
            { functionCall: { name: 'bash', args: { command: 'pwd' } } },
          ],
        },
        {
          role: 'user',
          parts: [
            { functionResponse: { name: 'bash', response: { output: 'a' } } },
            { functionResponse: { name: 'bash', response: { output: 'b' } } },
          ],
        },
      ],
    }
    const parsed = google.parseRequest(body, new URL('https://edge.test/v1beta/models/m:generateContent'))
    const [, assistant, first, second] = parsed.request.messages
    expect((assistant!.tool_calls as { id: string }[]).map((call) => call.id)).toEqual(['call_cmpl_abc_0', 'call_cmpl_abc_1'])
    expect(assistant?.reasoning_content).toBe('Look first.')
    expect(first).toMatchObject({ role: 'tool', tool_call_id: 'call_cmpl_abc_0' })
    expect(second).toMatchObject({ role: 'tool', tool_call_id: 'call_cmpl_abc_1' })
  })

  it("lower-cases qwen-code's OpenAPI parameters, maps nullable, ANY with one name, stop sequences", () => {
    const parsed = parseFixture(google, 'google', 'google-qwen-code')
    const tool = (parsed.request.tools as { function: { parameters: unknown } }[])[0]
    expect(tool?.function.parameters).toEqual({
      type: 'object',
      properties: { absolute_path: { type: ['string', 'null'] }, limit: { type: 'integer' } },
      required: ['absolute_path'],
    })
    expect(parsed.request.tool_choice).toEqual({ type: 'function', function: { name: 'read_file' } })
    expect(parsed.request.stop).toEqual(['</done>'])
  })

  it('maps both countTokens shapes to /tokenize bodies', () => {
    const simple = fixture('google', 'google-count-tokens')
    expect(google.countTokens?.parseRequest(simple.body, simple.url)).toEqual({
      model: 'gemini-2.5-flash',
      messages: [{ role: 'user', content: 'How many tokens is this?' }],
      add_generation_prompt: true,
    })
    const full = fixture('google', 'google-count-tokens-full')
    const tokenize = google.countTokens?.parseRequest(full.body, full.url)
    expect(tokenize?.messages.map((message) => message.role)).toEqual(['system', 'user'])
    expect(tokenize?.tools).toHaveLength(4)
    expect(google.countTokens?.buildResponse(9)).toEqual({ totalTokens: 9 })
  })
})

describe('mapping rules', () => {
  it('accepts snake_case field names', () => {
    const parsed = parse({
      system_instruction: { parts: [{ text: 'sys' }] },
      contents: [
        { role: 'user', parts: [{ text: 'hi' }, { inline_data: { mime_type: 'image/png', data: 'AAAA' } }] },
        { role: 'model', parts: [{ function_call: { name: 'f', args: { a: 1 } } }] },
        { role: 'user', parts: [{ function_response: { name: 'f', response: { ok: true } } }] },
      ],
      tools: [{ function_declarations: [{ name: 'f', parameters: { type: 'OBJECT' } }] }],
      generation_config: { max_output_tokens: 10, thinking_config: { thinking_budget: 0 } },
    })
    expect(parsed.request.messages).toEqual([
      { role: 'system', content: 'sys' },
      {
        role: 'user',
        content: [
          { type: 'text', text: 'hi' },
          { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } },
        ],
      },
      {
        role: 'assistant',
        content: null,
        tool_calls: [{ id: 'call_1_0', type: 'function', function: { name: 'f', arguments: '{"a":1}' } }],
      },
      { role: 'tool', tool_call_id: 'call_1_0', content: '{"ok":true}' },
    ])
    expect(parsed.request).toMatchObject({ max_tokens: 10, chat_template_kwargs: { enable_thinking: false } })
  })

  it('maps tool config modes', () => {
    const tools = [{ functionDeclarations: [{ name: 'a' }, { name: 'b' }] }]
    const mode = (functionCallingConfig: Record<string, unknown>) =>
      parse({ contents: [{ role: 'user', parts: [{ text: 'x' }] }], tools, toolConfig: { functionCallingConfig } }).request.tool_choice
    expect(mode({ mode: 'NONE' })).toBe('none')
    expect(mode({ mode: 'AUTO' })).toBe('auto')
    expect(mode({ mode: 'ANY' })).toBe('required')
    expect(mode({ mode: 'ANY', allowedFunctionNames: ['b'] })).toEqual({ type: 'function', function: { name: 'b' } })
    expect(mode({ mode: 'VALIDATED' })).toBe('auto')
    expect(mode({})).toBeUndefined()
    expect(() => mode({ mode: 'ANY', allowedFunctionNames: ['zzz'] })).toThrow(/allowedFunctionNames/)
  })

  it('lower-cases only schema types, never property names or enum values', () => {
    expect(
      toJsonSchema({
        type: 'OBJECT',
        properties: { type: { type: 'STRING', enum: ['UPPER', 'lower'] }, list: { type: 'ARRAY', items: { type: 'NUMBER' } } },
        anyOf: [{ type: 'NULL' }],
      }),
    ).toEqual({
      type: 'object',
      properties: { type: { type: 'string', enum: ['UPPER', 'lower'] }, list: { type: 'array', items: { type: 'number' } } },
      anyOf: [{ type: 'null' }],
    })
  })

  it('round-trips thought signatures as base64 and rejects others', () => {
    const signature = encodeThoughtSignature('cmpl_1', 'line\nline 😀')
    expect(signature).toMatch(/^[A-Za-z0-9+/]+=*$/)
    expect(decodeThoughtSignature(signature)).toEqual({ completionId: 'cmpl_1', reasoning: 'line\nline 😀' })
    expect(decodeThoughtSignature('skip_thought_signature_validator')).toBeNull()
    expect(decodeThoughtSignature(Buffer.from('real google bytes').toString('base64'))).toBeNull()
  })

  it('maps finish reasons', () => {
    expect(mapGoogleFinishReason(SYNTHETIC_COMPLETIONS.parallel_tools!)).toBe('STOP')
    expect(mapGoogleFinishReason(SYNTHETIC_COMPLETIONS.length!)).toBe('MAX_TOKENS')
    expect(mapGoogleFinishReason(SYNTHETIC_COMPLETIONS.stop_sequence!)).toBe('STOP')
  })
})
