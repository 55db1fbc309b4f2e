import OpenAI from 'openai'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { loadQwen3, type Qwen3 } from './qwen3.ts'
import { type EngineHandle, startEngine } from './server.ts'
import { assistantMessageFrom, createChat, postJson, tokenizeMessages, type VllmChatParams, type VllmLogprobEntry } from './test-support.ts'

const START_TIMEOUT_MS = 60_000
const SEED = 11

let engine: EngineHandle
let client: OpenAI
let qwen3: Qwen3

beforeAll(async () => {
  engine = await startEngine({ port: 0, seed: SEED })
  client = new OpenAI({ baseURL: `${engine.url}/v1`, apiKey: 'x', maxRetries: 0 })
  qwen3 = await loadQwen3()
}, START_TIMEOUT_MS)

afterAll(async () => {
  await engine?.close()
})

const writeTool = {
  type: 'function' as const,
  function: {
    name: 'write',
    description: 'Write a file',
    parameters: {
      type: 'object',
      properties: { path: { type: 'string' }, content: { type: 'string' } },
      required: ['path', 'content'],
    },
  },
}
const baseMessages = [
  { role: 'system' as const, content: 'You are a coding agent.' },
  { role: 'user' as const, content: 'create notes.md containing hello world' },
]
const toolRequest: VllmChatParams = {
  model: 'Qwen/Qwen3-8B',
  messages: baseMessages,
  tools: [writeTool],
  logprobs: true,
  top_logprobs: 3,
  return_token_ids: true,
}

function expectAlignedLogprobs(entries: VllmLogprobEntry[] | undefined, ids: number[]) {
  expect(entries).toHaveLength(ids.length)
  entries?.forEach((entry, index) => {
    const id = ids[index] ?? -1
    expect(entry.token).toBe(qwen3.tokenText(id))
    expect(entry.bytes).toEqual([...Buffer.from(entry.token, 'utf8')])
    expect(entry.logprob).toBeLessThan(0)
    expect(Math.fround(entry.logprob)).toBe(entry.logprob)
    for (const top of entry.top_logprobs) expect(Math.fround(top.logprob)).toBe(top.logprob)
  })
}

