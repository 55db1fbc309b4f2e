/**
 * Replayed-turn restore (`src/normalize/replay-restore.ts`) against the real Qwen3 template and tokenizer: a turn
 * the engine sampled as `content\n<tool_call>…`, parsed the way vLLM's hermes parser does and sent back verbatim,
 * re-renders with one token more than was sampled; restored, the next prompt contains the sampled ids verbatim.
 */
import { beforeAll, describe, expect, it } from 'vitest'
import { parseAssistantOutput } from '../../../engine/output-parser.ts'
import { assistantText } from '../../../engine/policy/assistant-text.ts'
import { type ChatMessage as EngineMessage, loadQwen3, type Qwen3 } from '../../../engine/qwen3.ts'
import {
  completionIdOfToolCall,
  jsonEqual,
  replayRestoredWarning,
  restoreReplayedTurns,
  type SampledTurnLookup,
} from '../../../src/normalize/replay-restore.ts'
import type { ChatMessage, ResponseMessage } from '../../../src/normalize/types.ts'

const TOOLS = [
  {
    type: 'function',
    function: {
      name: 'bash',
      description: 'Run a command',
      parameters: { type: 'object', properties: { command: { type: 'string' }, timeout: { type: 'number' } } },
    },
  },
]
const CID = 'cmpl_0123456789abcdef01234567'

let qwen3: Qwen3
beforeAll(async () => {
  qwen3 = await loadQwen3()
})

/** What the engine samples and what vLLM answers for it (hermes + qwen3 reasoning parsers). */
function sample(content: string, args: Record<string, unknown>) {
  const text = assistantText({ enableThinking: true, reasoning: 'Run the tests.', content, toolCalls: [{ name: 'bash', arguments: args }] })
  const parsed = parseAssistantOutput(text, { parseToolCalls: true })
  const message: ResponseMessage = {
    role: 'assistant',
    content: parsed.content,
    reasoning_content: parsed.reasoning,
    tool_calls: parsed.toolCalls.map((call, i) => ({
      id: `chatcmpl-tool-${i}`,
      type: 'function' as const,
      function: { name: call.name, arguments: call.arguments },
    })),
  }
  return { ids: [...qwen3.encode(text), qwen3.specialTokens.imEnd], message }
}

/** The replayed turn as a harness sends it: the answer it got, with the gateway's ids. */
function replayed(message: ResponseMessage, overrides: Partial<ChatMessage> = {}): ChatMessage {
  return {
    role: 'assistant',
    content: message.content,
    reasoning_content: message.reasoning_content,
    tool_calls: (message.tool_calls ?? []).map((call, i) => ({ ...call, id: `call_${CID}_${i}`, function: { ...call.function } })),
    ...overrides,
  }
}

function conversation(turn: ChatMessage): ChatMessage[] {
  return [
    { role: 'system', content: 'You fix failing tests.' },
    { role: 'user', content: 'Fix the failing test.' },
    turn,
    { role: 'tool', tool_call_id: `call_${CID}_0`, content: 'ok' },
  ]
}

/** Does the prompt for `messages` continue the first call's prompt + sampled ids verbatim? */
function continuesSample(messages: ChatMessage[], sampledIds: number[]): boolean {
  const rendered = messages as EngineMessage[]
  const first = qwen3.tokenizeChat(rendered.slice(0, 2), { tools: TOOLS, addGenerationPrompt: true })
  const next = qwen3.tokenizeChat(rendered, { tools: TOOLS, addGenerationPrompt: true })
  const expected = [...first, ...sampledIds]
  return expected.every((id, i) => next[i] === id)
}

const lookupOf =
  (turns: Record<string, ResponseMessage>, calls: string[] = []): SampledTurnLookup =>
  async (ids) => {
    calls.push(...ids)
    return Object.fromEntries(ids.flatMap((id) => (turns[id] ? [[id, turns[id]]] : [])))
  }

