/**
 * @module
 * OpenAI Responses → chat mapping on recorded harness requests, the mapping rules one by one, and
 * `previous_response_id` resolution (pure function and the worker's log walk).
 */
import { describe, expect, it } from 'vitest'
import type { CompletionRecord } from '../../../src/contract/completion-record.ts'
import { openaiResponses, resolvePreviousResponse } from '../../../src/normalize/providers/openai-responses/index.ts'
import { decodeReasoningContent, encodeReasoningContent } from '../../../src/normalize/providers/openai-responses/openai-responses-ids.ts'
import { mapResponsesStatus } from '../../../src/normalize/providers/openai-responses/map-openai-responses-stop-reason.ts'
import type { ResponseMessage } from '../../../src/normalize/types.ts'
import { GatewayError } from '../../../src/worker/errors.ts'
import { resolvePreviousResponseBody } from '../../../src/worker/pipeline/resolve-previous-response.ts'
import { SYNTHETIC_COMPLETIONS } from '../contract/completions.ts'
import { codes, parseFixture } from './fixtures.ts'

const URL_RESPONSES = new URL('http://edge.test/v1/responses')
const parse = (body: Record<string, unknown>) => openaiResponses.parseRequest({ model: 'm', ...body }, URL_RESPONSES)

describe('Codex requests', () => {
  const turn1 = parseFixture(openaiResponses, 'openai-responses', 'openai-responses-codex-turn1')
  const turn2 = parseFixture(openaiResponses, 'openai-responses', 'openai-responses-codex-turn2')

  it('merges the leading developer messages into one system message', () => {
    expect(turn1.request.messages.map((message) => message.role)).toEqual(['system', 'user', 'user'])
    expect(turn1.request.messages[0]?.content).toBe(
      'You are a coding agent running in the Codex CLI, a terminal-based coding assistant.\n\n<permissions instructions>\nFilesystem sandboxing: danger-full-access.\n</permissions instructions>',
    )
  })

  it('maps apply_patch to a one-string function, strips hosted tools with a warning, and remembers custom tools', () => {
    const tools = turn1.request.tools as { function: { name: string; parameters: Record<string, unknown> } }[]
    expect(tools.map((tool) => tool.function.name)).toEqual(['exec_command', 'write_stdin', 'apply_patch'])
    const patch = tools[2]?.function.parameters as { properties: { input: { type: string; description: string } }; required: string[] }
    expect(patch.required).toEqual(['input'])
    expect(patch.properties.input.type).toBe('string')
    expect(patch.properties.input.description).toContain('start: begin_patch hunk+ end_patch')
    expect(turn1.responseOptions).toMatchObject({ customTools: ['apply_patch'] })
    expect(turn1.warnings).toEqual([{ code: 'tool_stripped', message: 'stripped tools the engine cannot run: tool_search, web_search' }])
    expect(turn1.request).toMatchObject({ tool_choice: 'auto', parallel_tool_calls: true, chat_template_kwargs: { enable_thinking: true } })
    expect(turn1.request).not.toHaveProperty('prompt_cache_key')
    expect(turn1.request).not.toHaveProperty('client_metadata')
  })

  it('keeps turn 1 a strict prefix of turn 2 and replays reasoning, custom and function calls', () => {
    expect(turn2.request.messages.slice(0, 3)).toEqual(turn1.request.messages)
    expect(turn2.request.messages.slice(3)).toEqual([
      {
        role: 'assistant',
        content: null,
        reasoning_content: 'Need to create hello.txt; use apply_patch.',
        tool_calls: [
          {
            id: 'call_cmpl_5f4e3d2c1b0a99887766f0e1_0',
            type: 'function',
            function: {
              name: 'apply_patch',
              arguments: JSON.stringify({ input: '*** Begin Patch\n*** Add File: hello.txt\n+hi\n*** End Patch\n' }),
            },
          },
        ],
      },
      {
        role: 'tool',
        tool_call_id: 'call_cmpl_5f4e3d2c1b0a99887766f0e1_0',
        content: 'Success. Updated the following files:\nA hello.txt\n',
      },
      {
        role: 'assistant',
        content: null,
        tool_calls: [{ id: 'call_cmpl_7_0', type: 'function', function: { name: 'exec_command', arguments: '{"cmd":"cat hello.txt"}' } }],
      },
      {
        role: 'tool',
        tool_call_id: 'call_cmpl_7_0',
        content: 'Chunk ID: 1\nWall time: 0.0 seconds\nProcess exited with code 0\nOutput:\nhi\n',
      },
    ])
  })

  it('strips the namespace tool of the fallback metadata', () => {
    const parsed = parseFixture(openaiResponses, 'openai-responses', 'openai-responses-codex-fallback')
    expect(parsed.warnings).toEqual([
      { code: 'tool_stripped', message: 'stripped tools the engine cannot run: namespace "multi_agent_v1"' },
    ])
    expect((parsed.request.tools as unknown[]).length).toBe(2)
  })
})

