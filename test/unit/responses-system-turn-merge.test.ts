/**
 * A mid-conversation `developer` / `system` item in an OpenAI Responses request (Codex's mid-session
 * permissions / collaboration-mode notes, opencode's and pi's mode switches) through the real path:
 * Responses bodies shaped like those harnesses' → the Responses adapter → the engine body → the real Qwen3
 * chat template and tokenizer (the stand-in engine's `renderChatPrompt`) → prefix merging under the default
 * `exact` preset. The same session through Chat Completions (a `system` message passed through as is)
 * is the control.
 *
 * Qwen3 keeps an assistant turn's reasoning only after the last user query. A note sent as a `user`
 * message becomes that query and every earlier turn re-renders without its reasoning (a history rewrite that
 * splits the trajectory); kept as a `system` turn in place, each prompt extends the previous prompt + sampled
 * response token for token and the session is one trace.
 */
import { beforeAll, describe, expect, it } from 'vitest'
import { renderChatPrompt } from '../../engine/chat-generation.ts'
import { loadQwen3, type Qwen3 } from '../../engine/qwen3.ts'
import type { CompletionRecord } from '../../src/contract/completion-record.ts'
import type { Trajectory } from '../../src/contract/trajectory.ts'
import type { ProviderAdapter } from '../../src/normalize/adapter.ts'
import { buildEngineRequest } from '../../src/normalize/engine/engine-request.ts'
import { openaiChat } from '../../src/normalize/providers/openai-chat/index.ts'
import { openaiResponses } from '../../src/normalize/providers/openai-responses/index.ts'
import { encodeReasoningContent, toolCallId } from '../../src/normalize/providers/openai-responses/openai-responses-ids.ts'
import { reconstructTrajectory } from '../../src/reconstruct/index.ts'
import { makeRecord, withDeltas } from './reconstruct-support/records.ts'

const ASSISTANT_HEADER = '<|im_start|>assistant\n'
const NOTE = '<collaboration_mode>You are now in Default mode. Ask before destructive commands.</collaboration_mode>'
const COMMANDS = ['ls', 'cat stats/core.py', 'python3 -m pytest -q', 'git diff']

let qwen: Qwen3
beforeAll(async () => {
  qwen = await loadQwen3()
}, 60_000)

type Item = Record<string, unknown>
type Placement = 'after_output' | 'before_output'
/** One harness's wire: how it shapes the history items and where the adapter lives. */
interface Shape {
  adapter: ProviderAdapter
  url: URL
  body(history: Item[]): Record<string, unknown>
  task(): Item[]
  note(role: string): Item
  answered(
    completionId: string,
    reasoning: string,
    args: { command: string },
    output: string,
    note: Item | null,
    placement: Placement,
  ): Item[]
}

const SHELL_SCHEMA = { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] }