describe('chat completions (non-streaming)', () => {
  it('returns a vLLM-shaped tool call with token ids and aligned float32 logprobs', async () => {
    const response = await createChat(client, toolRequest)
    expect(response.id).toMatch(/^chatcmpl-[0-9a-f]{32}$/)
    const choice = response.choices[0]
    if (choice === undefined) throw new Error('no choice')
    expect(choice.finish_reason).toBe('tool_calls')
    expect(choice.stop_reason).toBeNull()
    const call = choice.message.tool_calls?.[0]
    expect(call?.id).toMatch(/^chatcmpl-tool-[0-9a-f]{32}$/)
    expect(call?.function.name).toBe('write')
    expect(JSON.parse(call?.function.arguments ?? '')).toEqual({
      path: 'notes.md',
      content: 'hello world',
    })
    expect(choice.message.content).toBeNull()
    expect(choice.message.reasoning).toMatch(/notes\.md/)

    const ids = choice.token_ids
    expect(ids[0]).toBe(qwen3.specialTokens.thinkStart)
    expect(ids.at(-1)).toBe(qwen3.specialTokens.imEnd)
    expect(qwen3.decode(ids)).toBe(
      `<think>${choice.message.reasoning}</think>\n\n<tool_call>\n{"name": "write", "arguments": ` +
        `${call?.function.arguments}}\n</tool_call><|im_end|>`,
    )
    expectAlignedLogprobs(choice.logprobs?.content, ids)
    expect(choice.logprobs?.content[0]?.top_logprobs).toHaveLength(3)
    expect(response.usage).toEqual({
      prompt_tokens: response.prompt_token_ids.length,
      completion_tokens: ids.length,
      total_tokens: response.prompt_token_ids.length + ids.length,
      prompt_tokens_details: null,
    })
  })

  it('uses exactly the prompt ids /tokenize gives for the same messages', async () => {
    const response = await createChat(client, toolRequest)
    const tokens = await tokenizeMessages(engine.url, {
      messages: baseMessages,
      tools: [writeTool],
    })
    expect(response.prompt_token_ids).toEqual(tokens)
    expect(tokens).toEqual(qwen3.encode(qwen3.renderChat(baseMessages, { tools: [writeTool] })))
    expect(tokens.slice(-3)).toEqual([qwen3.specialTokens.imStart, 77091, 198])
  })

  it('is deterministic for identical requests and changes with the seed', async () => {
    const first = await createChat(client, toolRequest)
    const second = await createChat(client, toolRequest)
    expect(second.choices[0]?.token_ids).toEqual(first.choices[0]?.token_ids)
    expect(second.choices[0]?.logprobs).toEqual(first.choices[0]?.logprobs)
    expect(second.id).not.toBe(first.id)
    const reseeded = await createChat(client, { ...toolRequest, seed: SEED + 1 })
    expect(reseeded.choices[0]?.logprobs).not.toEqual(first.choices[0]?.logprobs)
  })

  it('omits token ids unless asked', async () => {
    const { json } = await postJson(`${engine.url}/v1/chat/completions`, { messages: baseMessages })
    const body = json as {
      prompt_token_ids: unknown
      choices: Array<{ token_ids: unknown; logprobs: unknown }>
    }
    expect(body.prompt_token_ids).toBeNull()
    expect(body.choices[0]?.token_ids).toBeNull()
    expect(body.choices[0]?.logprobs).toBeNull()
  })

  it('honours enable_thinking: false with the empty-think scaffold in the prompt', async () => {
    const response = await createChat(client, {
      ...toolRequest,
      chat_template_kwargs: { enable_thinking: false },
    })
    const { thinkStart, thinkEnd } = qwen3.specialTokens
    expect(response.prompt_token_ids.slice(-4)).toEqual([thinkStart, 271, thinkEnd, 271])
    const choice = response.choices[0]
    expect(choice?.token_ids).not.toContain(thinkStart)
    expect(choice?.token_ids[0]).toBe(qwen3.specialTokens.toolCallStart)
    expect(choice?.message.reasoning).toBeNull()
  })

  // vLLM's qwen3 reasoning parser splits the text at `</think>` and strips nothing (`reasoning, _, content =
  // model_output.partition("</think>")`; the hermes parser nulls content only when it is blank next to tool calls),
  // so with thinking on a Qwen3 reply's content starts with the `\n\n` the model samples after `</think>`, and its
  // reasoning keeps the `\n` on each side. With thinking off the template puts the scaffold in the prompt: no newlines.
  it('keeps the newlines around the think block in reasoning and content, as vLLM does', async () => {
    const messages = [{ role: 'user' as const, content: 'hello there' }]
    const on = await createChat(client, { model: 'Qwen/Qwen3-8B', messages, return_token_ids: true })
    const choice = on.choices[0]!
    expect(choice.message.reasoning).toMatch(/^\n[^\n][\s\S]*[^\n]\n$/)
    expect(choice.message.content).toMatch(/^\n\n[^\n]/)
    const { thinkStart, thinkEnd, imEnd } = qwen3.specialTokens
    const sampled = choice.token_ids.filter((id) => id !== imEnd)
    expect(qwen3.decode(sampled, { skipSpecialTokens: false })).toBe(`<think>${choice.message.reasoning}</think>${choice.message.content}`)
    expect(sampled.slice(sampled.indexOf(thinkEnd) + 1)[0]).toBe(271) // "\n\n": one token, sampled, in content
    expect(sampled[0]).toBe(thinkStart)

    const streamed = await fetch(`${engine.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ messages, stream: true }),
    })
    const chunks = (await streamed.text())
      .split('\n\n')
      .filter((frame) => frame.startsWith('data: {'))
      .map((frame) => JSON.parse(frame.slice('data: '.length)))
    const joined = (key: 'content' | 'reasoning') => chunks.map((chunk) => chunk.choices[0]?.delta[key] ?? '').join('')
    expect({ content: joined('content'), reasoning: joined('reasoning') }).toEqual({
      content: choice.message.content,
      reasoning: choice.message.reasoning,
    })

    const off = await createChat(client, { model: 'Qwen/Qwen3-8B', messages, chat_template_kwargs: { enable_thinking: false } })
    expect(off.choices[0]?.message.content).toMatch(/^[^\n]/)
  })

  it('runs a two-turn tool conversation whose next prompt contains the sampled ids verbatim', async () => {
    const first = await createChat(client, toolRequest)
    const choice = first.choices[0]
    if (choice === undefined) throw new Error('no choice')
    const callId = choice.message.tool_calls?.[0]?.id ?? ''
    const messages = [...baseMessages, assistantMessageFrom(choice), { role: 'tool', tool_call_id: callId, content: 'Wrote notes.md' }]
    const second = await createChat(client, { ...toolRequest, messages } as VllmChatParams)
    const prefix = [...first.prompt_token_ids, ...choice.token_ids]
    expect(second.prompt_token_ids.slice(0, prefix.length)).toEqual(prefix)
    const final = second.choices[0]
    expect(final?.finish_reason).toBe('stop')
    expect(final?.message.tool_calls ?? []).toEqual([])
    expect(final?.message.content).toContain('Created notes.md containing "hello world".')
  })

  it('truncates at max_tokens with finish_reason length', async () => {
    const full = await createChat(client, toolRequest)
    const cut = await createChat(client, { ...toolRequest, max_tokens: 5 })
    const choice = cut.choices[0]
    expect(choice?.finish_reason).toBe('length')
    expect(choice?.token_ids).toEqual(full.choices[0]?.token_ids.slice(0, 5))
    expect(choice?.logprobs?.content).toHaveLength(5)
    expect(`<think>${choice?.message.reasoning}`).toBe(qwen3.decode(choice?.token_ids ?? []))
    expect(choice?.message.tool_calls ?? []).toEqual([])
    expect(cut.usage.completion_tokens).toBe(5)
  })

  it('cuts at a stop string, reports it and drops EOS', async () => {
    const response = await createChat(client, {
      messages: [{ role: 'user', content: 'hello there' }],
      chat_template_kwargs: { enable_thinking: false },
      stop: ['should', 'never-matches'],
      return_token_ids: true,
      logprobs: true,
    })
    const choice = response.choices[0]
    expect(choice?.finish_reason).toBe('stop')
    expect(choice?.stop_reason).toBe('should')
    const content = choice?.message.content ?? ''
    expect(content.length).toBeGreaterThan(0)
    expect(content).not.toContain('should')
    expect(choice?.token_ids).toEqual(qwen3.encode(content))
    expect(choice?.token_ids).not.toContain(qwen3.specialTokens.imEnd)
    expect(choice?.logprobs?.content).toHaveLength(choice?.token_ids.length ?? -1)
  })

  it('answers vLLM-shaped errors', async () => {
    const invalid = await postJson(`${engine.url}/v1/chat/completions`, '{"messages": [')
    expect(invalid.status).toBe(400)
    expect(invalid.json).toMatchObject({
      error: { type: 'BadRequestError', code: 400, param: null },
    })
    const missing = await postJson(`${engine.url}/v1/chat/completions`, { model: 'Qwen/Qwen3-8B' })
    expect(missing.status).toBe(400)
    expect(missing.json).toMatchObject({
      error: { type: 'BadRequestError', code: 400, param: 'messages' },
    })
    const long = await postJson(`${engine.url}/v1/chat/completions`, {
      messages: [{ role: 'user', content: ' hello'.repeat(33_000) }],
    })
    expect(long.status).toBe(400)
    expect((long.json as { error: { message: string } }).error.message).toMatch(/maximum context length is 32768/)
    await expect(client.chat.completions.create({ model: 'gpt-5', messages: baseMessages })).rejects.toMatchObject({ status: 404 })
    await expect(createChat(client, { messages: baseMessages, max_tokens: 40_000 })).rejects.toMatchObject({ status: 400 })
  })
})

describe('chat completions (streaming)', () => {
  it('streams the same tokens, reasoning and tool call as the non-streaming answer', async () => {
    const reference = await createChat(client, toolRequest)
    const stream = await client.chat.completions.create({
      ...toolRequest,
      stream: true,
      stream_options: { include_usage: true },
    } as OpenAI.Chat.ChatCompletionCreateParamsStreaming)
    const ids: number[] = []
    const logprobs: VllmLogprobEntry[] = []
    let promptIds: number[] | undefined
    let reasoning = ''
    let content = ''
    let finish: string | null = null
    let usage: unknown
    const toolCalls: Array<{ id?: string; function?: { name?: string; arguments?: string } }> = []
    for await (const chunk of stream) {
      const raw = chunk as unknown as {
        prompt_token_ids?: number[]
        usage?: unknown
        choices: Array<{
          delta: { reasoning?: string; content?: string; tool_calls?: typeof toolCalls }
          token_ids?: number[]
          logprobs: { content: VllmLogprobEntry[] } | null
          finish_reason: string | null
        }>
      }
      if (raw.prompt_token_ids !== undefined) promptIds ??= raw.prompt_token_ids
      if (raw.usage) usage = raw.usage
      for (const choice of raw.choices) {
        ids.push(...(choice.token_ids ?? []))
        logprobs.push(...(choice.logprobs?.content ?? []))
        reasoning += choice.delta.reasoning ?? ''
        content += choice.delta.content ?? ''
        toolCalls.push(...(choice.delta.tool_calls ?? []))
        finish = choice.finish_reason ?? finish
      }
    }
    const expected = reference.choices[0]
    expect(promptIds).toEqual(reference.prompt_token_ids)
    expect(ids).toEqual(expected?.token_ids)
    expect(logprobs).toEqual(expected?.logprobs?.content)
    expect(reasoning).toBe(expected?.message.reasoning)
    expect(content).toBe('')
    expect(toolCalls).toHaveLength(1)
    expect(toolCalls[0]?.function).toEqual(expected?.message.tool_calls?.[0]?.function)
    expect(finish).toBe('tool_calls')
    expect(usage).toEqual({
      prompt_tokens: reference.usage.prompt_tokens,
      total_tokens: reference.usage.total_tokens,
      completion_tokens: reference.usage.completion_tokens,
    })
  })

  it('ends with data: [DONE] and streams content deltas', async () => {
    const response = await fetch(`${engine.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        messages: [{ role: 'user', content: 'hello there' }],
        chat_template_kwargs: { enable_thinking: false },
        stream: true,
      }),
    })
    expect(response.headers.get('content-type')).toMatch(/^text\/event-stream/)
    const text = await response.text()
    const frames = text.split('\n\n').filter(Boolean)
    expect(frames.at(-1)).toBe('data: [DONE]')
    const chunks = frames.slice(0, -1).map((frame) => JSON.parse(frame.slice('data: '.length)))
    expect(chunks[0].choices[0].delta).toEqual({ role: 'assistant', content: '' })
    expect(chunks.every((chunk) => chunk.object === 'chat.completion.chunk')).toBe(true)
    const content = chunks.map((chunk) => chunk.choices[0]?.delta.content ?? '').join('')
    const reference = await createChat(client, {
      messages: [{ role: 'user', content: 'hello there' }],
      chat_template_kwargs: { enable_thinking: false },
    })
    expect(content).toBe(reference.choices[0]?.message.content)
    expect(chunks.at(-1).choices[0].finish_reason).toBe('stop')
  })
})

