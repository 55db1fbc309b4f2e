/**
 * Replayed-turn restore end to end (engine + `wrangler dev`, official `openai` SDK): the engine samples
 * `content\n<tool_call>…` (vLLM's hermes parser leaves the newline in `content`); the harness sends the answer
 * back verbatim. Without the restore the Qwen3 template renders `content\n\n<tool_call>`, one token the model
 * never sampled, and the default `exact` preset splits the session. With it the next prompt contains the sampled
 * ids verbatim, the record carries `replay_restored`, the session is one trace, and the client saw exactly what
 * the engine answered (self-describing tool-call ids aside).
 */
import { spawn } from 'node:child_process'
import { join } from 'node:path'
import OpenAI from 'openai'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Trajectory } from '../../src/contract/trajectory.ts'
import { childOutput } from '../support/child-output.ts'
import { ADMIN_TOKEN, type Stack, startStack } from '../support/stack.ts'

const TOOLS: OpenAI.Chat.Completions.ChatCompletionTool[] = [
  {
    type: 'function',
    function: {
      name: 'bash',
      description: 'Run a shell command.',
      parameters: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] },
    },
  },
]
const SCRIPT = [
  { reasoning: 'Look first.', content: 'Listing the files.', tool_calls: [{ name: 'bash', arguments: { command: 'ls' } }] },
  { reasoning: 'Now the tests.', tool_calls: [{ name: 'bash', arguments: { command: 'pytest -q' } }] },
  { reasoning: 'Done.', content: 'All tests pass.' },
]

let stack: Stack
let client: OpenAI
let sessionId: string

beforeAll(async () => {
  stack = await startStack({ policy: 'script', script: SCRIPT })
  const session = await stack.createSession({ task_id: 'replay-restore' })
  sessionId = session.session_id
  client = new OpenAI({ baseURL: session.base_urls.openai, apiKey: session.token, maxRetries: 0 })
})

afterAll(async () => {
  await stack?.stop()
})

async function trajectory(config?: Record<string, unknown>): Promise<Trajectory> {
  const query = config ? `&config=${encodeURIComponent(JSON.stringify(config))}` : ''
  const response = await fetch(`${stack.edge.url}/v1/sessions/${sessionId}/trajectory?builder=prefix_merging${query}`, {
    headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
  })
  expect(response.status).toBe(200)
  return (await response.json()) as Trajectory
}

/** Drive the script through `client` as a harness does: answers re-sent verbatim, arguments re-serialized like qwen_code. */
async function driveScript(openai: OpenAI, compactArguments = false): Promise<void> {
  const messages: OpenAI.Chat.Completions.ChatCompletionMessageParam[] = [
    { role: 'system', content: 'You are a coding agent.' },
    { role: 'user', content: 'Fix the tests.' },
  ]
  for (let turn = 0; turn < SCRIPT.length; turn++) {
    const answer = await openai.chat.completions.create({ model: 'm', messages, tools: TOOLS })
    const message = answer.choices[0]!.message
    const calls = message.tool_calls?.map((call) =>
      compactArguments && call.type === 'function'
        ? { ...call, function: { ...call.function, arguments: JSON.stringify(JSON.parse(call.function.arguments)) } }
        : call,
    )
    messages.push({ ...message, ...(calls ? { tool_calls: calls } : {}) } as OpenAI.Chat.Completions.ChatCompletionMessageParam)
    for (const call of message.tool_calls ?? []) messages.push({ role: 'tool', tool_call_id: call.id, content: 'ok' })
  }
}

