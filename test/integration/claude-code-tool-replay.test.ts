/**
 * Claude Code replays a sampled `Edit` call with its schema default filled in (`"replace_all": false`
 * first, a key the model never wrote). Through the real edge (`wrangler dev`, the session Durable Object)
 * and the stand-in engine (real Qwen3 template, `script` policy): the second call's engine prompt must
 * hold the call as sampled — so it extends the first prompt + sampled tokens and the default `exact`
 * preset merges both turns into one trace — the completion names the restore in a warning, and the
 * harness's own bytes stay the recorded `original_request`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ADMIN_TOKEN, type Stack, startStack } from '../support/stack.ts'

const SAMPLED = { file_path: '/w/stats/core.py', old_string: 'a + 1', new_string: 'a - 1' }
const TOOLS = [
  {
    name: 'Edit',
    description: 'Replace a string in a file.',
    input_schema: {
      type: 'object',
      properties: {
        file_path: { type: 'string' },
        old_string: { type: 'string' },
        new_string: { type: 'string' },
        replace_all: { type: 'boolean', default: false },
      },
      required: ['file_path', 'old_string', 'new_string'],
    },
  },
]

let stack: Stack
beforeAll(async () => {
  stack = await startStack({
    policy: 'script',
    script: [{ reasoning: 'The sum should subtract.', tool_calls: [{ name: 'Edit', arguments: SAMPLED }] }, { content: 'Fixed.' }],
  })
})
afterAll(async () => {
  await stack?.stop()
})

async function messages(token: string, history: unknown[]) {
  const response = await fetch(`${stack.edge.url}/v1/messages?beta=true`, {
    method: 'POST',
    headers: { 'x-api-key': token, 'anthropic-version': '2023-06-01', 'content-type': 'application/json' },
    body: JSON.stringify({
      model: 'claude-sonnet-4-5',
      max_tokens: 2000,
      thinking: { type: 'enabled', budget_tokens: 1000 },
      system: [{ type: 'text', text: 'You are Claude Code.' }],
      tools: TOOLS,
      messages: history,
    }),
  })
  expect(response.status).toBe(200)
  return (await response.json()) as { content: { type: string; id?: string; input?: unknown }[] }
}

async function trajectory(sessionId: string) {
  const response = await fetch(`${stack.edge.url}/v1/sessions/${sessionId}/trajectory?builder=prefix_merging`, {
    headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
  })
  return (await response.json()) as { traces: { metadata: { break_reason: string | null; source_completion_ids: string[] } }[] }
}

describe('Claude Code replaying a sampled tool call with a schema default filled in', () => {
  it('sends the call to the engine as sampled, warns, keeps the harness bytes, and merges under exact', async () => {
    const session = await stack.createSession()
    const task = { role: 'user', content: [{ type: 'text', text: 'Fix stats/core.py.' }] }
    const first = await messages(session.token, [task])
    const call = first.content.find((block) => block.type === 'tool_use')
    expect(call?.input).toEqual(SAMPLED)
    // Claude Code's replay: the parsed input with the schema default first.
    const replayed = first.content.map((block) =>
      block.type === 'tool_use' ? { ...block, input: { replace_all: false, ...SAMPLED } } : block,
    )
    const second = await messages(session.token, [
      task,
      { role: 'assistant', content: replayed },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: call?.id, content: 'The file has been updated.' }] },
    ])
    expect(JSON.stringify(second.content)).toContain('Fixed.')

    const records = await stack.completions(session.session_id)
    expect(records).toHaveLength(2)
    type Replay = {
      warnings: { code: string }[]
      request: { messages: { role: string; tool_calls?: { function: { arguments: string } }[] }[] }
      original_request: { messages: { content: { type: string; input?: unknown }[] }[] }
    }
    const replay = records[1] as unknown as Replay
    expect(replay.warnings.map((warning) => warning.code)).toContain('tool_input_defaults_dropped')
    const sentArguments = replay.request.messages.find((message) => message.role === 'assistant')?.tool_calls?.[0]?.function.arguments
    expect(JSON.parse(sentArguments ?? 'null')).toEqual(SAMPLED)
    expect(Object.keys(JSON.parse(sentArguments ?? '{}'))).toEqual(Object.keys(SAMPLED))
    expect(replay.original_request.messages[1]?.content.find((block) => block.type === 'tool_use')?.input).toEqual({
      replace_all: false,
      ...SAMPLED,
    })

    const merged = await trajectory(session.session_id)
    expect(merged.traces.map((trace) => trace.metadata.break_reason)).toEqual([null])
    expect(merged.traces[0]?.metadata.source_completion_ids).toHaveLength(2)
  })
})
