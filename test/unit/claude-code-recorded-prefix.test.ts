/**
 * The recorded Claude Code fix-stats session (`src/normalize/providers/anthropic/__fixtures__/claude-code-fix-stats.<n>`,
 * 11 calls; from call 9 on the history holds Claude Code's mid-conversation `system` note "The user hasn't heard
 * from you in a while …" after a tool result) through the Anthropic adapter, the engine body and the real Qwen3
 * chat template: each call's prompt must be a token prefix of the next call's prompt. That is what lets prefix
 * merging continue the trace; a history rewrite (the note sent as a user query, which makes Qwen3 drop the
 * reasoning of every earlier turn) breaks it at call 9.
 */
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { beforeAll, describe, expect, it } from 'vitest'
import { renderChatPrompt } from '../../engine/chat-generation.ts'
import { loadQwen3, type Qwen3 } from '../../engine/qwen3.ts'
import { buildEngineRequest } from '../../src/normalize/engine/engine-request.ts'
import { parseAnthropicRequest } from '../../src/normalize/providers/anthropic/anthropic-request.ts'

const FIXTURES = join(import.meta.dirname, '../../src/normalize/providers/anthropic/__fixtures__')
const CALLS = 11

let qwen: Qwen3
beforeAll(async () => {
  qwen = await loadQwen3()
}, 60_000)

function prompt(n: number): number[] {
  const { body } = JSON.parse(readFileSync(join(FIXTURES, `claude-code-fix-stats.${n}.request.json`), 'utf8')) as { body: unknown }
  const parsed = parseAnthropicRequest(body)
  const engineBody = buildEngineRequest(parsed.request, { kind: 'vllm', servedModel: null, maxModelLen: null, promptChars: 0 })
  const { text } = renderChatPrompt(qwen, engineBody.messages, {
    tools: engineBody.tools ?? null,
    addGenerationPrompt: true,
    templateKwargs: (engineBody.chat_template_kwargs ?? null) as Record<string, unknown> | null,
  })
  return qwen.encode(text)
}

function commonPrefix(a: readonly number[], b: readonly number[]): number {
  let i = 0
  while (i < a.length && i < b.length && a[i] === b[i]) i++
  return i
}

describe('recorded Claude Code session, real Qwen3 template', () => {
  it('the mid-conversation system note is in calls 9–11', () => {
    const { body } = JSON.parse(readFileSync(join(FIXTURES, 'claude-code-fix-stats.9.request.json'), 'utf8')) as {
      body: { messages: { role: string; content: unknown }[] }
    }
    expect(body.messages[18]).toMatchObject({ role: 'system' })
    expect(JSON.stringify(body.messages[18]?.content)).toContain("The user hasn't heard from you in a while")
  })

  it('every prompt is a token prefix of the next one (no history rewrite, the note included)', () => {
    const prompts = Array.from({ length: CALLS }, (_, i) => prompt(i + 1))
    const shortfalls = prompts.slice(1).map((next, i) => {
      const previous = prompts[i]!
      const shared = commonPrefix(previous, next)
      return shared === previous.length ? null : `call ${i + 1} → ${i + 2}: diverges at token ${shared} of ${previous.length}`
    })
    expect(shortfalls.filter(Boolean)).toEqual([])
  })
})
