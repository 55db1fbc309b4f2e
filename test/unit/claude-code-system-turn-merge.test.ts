/**
 * Claude Code's mid-conversation `system` message (its "The user hasn't heard from you in a while" note,
 * sent with the mid-conversation system beta) through the real path: Anthropic Messages bodies shaped like
 * Claude Code's → the Anthropic adapter → the engine body → the real Qwen3 chat template and tokenizer
 * (the stand-in engine's own `renderChatPrompt`, as `/tokenize` and chat completions use it) → prefix
 * merging under the default `exact` preset.
 *
 * Qwen3 keeps an assistant turn's reasoning only after the last user query. A system note sent as a `user`
 * message becomes that query, so every earlier turn re-renders without its reasoning: a history rewrite
 * that splits the trajectory (`compaction`). Sent as a `system` turn in place, the next prompt still extends
 * the previous prompt + sampled response token for token, and the session stays one trace.
 */
import { beforeAll, describe, expect, it } from 'vitest'
import { renderChatPrompt } from '../../engine/chat-generation.ts'
import { loadQwen3, type Qwen3 } from '../../engine/qwen3.ts'
import type { CompletionRecord } from '../../src/contract/completion-record.ts'
import type { Trajectory } from '../../src/contract/trajectory.ts'
import { buildEngineRequest } from '../../src/normalize/engine/engine-request.ts'
import { anthropicToolUseId, encodeThinkingSignature } from '../../src/normalize/providers/anthropic/anthropic-ids.ts'
import { parseAnthropicRequest } from '../../src/normalize/providers/anthropic/anthropic-request.ts'
import { reconstructTrajectory } from '../../src/reconstruct/index.ts'
import { makeRecord, withDeltas } from './reconstruct-support/records.ts'

const ASSISTANT_HEADER = '<|im_start|>assistant\n'
const IDLE_NOTE = "The user hasn't heard from you in a while. Give them a short progress update before you continue."
const COMMANDS = ['ls', 'cat stats/core.py', 'python3 -m pytest -q', 'git diff']

let qwen: Qwen3
beforeAll(async () => {
  qwen = await loadQwen3()
}, 60_000)

type AnthropicMessage = { role: string; content: unknown }

function claudeCodeBody(messages: AnthropicMessage[], nonce: number) {
  return {
    model: 'claude-sonnet-4-5',
    max_tokens: 32_000,
    stream: true,
    thinking: { type: 'enabled', budget_tokens: 4_000 },
    system: [
      { type: 'text', text: `x-anthropic-billing-header: cc_version=2.1.330; cc_entrypoint=cli; cch=${nonce.toString(16)};` },
      { type: 'text', text: 'You are Claude Code.', cache_control: { type: 'ephemeral' } },
    ],
    tools: [
      {
        name: 'Bash',
        description: 'Run a shell command.',
        input_schema: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] },
      },
    ],
    messages,
  }
}

/**
 * A Claude Code-shaped session: one task, one Bash call per turn (answered by a tool result), and the idle
 * note inserted as a `system` message where `systemAt` says (after that many answered turns, before or
 * after the user message carrying the tool result). Returns the captured records, as the edge would.
 */