describe('other harnesses', () => {
  it('reads opencode items without type, joins parallel calls into one assistant turn, uses summaries of foreign tokens', () => {
    const parsed = parseFixture(openaiResponses, 'openai-responses', 'openai-responses-opencode')
    expect(parsed.request.messages.map((message) => message.role)).toEqual(['system', 'user', 'assistant', 'tool', 'tool'])
    const assistant = parsed.request.messages[2]
    expect(assistant?.reasoning_content).toBe('I should write the file.')
    expect((assistant?.tool_calls as { id: string }[] | undefined)?.map((call) => call.id)).toEqual(['call_abc', 'call_def'])
    expect(parsed.request.max_tokens).toBe(32000)
    expect(codes(parsed)).toEqual(['reasoning_token_foreign'])
  })

  it("reads pi's system item and maps text.format json_schema", () => {
    const parsed = parseFixture(openaiResponses, 'openai-responses', 'openai-responses-pi')
    expect(parsed.request.messages[0]).toEqual({ role: 'system', content: 'You are an expert coding assistant.' })
    expect(parsed.request.response_format).toEqual({
      type: 'json_schema',
      json_schema: {
        name: 'answer',
        schema: { type: 'object', properties: { greeting: { type: 'string' } }, required: ['greeting'] },
        strict: true,
      },
    })
    expect(parsed.request.max_tokens).toBe(16384)
  })
})

