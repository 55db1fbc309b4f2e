/**
 * count_tokens counts the prompt the next generation really gets (engine + `wrangler dev`, official SDKs):
 * the engine samples `See below —\n<tool_call>…` (vLLM's hermes parser leaves the newline in the content), the
 * harness sends that turn back verbatim, and the edge restores it to its sampled form before generating
 * (`replay_restored`). A count of the same conversation goes through the same preparation, so Anthropic's `input_tokens` and Gemini's `totalTokens` equal the prompt length
 * recorded for the generation that follows. Without the restore they are one token off: the template's own
 * `\n` before `<tool_call>` makes `—\n\n` (one token fewer than the sampled `—\n<tool_call>`).
 */
import Anthropic from '@anthropic-ai/sdk'
import { type Content, GoogleGenAI } from '@google/genai'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type Stack, startStack } from '../support/stack.ts'

const SCRIPT = [
  { reasoning: 'Look first.', content: 'See below —', tool_calls: [{ name: 'bash', arguments: { command: 'ls' } }] },
  { reasoning: 'Done.', content: 'All tests pass.' },
]
const SCHEMA = { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] }
const SYSTEM = 'You are a coding agent.'

let stack: Stack
beforeAll(async () => {
  stack = await startStack({ policy: 'script', script: SCRIPT })
})
afterAll(async () => {
  await stack?.stop()
})

type Recorded = Awaited<ReturnType<Stack['completions']>>[number]
const warningCodes = (record: Recorded) => (record as unknown as { warnings: { code: string }[] }).warnings.map((w) => w.code)

describe('count_tokens == the next generation’s recorded prompt, for a turn the edge restores', () => {
  it('Anthropic /v1/messages/count_tokens', async () => {
    const session = await stack.createSession({ task_id: 'count-restore' })
    const client = new Anthropic({ baseURL: session.base_urls.anthropic, apiKey: session.token, maxRetries: 0 })
    const tools: Anthropic.Messages.Tool[] = [{ name: 'bash', description: 'Run a shell command.', input_schema: SCHEMA as never }]
    const messages: Anthropic.Messages.MessageParam[] = [{ role: 'user', content: 'Fix the tests.' }]
    const first = await client.messages.create({ model: 'claude-sonnet-4-5', max_tokens: 1024, system: SYSTEM, messages, tools })
    const toolUse = first.content.find((block) => block.type === 'tool_use')!
    messages.push(
      { role: 'assistant', content: first.content },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: toolUse.id, content: 'ok' }] },
    )
    const count = await client.messages.countTokens({ model: 'claude-sonnet-4-5', system: SYSTEM, messages, tools })
    await client.messages.create({ model: 'claude-sonnet-4-5', max_tokens: 1024, system: SYSTEM, messages, tools })
    const records = await stack.completions(session.session_id)
    expect(records).toHaveLength(2)
    expect(warningCodes(records[1]!)).toContain('replay_restored')
    expect(count.input_tokens).toBe(records[1]!.prompt_token_ids.length)
  })

  it('Gemini :countTokens', async () => {
    const session = await stack.createSession({ task_id: 'count-restore' })
    const ai = new GoogleGenAI({ apiKey: session.token, httpOptions: { baseUrl: session.base_urls.google, apiVersion: 'v1beta' } })
    const config = {
      systemInstruction: SYSTEM,
      tools: [{ functionDeclarations: [{ name: 'bash', description: 'Run a shell command.', parametersJsonSchema: SCHEMA }] }],
    }
    const contents: Content[] = [{ role: 'user', parts: [{ text: 'Fix the tests.' }] }]
    const first = await ai.models.generateContent({ model: 'gemini-2.5-pro', contents, config })
    const call = first.functionCalls?.[0]
    contents.push(first.candidates![0]!.content!, {
      role: 'user',
      parts: [{ functionResponse: { id: call!.id, name: 'bash', response: { output: 'ok' } } }],
    })
    // countTokens carries the prompt as a generateContentRequest-less body: contents (+ system and tools via REST).
    const response = await fetch(`${session.base_urls.google}/v1beta/models/gemini-2.5-pro:countTokens`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-goog-api-key': session.token },
      body: JSON.stringify({
        generateContentRequest: {
          model: 'models/gemini-2.5-pro',
          contents,
          systemInstruction: { parts: [{ text: SYSTEM }] },
          tools: config.tools,
        },
      }),
    })
    expect(response.status).toBe(200)
    const count = (await response.json()) as { totalTokens: number }
    await ai.models.generateContent({ model: 'gemini-2.5-pro', contents, config })
    const records = await stack.completions(session.session_id)
    expect(records).toHaveLength(2)
    expect(warningCodes(records[1]!)).toContain('replay_restored')
    expect(count.totalTokens).toBe(records[1]!.prompt_token_ids.length)
  })
})