describe('restoreReplayedTurns', () => {
  it('puts back the sampled form of a verbatim replayed turn: the next prompt then contains the sampled ids', async () => {
    const { ids, message } = sample('Running the tests.', { command: 'python3 -m pytest -q' })
    expect(message.content).toBe('\n\nRunning the tests.\n')
    const messages = conversation(replayed(message))
    // As the harness sent it, the template adds its own newline before <tool_call>: one token differs.
    expect(continuesSample(messages, ids)).toBe(false)
    const result = await restoreReplayedTurns(messages, lookupOf({ [CID]: message }))
    expect(result.turns).toEqual([{ messageIndex: 2, completionId: CID, restored: ['content_separator'] }])
    expect(continuesSample(result.messages, ids)).toBe(true)
    // The harness's own messages are untouched (what the client sent and sees never changes).
    expect(messages[2]!.content).toBe('\n\nRunning the tests.\n')
    expect(result.messages[1]).toBe(messages[1])
    expect(replayRestoredWarning(result.turns)).toEqual({
      code: 'replay_restored',
      message: `restored 1 replayed assistant turn(s) to their sampled form: message 2 (${CID}): content_separator`,
    })
  })

  it('restores the sampled argument strings when the harness re-serialized them (JSON-equal)', async () => {
    const { ids, message } = sample('Running the tests.', { command: 'pytest', timeout: 5 })
    const turn = replayed(message)
    const calls = turn.tool_calls as { function: { arguments: string } }[]
    calls[0]!.function.arguments = JSON.stringify({ timeout: 5, command: 'pytest' })
    const result = await restoreReplayedTurns(conversation(turn), lookupOf({ [CID]: message }))
    expect(result.turns[0]?.restored).toEqual(['arguments', 'content_separator'])
    expect(continuesSample(result.messages, ids)).toBe(true)
  })

  it('is a no-op without a lookup when no replayed turn can differ', async () => {
    const { message } = sample('', { command: 'ls' })
    expect(message.content).toBeNull()
    const messages = conversation(replayed(message))
    const calls: string[] = []
    const result = await restoreReplayedTurns(messages, lookupOf({ [CID]: message }, calls))
    expect(result.messages).toBe(messages)
    expect(result.turns).toEqual([])
    expect(calls).toEqual([])
    expect(replayRestoredWarning(result.turns)).toBeNull()
  })

  it('leaves foreign turns (ids the gateway did not issue) alone, without a lookup', async () => {
    const { message } = sample('Running the tests.', { command: 'ls' })
    const turn = {
      ...replayed(message),
      tool_calls: [{ id: 'chatcmpl-tool-0', type: 'function', function: message.tool_calls![0]!.function }],
    }
    const calls: string[] = []
    const result = await restoreReplayedTurns(conversation(turn), lookupOf({ [CID]: message }, calls))
    expect(result.turns).toEqual([])
    expect(calls).toEqual([])
  })

  it('does not restore a turn that is not the sampled one (edited content, other arguments, other tool, unknown completion)', async () => {
    const { message } = sample('Running the tests.', { command: 'ls' })
    const edited = replayed(message, { content: '\n\nRunning all the tests.\n' })
    const otherArgs = replayed(message)
    ;(otherArgs.tool_calls as { function: { arguments: string } }[])[0]!.function.arguments = '{"command": "ls -la"}'
    const otherTool = replayed(message)
    ;(otherTool.tool_calls as { function: { name: string } }[])[0]!.function.name = 'shell'
    for (const turn of [edited, otherArgs, otherTool]) {
      const messages = conversation(turn)
      const result = await restoreReplayedTurns(messages, lookupOf({ [CID]: message }))
      expect(result.turns).toEqual([])
      expect(result.messages).toBe(messages)
    }
    const unknown = await restoreReplayedTurns(conversation(replayed(message)), lookupOf({}))
    expect(unknown.turns).toEqual([])
  })
})

describe('helpers', () => {
  it('reads the completion id out of every adapter’s tool-call ids', () => {
    expect(completionIdOfToolCall(`call_${CID}_0`)).toBe(CID)
    expect(completionIdOfToolCall(`toolu_${CID}_2`)).toBe(CID)
    expect(completionIdOfToolCall(`fc_${CID}_1`)).toBe(CID)
    expect(completionIdOfToolCall('chatcmpl-tool-abc')).toBeNull()
    expect(completionIdOfToolCall(undefined)).toBeNull()
  })

  it('compares JSON structurally, key order ignored', () => {
    expect(jsonEqual({ a: 1, b: [1, { c: 2 }] }, { b: [1, { c: 2 }], a: 1 })).toBe(true)
    expect(jsonEqual({ a: 1 }, { a: 1, b: undefined })).toBe(false)
    expect(jsonEqual([1, 2], [2, 1])).toBe(false)
    expect(jsonEqual({ a: '1' }, { a: 1 })).toBe(false)
  })
})