describe('mapping rules', () => {
  it('maps instructions, string input, and a later developer message as a system turn in place', () => {
    const parsed = parse({
      instructions: 'Be brief.',
      input: [
        { role: 'developer', content: 'lead' },
        { role: 'user', content: 'hi' },
        { role: 'assistant', content: [{ type: 'output_text', text: 'hello' }] },
        { role: 'developer', content: 'mode changed' },
      ],
    })
    expect(parsed.request.messages).toEqual([
      { role: 'system', content: 'Be brief.\n\nlead' },
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: 'hello' },
      { role: 'system', content: 'mode changed' },
    ])
    expect(codes(parsed)).toEqual([])
    expect(parse({ input: 'plain' }).request.messages).toEqual([{ role: 'user', content: 'plain' }])
  })

  it('places a system item that splits tool calls from their outputs after those outputs', () => {
    const parsed = parse({
      input: [
        { role: 'user', content: 'go' },
        { type: 'function_call', call_id: 'c1', name: 'shell', arguments: '{}' },
        { role: 'developer', content: 'note' },
        { type: 'function_call_output', call_id: 'c1', output: 'r' },
        { role: 'user', content: 'more' },
      ],
    })
    expect(parsed.request.messages.map((message) => [message.role, message.content])).toEqual([
      ['user', 'go'],
      ['assistant', null],
      ['tool', 'r'],
      ['system', 'note'],
      ['user', 'more'],
    ])
    expect(codes(parsed)).toEqual(['system_message_moved'])
  })

  it('moves images out of tool outputs and wraps unparsable replayed arguments', () => {
    const parsed = parse({
      input: [
        { role: 'user', content: 'look' },
        { type: 'function_call', call_id: 'c1', name: 'shot', arguments: '{"x": ' },
        {
          type: 'function_call_output',
          call_id: 'c1',
          output: [
            { type: 'input_text', text: 'took it' },
            { type: 'input_image', image_url: 'data:image/png;base64,AAAA', detail: 'high' },
          ],
        },
      ],
    })
    expect(parsed.request.messages.slice(1)).toEqual([
      {
        role: 'assistant',
        content: null,
        tool_calls: [{ id: 'c1', type: 'function', function: { name: 'shot', arguments: '{"raw_input":"{\\"x\\": "}' } }],
      },
      { role: 'tool', tool_call_id: 'c1', content: 'took it' },
      { role: 'user', content: [{ type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA', detail: 'high' } }] },
    ])
    expect(codes(parsed)).toEqual(['tool_arguments_wrapped', 'tool_result_images_moved'])
  })

  it('maps tool_choice forms, max_output_tokens and reasoning effort none', () => {
    const tools = [{ type: 'function', name: 'f', parameters: { type: 'object', properties: {} } }]
    expect(parse({ input: 'x', tools, tool_choice: { type: 'function', name: 'f' } }).request.tool_choice).toEqual({
      type: 'function',
      function: { name: 'f' },
    })
    expect(parse({ input: 'x', tools, tool_choice: 'required' }).request.tool_choice).toBe('required')
    expect(parse({ input: 'x', tool_choice: 'required' }).request.tool_choice).toBeUndefined()
    const parsed = parse({ input: 'x', max_output_tokens: 99, reasoning: { effort: 'none' } })
    expect(parsed.request).toMatchObject({ max_tokens: 99, chat_template_kwargs: { enable_thinking: false } })
  })

  it('round-trips reasoning through encrypted_content, and reads Polar tokens', () => {
    const token = encodeReasoningContent('cmpl_1', 'r😀\n')
    expect(decodeReasoningContent(token)).toEqual({ completionId: 'cmpl_1', reasoning: 'r😀\n' })
    const polar = `polar:${Buffer.from('from polar').toString('base64url')}==`
    expect(decodeReasoningContent(polar)).toEqual({ completionId: null, reasoning: 'from polar' })
    expect(decodeReasoningContent('gAAAAABxyz')).toBeNull()
  })

  it('maps length to incomplete / max_output_tokens', () => {
    expect(mapResponsesStatus(SYNTHETIC_COMPLETIONS.length!)).toEqual({
      status: 'incomplete',
      incompleteDetails: { reason: 'max_output_tokens' },
    })
    expect(mapResponsesStatus(SYNTHETIC_COMPLETIONS.text!)).toEqual({ status: 'completed', incompleteDetails: null })
  })
})

describe('previous_response_id', () => {
  const turn1Body = {
    model: 'm',
    instructions: 'old rules',
    input: [{ role: 'user', content: 'create a.txt' }],
    tools: [{ type: 'custom', name: 'apply_patch' }],
  }
  const turn1Message: ResponseMessage = {
    role: 'assistant',
    content: null,
    reasoning_content: 'patch it',
    tool_calls: [{ id: 'engine-1', type: 'function', function: { name: 'apply_patch', arguments: '{"input":"*** Begin Patch"}' } }],
  }
  const turn2Body = {
    model: 'm',
    instructions: 'old rules',
    previous_response_id: 'resp_cmpl_1',
    input: [{ type: 'custom_tool_call_output', call_id: 'call_cmpl_1_0', output: 'ok' }],
  }
  const turn2Message: ResponseMessage = { role: 'assistant', content: 'created' }
  const turn3Body = { model: 'm', instructions: 'new rules', previous_response_id: 'resp_cmpl_2', input: 'now b.txt' }

  it('splices earlier inputs and rebuilt outputs so the result parses like a full-history request', () => {
    const resolved = resolvePreviousResponse(turn3Body, {
      completionId: 'cmpl_2',
      originalRequest: turn2Body,
      responseMessage: turn2Message,
      previous: { completionId: 'cmpl_1', originalRequest: turn1Body, responseMessage: turn1Message, previous: null },
    })
    expect(resolved).not.toHaveProperty('previous_response_id')
    expect(resolved.instructions).toBe('new rules')
    const parsed = openaiResponses.parseRequest(resolved, URL_RESPONSES)
    expect(parsed.request.messages).toEqual([
      { role: 'system', content: 'new rules' },
      { role: 'user', content: 'create a.txt' },
      {
        role: 'assistant',
        content: null,
        reasoning_content: 'patch it',
        tool_calls: [
          { id: 'call_cmpl_1_0', type: 'function', function: { name: 'apply_patch', arguments: '{"input":"*** Begin Patch"}' } },
        ],
      },
      { role: 'tool', tool_call_id: 'call_cmpl_1_0', content: 'ok' },
      { role: 'assistant', content: 'created' },
      { role: 'user', content: 'now b.txt' },
    ])
  })

  it('walks the session log in the worker step, and 400s unknown or failed responses', async () => {
    const records: Record<string, Partial<CompletionRecord>> = {
      cmpl_1: {
        completion_id: 'cmpl_1',
        api: 'openai-responses',
        status: 'ok',
        original_request: turn1Body,
        response_message: turn1Message,
      },
      cmpl_2: {
        completion_id: 'cmpl_2',
        api: 'openai-responses',
        status: 'ok',
        original_request: turn2Body,
        response_message: turn2Message,
      },
      cmpl_bad: {
        completion_id: 'cmpl_bad',
        api: 'openai-responses',
        status: 'failed',
        original_request: turn1Body,
        response_message: null,
      },
    }
    const looked: string[] = []
    const lookup = async (id: string) => {
      looked.push(id)
      return (records[id] as CompletionRecord | undefined) ?? null
    }
    const resolved = (await resolvePreviousResponseBody(turn3Body, lookup)) as Record<string, unknown>
    expect(looked).toEqual(['cmpl_2', 'cmpl_1'])
    expect((resolved.input as unknown[]).length).toBe(6)
    expect(await resolvePreviousResponseBody({ model: 'm', input: 'x' }, lookup)).toEqual({ model: 'm', input: 'x' })
    for (const id of ['resp_cmpl_missing', 'resp_cmpl_bad', 'msg_x']) {
      const error = await resolvePreviousResponseBody({ ...turn3Body, previous_response_id: id }, lookup).catch((e: unknown) => e)
      expect(error).toMatchObject({ status: 400, param: 'previous_response_id' })
      if (id !== 'msg_x') expect(error).toBeInstanceOf(GatewayError)
    }
  })
})
