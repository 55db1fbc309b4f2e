/**
 * @module
 * Anthropic Messages → chat mapping on recorded harness requests, and the mapping rules one by one.
 */
import { describe, expect, it } from 'vitest'
import { RequestValidationError } from '../../../src/normalize/adapter.ts'
import {
  decodeThinkingSignature,
  encodeThinkingSignature,
  parseAnthropicToolUseId,
} from '../../../src/normalize/providers/anthropic/anthropic-ids.ts'
import { anthropic } from '../../../src/normalize/providers/anthropic/index.ts'
import { mapAnthropicStopReason } from '../../../src/normalize/providers/anthropic/map-anthropic-stop-reason.ts'
import { SYNTHETIC_COMPLETIONS } from '../contract/completions.ts'
import { codes, fixture, parseFixture } from './fixtures.ts'

const URL_MESSAGES = new URL('http://edge.test/v1/messages?beta=true')
const parse = (body: Record<string, unknown>) => anthropic.parseRequest({ model: 'm', max_tokens: 16, ...body }, URL_MESSAGES)

describe('Claude Code requests', () => {
  const turn1 = parseFixture(anthropic, 'anthropic', 'anthropic-claude-code-turn1')
  const turn2 = parseFixture(anthropic, 'anthropic', 'anthropic-claude-code-turn2')

  it('strips the billing-header block and joins the rest of system with newlines', () => {
    const system = turn1.request.messages[0]
    expect(system?.role).toBe('system')
    expect(system?.content).toBe(
      "You are a Claude agent, built on Anthropic's Claude Agent SDK.\nYou are an interactive CLI tool that helps users with software engineering tasks.\n\n# Tone and style\nBe concise.",
    )
    expect(JSON.stringify(turn1.request)).not.toContain('billing-header')
    expect(codes(turn1)).toContain('billing_header_stripped')
  })

  it('keeps the mid-conversation system message a system turn in place (not a new user query)', () => {
    expect(turn1.request.messages.map((message) => message.role)).toEqual(['system', 'user', 'system'])
    expect(turn1.request.messages[2]?.content).toBe(
      'Available agent types for the Agent tool:\n- general-purpose: General-purpose agent for researching complex questions.',
    )
  })

  it('maps adaptive thinking, keeps tool schemas whole, drops metadata silently, sends no tool_choice', () => {
    expect(turn1.request.chat_template_kwargs).toEqual({ enable_thinking: true })
    expect(turn1.request.max_tokens).toBe(64000)
    expect(turn1.stream).toBe(true)
    expect(turn1.modelRequested).toBe('claude-opus-4-8')
    const tools = turn1.request.tools as { function: { name: string; parameters: Record<string, unknown> } }[]
    expect(tools.map((tool) => tool.function.name)).toEqual(['Bash', 'Read', 'Write'])
    expect(tools[0]?.function.parameters.$schema).toBe('https://json-schema.org/draft/2020-12/schema')
    expect(turn1.request.tool_choice).toBeUndefined()
    expect(turn1.request).not.toHaveProperty('metadata')
    expect(turn1.request).not.toHaveProperty('context_management')
    expect(codes(turn1)).toEqual(['billing_header_stripped'])
  })

  it('keeps turn 1 a strict prefix of turn 2 (prefix merging) and recovers reasoning from the signature', () => {
    expect(turn2.request.messages.slice(0, turn1.request.messages.length)).toEqual(turn1.request.messages)
    const [assistant, tool] = turn2.request.messages.slice(turn1.request.messages.length)
    expect(assistant).toEqual({
      role: 'assistant',
      content: "I'll create the file.",
      reasoning_content: 'The user wants hello.txt with "hi". I will use Write.',
      tool_calls: [
        {
          id: 'toolu_cmpl_0a1b2c3d4e5f60718293a4b5_0',
          type: 'function',
          function: { name: 'Write', arguments: '{"file_path":"/work/hello.txt","content":"hi"}' },
        },
      ],
    })
    expect(tool).toEqual({
      role: 'tool',
      tool_call_id: 'toolu_cmpl_0a1b2c3d4e5f60718293a4b5_0',
      content: 'File created successfully at: /work/hello.txt',
    })
  })

  it('maps the title call: thinking disabled, JSON schema output, no tools', () => {
    const title = parseFixture(anthropic, 'anthropic', 'anthropic-claude-code-title')
    expect(title.request.chat_template_kwargs).toEqual({ enable_thinking: false })
    expect(title.request.response_format).toEqual({
      type: 'json_schema',
      json_schema: {
        name: 'output',
        strict: true,
        schema: { type: 'object', properties: { title: { type: 'string' } }, required: ['title'], additionalProperties: false },
      },
    })
    expect(title.request.tools).toBeUndefined()
    expect(title.request.temperature).toBe(1)
    expect(title.request.messages[0]?.content).toMatch(/^Generate a concise/)
  })
})