describe('completions and utility endpoints', () => {
  it('accepts a token-list prompt and returns vLLM completion fields', async () => {
    const prompt = await tokenizeMessages(engine.url, {
      messages: baseMessages,
      tools: [writeTool],
    })
    const { status, json } = await postJson(`${engine.url}/v1/completions`, {
      model: 'Qwen/Qwen3-8B',
      prompt,
      max_tokens: 200,
      logprobs: 2,
      return_token_ids: true,
    })
    expect(status).toBe(200)
    const body = json as {
      object: string
      choices: Array<{
        text: string
        finish_reason: string
        stop_reason: unknown
        prompt_token_ids: number[]
        token_ids: number[]
        logprobs: {
          tokens: string[]
          token_logprobs: number[]
          top_logprobs: Array<Record<string, number>>
          text_offset: number[]
        }
      }>
      usage: { prompt_tokens: number; completion_tokens: number }
    }
    expect(body.object).toBe('text_completion')
    const choice = body.choices[0]
    if (choice === undefined) throw new Error('no choice')
    expect(choice.prompt_token_ids).toEqual(prompt)
    expect(choice.token_ids.at(-1)).toBe(qwen3.specialTokens.imEnd)
    expect(choice.text).toBe(qwen3.decode(choice.token_ids, { skipSpecialTokens: true }))
    // The rendered chat is understood: the scripted agent calls the offered tool.
    expect(choice.text).toContain('<tool_call>\n{"name": "write", "arguments": {"path": "notes.md", "content": "hello world"}}')
    expect(choice.finish_reason).toBe('stop')
    expect(choice.stop_reason).toBeNull()
    const { tokens, token_logprobs, top_logprobs, text_offset } = choice.logprobs
    expect(tokens).toEqual(choice.token_ids.map((id) => qwen3.tokenText(id)))
    expect(token_logprobs).toHaveLength(choice.token_ids.length)
    tokens.forEach((token, index) => {
      const top = top_logprobs[index] ?? {}
      expect(top[token]).toBe(token_logprobs[index])
      expect(Object.keys(top).length).toBeLessThanOrEqual(3)
      expect(Math.fround(token_logprobs[index] ?? 0)).toBe(token_logprobs[index])
      if (index > 0) expect(text_offset[index]).toBe((text_offset[index - 1] ?? 0) + [...(tokens[index - 1] ?? '')].length)
    })
    expect(body.usage).toMatchObject({
      prompt_tokens: prompt.length,
      completion_tokens: choice.token_ids.length,
    })
  })

  it('accepts a string prompt and rejects out-of-vocabulary ids', async () => {
    const ok = await postJson(`${engine.url}/v1/completions`, {
      prompt: 'Once upon a time',
      max_tokens: 3,
    })
    expect(ok.status).toBe(200)
    expect((ok.json as { choices: Array<{ finish_reason: string }> }).choices[0]?.finish_reason).toBe('length')
    const bad = await postJson(`${engine.url}/v1/completions`, { prompt: [1, 999_999] })
    expect(bad.status).toBe(400)
  })

  it('tokenizes prompts, detokenizes ids and serves models and health like vLLM', async () => {
    const tokenized = await postJson(`${engine.url}/tokenize`, { prompt: 'hi <think>' })
    expect(tokenized.json).toEqual({
      count: 3,
      max_model_len: 32768,
      tokens: [6023, 220, 151667],
      token_strs: null,
    })
    const detokenized = await postJson(`${engine.url}/detokenize`, { tokens: [151644, 872] })
    expect(detokenized.json).toEqual({ prompt: '<|im_start|>user' })
    const models = (await (await fetch(`${engine.url}/v1/models`)).json()) as {
      data: Array<{ id: string; max_model_len: number; owned_by: string }>
    }
    expect(models.data[0]).toMatchObject({
      id: 'Qwen/Qwen3-8B',
      max_model_len: 32768,
      owned_by: 'vllm',
    })
    const listed = await client.models.list()
    expect(listed.data.map((model) => model.id)).toEqual(['Qwen/Qwen3-8B'])
    const health = await fetch(`${engine.url}/health`)
    expect(health.status).toBe(200)
    expect(await health.text()).toBe('')
    expect((await fetch(`${engine.url}/nope`)).status).toBe(404)
  })
})
