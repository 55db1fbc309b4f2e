/**
 * The three provider SDKs (`@anthropic-ai/sdk`, `openai` Responses, `@google/genai`) against the real
 * edge (wrangler dev) and the stand-in engine: two tool-using turns each, streaming and not. Every
 * captured prompt equals the engine's own tokenization of the request as sent, and every sampled id
 * and logprob equals what the engine samples for it.
 */
import Anthropic from '@anthropic-ai/sdk'
import { GoogleGenAI, type Content } from '@google/genai'
import OpenAI from 'openai'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type CompletionRecordJson, engineTokenize, type Stack, startStack } from '../support/stack.ts'

let stack: Stack

beforeAll(async () => {
  stack = await startStack()
})
afterAll(async () => {
  await stack?.stop()
})

async function expectFaithful(records: CompletionRecordJson[], api: string, count: number) {
  expect(records.map((r) => [r.api, r.status, r.trainable])).toEqual(Array.from({ length: count }, () => [api, 'ok', true]))
  for (const record of records) {
    const { messages, tools, chat_template_kwargs } = record.request as {
      messages: unknown[]
      tools?: unknown[]
      chat_template_kwargs?: Record<string, unknown>
    }
    const extra = chat_template_kwargs ? { chat_template_kwargs } : {}
    expect(record.prompt_token_ids).toEqual(await engineTokenize(stack.engine.url, messages, tools, extra))
    const direct = (await (
      await fetch(`${stack.engine.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ ...record.request, return_token_ids: true, logprobs: true, top_logprobs: 0, stream: false }),
      })
    ).json()) as { choices: { token_ids: number[]; logprobs: { content: { logprob: number }[] } }[] }
    expect(record.response_token_ids).toEqual(direct.choices[0]!.token_ids)
    expect(record.response_logprobs).toEqual(direct.choices[0]!.logprobs.content.map((entry) => entry.logprob))
  }
  // Turn 2 extends turn 1's prompt (same conversation): stored as a delta.
  const [first, second] = records
  expect(second!.prompt_token_ids.slice(0, 20)).toEqual(first!.prompt_token_ids.slice(0, 20))
}

describe('Anthropic Messages via @anthropic-ai/sdk', () => {
  it('runs a two-turn tool task (JSON, then stream) and captures both turns exactly', async () => {
    const session = await stack.createSession()
    const client = new Anthropic({ baseURL: session.base_urls.anthropic, apiKey: session.token, maxRetries: 0 })
    const tools: Anthropic.Messages.Tool[] = [
      {
        name: 'Write',
        description: 'Write a file',
        input_schema: {
          type: 'object',
          properties: { file_path: { type: 'string' }, content: { type: 'string' } },
          required: ['file_path', 'content'],
        },
      },
    ]
    const messages: Anthropic.Messages.MessageParam[] = [{ role: 'user', content: 'create hello.txt containing hi' }]
    const first = await client.messages.create({
      model: 'claude-sonnet-4-5',
      max_tokens: 1024,
      system: 'You are a coding agent.',
      messages,
      tools,
    })
    expect(first.stop_reason).toBe('tool_use')
    const toolUse = first.content.find((block) => block.type === 'tool_use')!
    expect(toolUse).toMatchObject({ name: 'Write', input: { content: 'hi' } })
    messages.push(
      { role: 'assistant', content: first.content },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: toolUse.id, content: 'File written' }] },
    )
    const stream = client.messages.stream({
      model: 'claude-sonnet-4-5',
      max_tokens: 1024,
      system: 'You are a coding agent.',
      messages,
      tools,
    })
    const second = await stream.finalMessage()
    expect(second.stop_reason).toBe('end_turn')
    expect(
      second.content
        .filter((block) => block.type === 'text')
        .map((block) => block.text)
        .join(''),
    ).toMatch(/hello\.txt/)
    expect(second.usage.input_tokens).toBeGreaterThan(first.usage.input_tokens)
    const count = await client.messages.countTokens({ model: 'claude-sonnet-4-5', system: 'You are a coding agent.', messages, tools })
    expect(count.input_tokens).toBeGreaterThan(0)
    const records = await stack.completions(session.session_id)
    // count_tokens is answered from /tokenize and never recorded.
    await expectFaithful(records, 'anthropic', 2)
    expect(count.input_tokens).toBe(records[1]!.prompt_token_ids.length)
    expect(records[1]!.stream).toBe(true)
  })
})

describe('OpenAI Responses via openai', () => {
  it('runs a two-turn tool task (stream, then JSON) and captures both turns exactly', async () => {
    const session = await stack.createSession()
    const client = new OpenAI({ baseURL: session.base_urls.openai, apiKey: session.token, maxRetries: 0 })
    const tools: OpenAI.Responses.Tool[] = [
      {
        type: 'function',
        name: 'shell',
        description: 'Run a shell command',
        strict: false,
        parameters: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] },
      },
    ]
    const input: OpenAI.Responses.ResponseInput = [{ role: 'user', content: 'create hello.txt containing hi' }]
    const stream = client.responses.stream({
      model: 'gpt-5-codex',
      instructions: 'You are Codex.',
      input,
      tools,
      store: false,
      include: ['reasoning.encrypted_content'],
    })
    const first = await stream.finalResponse()
    const call = first.output.find((item) => item.type === 'function_call')!
    expect(call).toMatchObject({ name: 'shell' })
    expect(JSON.parse(call.arguments).command).toContain('hello.txt')
    input.push(...(first.output as OpenAI.Responses.ResponseInputItem[]), {
      type: 'function_call_output',
      call_id: call.call_id,
      output: 'ok',
    })
    const second = await client.responses.create({ model: 'gpt-5-codex', instructions: 'You are Codex.', input, tools, store: false })
    expect(second.status).toBe('completed')
    expect(second.output_text).toMatch(/hello\.txt/)
    await expectFaithful(await stack.completions(session.session_id), 'openai-responses', 2)
  })

  it('resolves previous_response_id from the session log', async () => {
    const session = await stack.createSession()
    const client = new OpenAI({ baseURL: session.base_urls.openai, apiKey: session.token, maxRetries: 0 })
    const first = await client.responses.create({ model: 'gpt-5', input: 'Say hello.' })
    const second = await client.responses.create({ model: 'gpt-5', previous_response_id: first.id, input: 'And again.' })
    expect(second.status).toBe('completed')
    const records = await stack.completions(session.session_id)
    const messages = records[1]!.request.messages as { role: string; content: unknown }[]
    expect(messages.map((m) => m.role)).toEqual(['user', 'assistant', 'user'])
    const unknown = await client.responses
      .create({ model: 'gpt-5', previous_response_id: 'resp_nope', input: 'x' })
      .catch((e: unknown) => e)
    expect((unknown as InstanceType<typeof OpenAI.APIError>).status).toBe(400)
  })
})

describe('Gemini via @google/genai', () => {
  it('runs a two-turn function-calling task (JSON, then SSE stream) and captures both turns exactly', async () => {
    const session = await stack.createSession()
    const ai = new GoogleGenAI({ apiKey: session.token, httpOptions: { baseUrl: session.base_urls.google, apiVersion: 'v1beta' } })
    const config = {
      systemInstruction: 'You are Gemini CLI.',
      tools: [
        {
          functionDeclarations: [
            {
              name: 'write_file',
              description: 'Write a file',
              parametersJsonSchema: {
                type: 'object',
                properties: { file_path: { type: 'string' }, content: { type: 'string' } },
                required: ['file_path', 'content'],
              },
            },
          ],
        },
      ],
    }
    const contents: Content[] = [{ role: 'user', parts: [{ text: 'create hello.txt containing hi' }] }]
    const first = await ai.models.generateContent({ model: 'gemini-2.5-pro', contents, config })
    const call = first.functionCalls?.[0]
    expect(call).toMatchObject({ name: 'write_file', args: { content: 'hi' } })
    contents.push(first.candidates![0]!.content!, {
      role: 'user',
      parts: [{ functionResponse: { id: call!.id, name: 'write_file', response: { output: 'ok' } } }],
    })
    let text = ''
    for await (const chunk of await ai.models.generateContentStream({ model: 'gemini-2.5-pro', contents, config })) text += chunk.text ?? ''
    expect(text).toMatch(/hello\.txt/)
    const records = await stack.completions(session.session_id)
    await expectFaithful(records, 'google', 2)
    expect(records[1]!.stream).toBe(true)
  })
})