describe('other harnesses', () => {
  it('accepts qwen-code thinking.budget_tokens above max_tokens (the real API would not)', () => {
    const parsed = parseFixture(anthropic, 'anthropic', 'anthropic-qwen-code')
    expect(parsed.request.max_tokens).toBe(8000)
    expect(parsed.request.chat_template_kwargs).toEqual({ enable_thinking: true })
    expect(parsed.request.messages.map((message) => [message.role, message.content])).toEqual([
      ['system', 'You are Qwen Code, an interactive CLI agent.'],
      ['user', "This is the Qwen Code. We are setting up the context for our chat.\nToday's date is Saturday, May 2, 2026."],
      ['assistant', 'Got it. Thanks for the context!'],
      ['user', 'create hello.txt containing hi, then say done'],
    ])
    expect(parsed.warnings).toEqual([])
  })

  it('puts every tool result before the user text, prefixes errors, moves tool images, drops server tools', () => {
    const parsed = parseFixture(anthropic, 'anthropic', 'anthropic-opencode-parallel')
    const tail = parsed.request.messages.slice(-3)
    expect(tail[0]).toEqual({ role: 'tool', tool_call_id: 'toolu_01A', content: 'Image read successfully' })
    expect(tail[1]).toEqual({ role: 'tool', tool_call_id: 'toolu_01B', content: '[Tool Error] wc: a.txt: No such file or directory' })
    const user = tail[2]?.content as { type: string; text?: string; image_url?: { url: string } }[]
    expect(user.map((part) => part.type)).toEqual(['image_url', 'text', 'image_url'])
    expect(user[0]?.image_url?.url).toMatch(/^data:image\/png;base64,iVBOR/)
    expect(user[2]?.image_url?.url).toBe('https://example.com/cat.png')
    expect((parsed.request.tools as unknown[]).length).toBe(2)
    expect(parsed.request.tool_choice).toBe('auto')
    expect(parsed.request).not.toHaveProperty('parallel_tool_calls')
    expect(codes(parsed)).toEqual(expect.arrayContaining(['tool_dropped', 'tool_result_images_moved']))
  })

  it('maps count_tokens to a /tokenize body with the generation prompt', () => {
    const { body, url } = fixture('anthropic', 'anthropic-count-tokens')
    expect(anthropic.countTokens?.parseRequest(body, url)).toEqual({
      model: 'claude-sonnet-4-5',
      messages: [
        { role: 'system', content: 'You are a helpful assistant.' },
        { role: 'user', content: 'How many tokens is this?' },
      ],
      tools: [
        {
          type: 'function',
          function: {
            name: 'run_shell_command',
            description: 'Executes a shell command.',
            parameters: {
              type: 'object',
              properties: { command: { type: 'string' }, is_background: { type: 'boolean' } },
              required: ['command'],
            },
          },
        },
      ],
      add_generation_prompt: true,
    })
    expect(anthropic.countTokens?.buildResponse(17)).toEqual({ input_tokens: 17 })
  })
})