const responses: Shape = {
  adapter: openaiResponses,
  url: new URL('http://edge.test/v1/responses'),
  body: (input) => ({
    model: 'gpt-5.1-codex',
    instructions: 'You are a coding agent running in the Codex CLI.',
    input,
    tools: [{ type: 'function', name: 'shell', description: 'Run a shell command.', parameters: SHELL_SCHEMA }],
    reasoning: { effort: 'medium' },
    include: ['reasoning.encrypted_content'],
    store: false,
    stream: true,
  }),
  task: () => [
    {
      type: 'message',
      role: 'developer',
      content: [{ type: 'input_text', text: '<permissions instructions>sandbox</permissions instructions>' }],
    },
    { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Fix the failing test in stats.' }] },
  ],
  note: (role) => ({ type: 'message', role, content: [{ type: 'input_text', text: NOTE }] }),
  answered: (completionId, reasoning, args, output, note, placement) => {
    const callId = toolCallId(completionId, 0)
    const items: Item[] = [
      { type: 'reasoning', id: `rs_${completionId}`, summary: [], encrypted_content: encodeReasoningContent(completionId, reasoning) },
      { type: 'function_call', call_id: callId, name: 'shell', arguments: JSON.stringify(args) },
    ]
    if (note && placement === 'before_output') items.push(note)
    items.push({ type: 'function_call_output', call_id: callId, output })
    if (note && placement === 'after_output') items.push(note)
    return items
  },
}

const chat: Shape = {
  adapter: openaiChat,
  url: new URL('http://edge.test/v1/chat/completions'),
  body: (messages) => ({
    model: 'qwen3',
    messages,
    tools: [{ type: 'function', function: { name: 'shell', description: 'Run a shell command.', parameters: SHELL_SCHEMA } }],
    stream: true,
  }),
  task: () => [
    { role: 'system', content: 'You are a coding agent.' },
    { role: 'user', content: 'Fix the failing test in stats.' },
  ],
  note: (role) => ({ role, content: NOTE }),
  answered: (completionId, reasoning, args, output, note) => {
    const callId = `call_${completionId}_0`
    return [
      {
        role: 'assistant',
        content: null,
        reasoning_content: reasoning,
        tool_calls: [{ id: callId, type: 'function', function: { name: 'shell', arguments: JSON.stringify(args) } }],
      },
      { role: 'tool', tool_call_id: callId, content: output },
      ...(note ? [note] : []),
    ]
  },
}

/** A session of one shell call per turn; the note (with `role`) is inserted after turn `noteAt`'s call. */
function runSession(shape: Shape, note: { turn: number; role: string; placement: Placement } | null): CompletionRecord[] {
  const history: Item[] = shape.task()
  const records: CompletionRecord[] = []
  const parents: Record<number, number | undefined> = {}
  for (let turn = 0; turn < COMMANDS.length; turn++) {
    const parsed = shape.adapter.parseRequest(shape.body(history), shape.url)
    const engineBody = buildEngineRequest(parsed.request, { kind: 'vllm', servedModel: null, maxModelLen: null, promptChars: 0 })
    const options = {
      tools: engineBody.tools ?? null,
      templateKwargs: (engineBody.chat_template_kwargs ?? null) as Record<string, unknown> | null,
    }
    const prompt = qwen.encode(renderChatPrompt(qwen, engineBody.messages, { ...options, addGenerationPrompt: true }).text)
    const completionId = `cmpl_${String(turn).padStart(24, '0')}`
    const reasoning = `\nStep ${turn}: I should run \`${COMMANDS[turn]}\` next.\n`
    const args = { command: COMMANDS[turn]! }
    const sampledTurn = {
      role: 'assistant',
      content: null,
      reasoning,
      tool_calls: [{ id: 'call_0', type: 'function', function: { name: 'shell', arguments: JSON.stringify(args) } }],
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
    const noteItem = note?.turn === turn ? shape.note(note.role) : null
    history.push(
      ...shape.answered(completionId, reasoning, args, `output of ${COMMANDS[turn]}`, noteItem, note?.placement ?? 'after_output'),
    )
  }
  return withDeltas(records, parents)
}

const prefixMerging = (records: CompletionRecord[]): Trajectory =>
  reconstructTrajectory(records, { builder: 'prefix_merging', decode: (ids) => qwen.decode(ids) })
const breaks = (trajectory: Trajectory) => trajectory.traces.map((trace) => trace.metadata?.break_reason ?? null)

describe('mid-conversation system item, real Qwen3 template, default exact preset', () => {
  it('a Responses session without the note is one trace (the baseline)', () => {
    expect(breaks(prefixMerging(runSession(responses, null)))).toEqual([null])
  })

  for (const role of ['developer', 'system']) {
    for (const placement of ['after_output', 'before_output'] as const) {
      it(`Responses: a ${role} note (${placement.replace('_', ' ')}) keeps every earlier turn's reasoning: one trace`, () => {
        const records = runSession(responses, { turn: 1, role, placement })
        const trajectory = prefixMerging(records)
        expect(breaks(trajectory)).toEqual([null])
        expect(trajectory.traces[0]?.metadata?.source_completion_ids).toHaveLength(COMMANDS.length)
        expect(qwen.decode(records[3]!.prompt_token_ids)).toContain('Step 0: I should run `ls` next.')
        expect(qwen.decode(records[2]!.prompt_token_ids)).toContain(
          `output of cat stats/core.py\n</tool_response><|im_end|>\n<|im_start|>system\n${NOTE}<|im_end|>\n${ASSISTANT_HEADER}`,
        )
      })
    }
  }

  it('Chat Completions passes a mid-conversation system message through as is: one trace', () => {
    const records = runSession(chat, { turn: 1, role: 'system', placement: 'after_output' })
    expect(breaks(prefixMerging(records))).toEqual([null])
    expect(qwen.decode(records[2]!.prompt_token_ids)).toContain(`<|im_start|>system\n${NOTE}<|im_end|>`)
  })
})