/** `rollgate replay` as a process against the stack's edge. */
function rollgateReplay(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [join(import.meta.dirname, '../../cli/rollgate.ts'), 'replay', ...args], {
    env: { ...process.env, ROLLGATE_EDGE_URL: stack.edge.url, ROLLGATE_ADMIN_TOKEN: ADMIN_TOKEN },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  return childOutput(child)
}

describe('replayed turns restored to their sampled form', () => {
  it('keeps a verbatim tool-using session one trace under the default exact preset', async () => {
    const messages: OpenAI.Chat.Completions.ChatCompletionMessageParam[] = [
      { role: 'system', content: 'You are a coding agent.' },
      { role: 'user', content: 'Fix the tests.' },
    ]
    for (let turn = 0; turn < SCRIPT.length; turn++) {
      const answer = await client.chat.completions.create({ model: 'm', messages, tools: TOOLS })
      const message = answer.choices[0]!.message
      messages.push(message as OpenAI.Chat.Completions.ChatCompletionMessageParam)
      for (const call of message.tool_calls ?? []) messages.push({ role: 'tool', tool_call_id: call.id, content: 'ok' })
    }
    const records = await stack.completions(sessionId)
    expect(records).toHaveLength(3)
    const [first, second, third] = records as [(typeof records)[0], (typeof records)[0], (typeof records)[0]]
    // What the client got is the engine's parse (content keeps the newline before <tool_call>), with our ids.
    const firstAnswer = messages[2] as OpenAI.Chat.Completions.ChatCompletionAssistantMessageParam
    expect(firstAnswer.content).toBe(first.response_message.content)
    expect(firstAnswer.content).toMatch(/Listing the files\.\n$/)
    expect(firstAnswer.tool_calls?.[0]?.id).toBe(`call_${first.completion_id}_0`)
    // The next prompts continue the sampled ids verbatim.
    expect(second.prompt_token_ids.slice(0, first.prompt_token_ids.length + first.response_token_ids.length)).toEqual([
      ...first.prompt_token_ids,
      ...first.response_token_ids,
    ])
    const warnings = (record: (typeof records)[0]) => (record as unknown as { warnings: { code: string; message: string }[] }).warnings
    expect(warnings(first).map((w) => w.code)).not.toContain('replay_restored')
    expect(warnings(second)).toContainEqual({
      code: 'replay_restored',
      message: `restored 1 replayed assistant turn(s) to their sampled form: message 2 (${first.completion_id}): content_separator`,
    })
    // The engine body carries the restored turn; the harness's own request is kept as it was sent.
    const restored = second.request.messages[2] as { content: string }
    expect(restored.content).toBe(String(first.response_message.content).slice(0, -1))
    const original = second.original_request as { messages: { content: string }[] }
    expect(original.messages[2]!.content).toBe(first.response_message.content)
    expect(warnings(third).filter((w) => w.code === 'replay_restored')).toHaveLength(1)

    const merged = await trajectory()
    expect(merged.traces).toHaveLength(1)
    expect(merged.metadata.reconstruction_stats).toMatchObject({ turns_mergeable: 2, turns_continued: 2, mergeable_merged_ratio: 1 })
  })

  it('rollgate replay restores the same turns in the new session (tool-call ids mapped to its completions)', async () => {
    const session = await stack.createSession({ task_id: 'replay-restore-cli' })
    await driveScript(new OpenAI({ baseURL: session.base_urls.openai, apiKey: session.token, maxRetries: 0 }), true)
    const recorded = await stack.completions(session.session_id)
    const restoredIn = (record: (typeof recorded)[0]) =>
      (record as unknown as { warnings: { code: string; message: string }[] }).warnings.find((w) => w.code === 'replay_restored')?.message
    expect(restoredIn(recorded[1]!)).toMatch(/message 2 \(cmpl_\w+\): arguments, content_separator$/)

    const replay = await rollgateReplay([session.session_id, '--strict', '--json'])
    expect(replay.stderr).toBe('')
    const summary = JSON.parse(replay.stdout) as { replay_session: string; prompts_equal: number; diffs: { prompt_cause?: string }[] }
    // The recorded requests name the recorded session's completions; replayed with those ids the edge found no
    // sampled turn, left `content\n` + compact arguments as sent, and calls #1 and #2 differed.
    expect(summary.diffs.map((diff) => diff.prompt_cause ?? null)).toEqual([null, null, null])
    expect(summary).toMatchObject({ calls: 3, prompts_equal: 3, responses_equal: 3 })
    expect(replay.code).toBe(0)
    const replayed = await stack.completions(summary.replay_session)
    expect(replayed.map((record) => restoredIn(record)?.replace(/\(cmpl_\w+\)/g, ''))).toEqual(
      recorded.map((record) => restoredIn(record)?.replace(/\(cmpl_\w+\)/g, '')),
    )
  })
})