describe('mapping rules', () => {
  it('maps tool_choice and disable_parallel_tool_use, and omits tool_choice without tools', () => {
    const tools = [{ name: 'a', input_schema: { type: 'object' } }]
    expect(parse({ tools, tool_choice: { type: 'any' }, messages: [{ role: 'user', content: 'x' }] }).request.tool_choice).toBe('required')
    expect(parse({ tools, tool_choice: { type: 'none' }, messages: [{ role: 'user', content: 'x' }] }).request.tool_choice).toBe('none')
    const named = parse({
      tools,
      tool_choice: { type: 'tool', name: 'a', disable_parallel_tool_use: true },
      messages: [{ role: 'user', content: 'x' }],
    })
    expect(named.request.tool_choice).toEqual({ type: 'function', function: { name: 'a' } })
    expect(named.request.parallel_tool_calls).toBe(false)
    expect(parse({ tool_choice: { type: 'any' }, messages: [{ role: 'user', content: 'x' }] }).request.tool_choice).toBeUndefined()
    expect(() => parse({ tools, tool_choice: { type: 'tool', name: 'b' }, messages: [{ role: 'user', content: 'x' }] })).toThrow(
      /tool_choice.name/,
    )
  })

  it('maps stop_sequences, sampling params, and drops metadata without a warning', () => {
    const parsed = parse({
      stop_sequences: ['</a>'],
      temperature: 0.2,
      top_p: 0.9,
      top_k: 20,
      metadata: { user_id: '{"a":1}' },
      messages: [{ role: 'user', content: 'x' }],
    })
    expect(parsed.request).toMatchObject({ stop: ['</a>'], temperature: 0.2, top_p: 0.9, top_k: 20, max_tokens: 16 })
    expect(parsed.warnings).toEqual([])
  })

  it('merges leading system messages into the system prompt and sends ctx/msg roles as user', () => {
    const parsed = parse({
      system: 'top',
      messages: [
        { role: 'system', content: 'lead' },
        { role: 'ctx', content: 'context' },
        { role: 'msg', content: [{ type: 'text', text: 'hello' }] },
      ],
    })
    expect(parsed.request.messages).toEqual([
      { role: 'system', content: 'top\n\nlead' },
      { role: 'user', content: 'context' },
      { role: 'user', content: 'hello' },
    ])
    expect(codes(parsed)).toEqual(['role_mapped'])
  })

  it('places a mid-conversation system turn after the tool results that answer the preceding calls', () => {
    const parsed = parse({
      messages: [
        { role: 'user', content: 'go' },
        { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'a', input: {} }] },
        { role: 'system', content: 'note' },
        {
          role: 'user',
          content: [
            { type: 'tool_result', tool_use_id: 't1', content: 'r' },
            { type: 'text', text: 'more' },
          ],
        },
      ],
    })
    expect(parsed.request.messages.slice(2).map((message) => [message.role, message.content])).toEqual([
      ['tool', 'r'],
      ['system', 'note'],
      ['user', 'more'],
    ])
    expect(codes(parsed)).toEqual(['system_message_moved'])
  })

  it('strips a billing line that shares system[0] with real text', () => {
    const parsed = parse({
      system: 'x-anthropic-billing-header: cc_version=1; cch=9;\nYou are helpful.',
      messages: [{ role: 'user', content: 'x' }],
    })
    expect(parsed.request.messages[0]).toEqual({ role: 'system', content: 'You are helpful.' })
  })

  it('recovers reasoning exactly from a gateway signature, warns when the text was edited, keeps foreign thinking text', () => {
    const reasoning = 'exact\r\n bytes 😀'
    const signature = encodeThinkingSignature('cmpl_x', reasoning)
    expect(decodeThinkingSignature(signature)).toEqual({ completionId: 'cmpl_x', reasoning })
    const edited = parse({
      messages: [
        { role: 'user', content: 'x' },
        {
          role: 'assistant',
          content: [
            { type: 'thinking', thinking: 'edited', signature },
            { type: 'text', text: 'a' },
          ],
        },
        { role: 'user', content: 'y' },
      ],
    })
    expect(edited.request.messages[1]?.reasoning_content).toBe(reasoning)
    expect(codes(edited)).toEqual(['thinking_text_replaced'])
    const foreign = parse({
      messages: [
        { role: 'user', content: 'x' },
        {
          role: 'assistant',
          content: [
            { type: 'thinking', thinking: 'from claude', signature: 'EqQBCkgIARABGAIiQL' },
            { type: 'redacted_thinking', data: 'EmwKAhgBEgy3va3pzix' },
            { type: 'text', text: 'a' },
          ],
        },
        { role: 'user', content: 'y' },
      ],
    })
    expect(foreign.request.messages[1]?.reasoning_content).toBe('from claude')
    expect(codes(foreign)).toEqual(['redacted_thinking_dropped'])
    expect(decodeThinkingSignature('rgth1.!!.??')).toBeNull()
  })

  it('issues tool_use ids that name their completion', () => {
    expect(parseAnthropicToolUseId('toolu_cmpl_ab12_3')).toEqual({ completionId: 'cmpl_ab12', index: 3 })
    expect(parseAnthropicToolUseId('toolu_01A')).toBeNull()
  })

  it('rejects Files API images and system messages with non-text blocks', () => {
    expect(() => parse({ messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'file', file_id: 'f' } }] }] })).toThrow(
      RequestValidationError,
    )
    expect(() =>
      parse({
        messages: [
          { role: 'user', content: 'a' },
          { role: 'system', content: [{ type: 'image', source: { type: 'url', url: 'u' } }] },
        ],
      }),
    ).toThrow(/messages\[1\]\.content\[0\]\.type/)
  })
})

describe('stop reasons', () => {
  it('maps finish reasons, matched stop strings and tool calls', () => {
    const { text, length, stop_sequence, parallel_tools } = SYNTHETIC_COMPLETIONS
    expect(mapAnthropicStopReason(text!)).toEqual({ stopReason: 'end_turn', stopSequence: null })
    expect(mapAnthropicStopReason(length!)).toEqual({ stopReason: 'max_tokens', stopSequence: null })
    expect(mapAnthropicStopReason(stop_sequence!)).toEqual({ stopReason: 'stop_sequence', stopSequence: '</answer>' })
    expect(mapAnthropicStopReason(parallel_tools!)).toEqual({ stopReason: 'tool_use', stopSequence: null })
    expect(mapAnthropicStopReason({ ...text!, stopReason: 151645 })).toEqual({ stopReason: 'end_turn', stopSequence: null })
    expect(mapAnthropicStopReason({ ...text!, finishReason: { unified: 'content-filter', raw: 'content_filter' } }).stopReason).toBe(
      'refusal',
    )
  })
})