function runSession(systemAt: { turn: number; placement: 'after_result' | 'before_result' } | null): CompletionRecord[] {
  const history: AnthropicMessage[] = [{ role: 'user', content: [{ type: 'text', text: 'Fix the failing test in stats.' }] }]
  const records: CompletionRecord[] = []
  const parents: Record<number, number | undefined> = {}
  for (let turn = 0; turn < COMMANDS.length; turn++) {
    const parsed = parseAnthropicRequest(claudeCodeBody(history, turn + 1))
    const engineBody = buildEngineRequest(parsed.request, { kind: 'vllm', servedModel: null, maxModelLen: null, promptChars: 0 })
    const options = {
      tools: engineBody.tools ?? null,
      templateKwargs: (engineBody.chat_template_kwargs ?? null) as Record<string, unknown> | null,
    }
    const prompt = qwen.encode(renderChatPrompt(qwen, engineBody.messages, { ...options, addGenerationPrompt: true }).text)
    const completionId = `cmpl_${String(turn).padStart(24, '0')}`
    const reasoning = `\nStep ${turn}: I should run \`${COMMANDS[turn]}\` next.\n`
    const args = { command: COMMANDS[turn]! }
    // What the model sampled: the template's rendering of this assistant turn as the last one.
    const sampledTurn = {
      role: 'assistant',
      content: null,
      reasoning,
      tool_calls: [{ id: 'call_0', type: 'function', function: { name: 'Bash', arguments: JSON.stringify(args) } }],
    }
    const rendered = renderChatPrompt(qwen, [...engineBody.messages, sampledTurn], { ...options, addGenerationPrompt: false }).text
    const sampled = rendered.slice(
      rendered.lastIndexOf(ASSISTANT_HEADER) + ASSISTANT_HEADER.length,
      rendered.lastIndexOf('<|im_end|>') + 10,
    )
    records.push(
      makeRecord({
        seq: turn,
        id: completionId,
        prompt,
        response: qwen.encode(sampled),
        finish: 'tool_calls',
        messages: engineBody.messages as Record<string, unknown>[],
        tools: (engineBody.tools ?? null) as Record<string, unknown>[] | null,
      }),
    )
    parents[turn] = turn === 0 ? undefined : turn - 1
    // What Claude Code sends back: the edge's answer (thinking with its signature, tool_use), then the result.
    const toolUseId = anthropicToolUseId(completionId, 0)
    history.push({
      role: 'assistant',
      content: [
        { type: 'thinking', thinking: reasoning, signature: encodeThinkingSignature(completionId, reasoning) },
        { type: 'tool_use', id: toolUseId, name: 'Bash', input: args },
      ],
    })
    const note = { role: 'system', content: IDLE_NOTE }
    if (systemAt?.turn === turn && systemAt.placement === 'before_result') history.push(note)
    history.push({ role: 'user', content: [{ type: 'tool_result', tool_use_id: toolUseId, content: `output of ${COMMANDS[turn]}` }] })
    if (systemAt?.turn === turn && systemAt.placement === 'after_result') history.push(note)
  }
  return withDeltas(records, parents)
}

function prefixMerging(records: CompletionRecord[]): Trajectory {
  return reconstructTrajectory(records, { builder: 'prefix_merging', decode: (ids) => qwen.decode(ids) })
}

const breaks = (trajectory: Trajectory) => trajectory.traces.map((trace) => trace.metadata?.break_reason ?? null)

describe('Claude Code mid-conversation system message, real Qwen3 template, default exact preset', () => {
  it('a session without the note is one trace (the baseline the note must not break)', () => {
    const trajectory = prefixMerging(runSession(null))
    expect(breaks(trajectory)).toEqual([null])
  })

  for (const placement of ['after_result', 'before_result'] as const) {
    it(`the idle note (${placement.replace('_', ' ')}) keeps every earlier turn's reasoning: one trace, no break`, () => {
      const records = runSession({ turn: 1, placement })
      const trajectory = prefixMerging(records)
      expect(breaks(trajectory)).toEqual([null])
      expect(trajectory.traces[0]?.metadata?.source_completion_ids).toHaveLength(COMMANDS.length)
      // Earlier reasoning is still rendered in the prompt after the note.
      expect(qwen.decode(records[3]!.prompt_token_ids)).toContain('Step 0: I should run `ls` next.')
    })
  }

  it('the note is a system turn in the rendered prompt, right where Claude Code put it', () => {
    const records = runSession({ turn: 1, placement: 'after_result' })
    const text = qwen.decode(records[2]!.prompt_token_ids)
    expect(text).toContain(
      `output of cat stats/core.py\n</tool_response><|im_end|>\n<|im_start|>system\n${IDLE_NOTE}<|im_end|>\n${ASSISTANT_HEADER}`,
    )
  })
})
