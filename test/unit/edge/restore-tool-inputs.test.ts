/**
 * The edge step that restores Claude Code's replayed tool calls: asks the session only for completions it has
 * not read yet (a long session reads each replayed call once per isolate, not on every call), never when no
 * replayed call carries a schema-default value, and keeps sessions apart.
 */
import { beforeEach, describe, expect, it } from 'vitest'
import type { ResponseMessage } from '../../../src/contract/completion-record.ts'
import { clearRestoreCache, restoreReplayedToolInputs } from '../../../src/worker/pipeline/restore-tool-inputs.ts'

const SAMPLED = { file_path: '/w/a.py', old_string: 'x', new_string: 'y' }
const EDIT = {
  name: 'Edit',
  input_schema: {
    type: 'object',
    properties: { file_path: {}, old_string: {}, new_string: {}, replace_all: { type: 'boolean', default: false } },
  },
}

function completionId(n: number) {
  return `cmpl_${String(n).padStart(24, '0')}`
}

/** A Claude Code-shaped body replaying `calls` Edit calls, each with the default filled in. */
function body(calls: number, replaceAll = false) {
  const messages: unknown[] = [{ role: 'user', content: 'go' }]
  for (let n = 0; n < calls; n++) {
    const id = `toolu_${completionId(n)}_0`
    messages.push({ role: 'assistant', content: [{ type: 'tool_use', id, name: 'Edit', input: { replace_all: replaceAll, ...SAMPLED } }] })
    messages.push({ role: 'user', content: [{ type: 'tool_result', tool_use_id: id, content: 'ok' }] })
  }
  return { model: 'm', max_tokens: 10, tools: [EDIT], messages }
}

function session() {
  const asked: string[][] = []
  return {
    asked,
    async responseMessages(ids: string[]): Promise<Record<string, ResponseMessage>> {
      asked.push(ids)
      const call = { id: 'c', type: 'function' as const, function: { name: 'Edit', arguments: JSON.stringify(SAMPLED) } }
      return Object.fromEntries(ids.map((id) => [id, { role: 'assistant' as const, content: null, tool_calls: [call] }]))
    },
  }
}

const inputs = (restored: unknown) =>
  (restored as { messages: { role: string; content: { input?: unknown }[] }[] }).messages
    .filter((message) => message.role === 'assistant')
    .map((message) => message.content[0]?.input)

beforeEach(() => clearRestoreCache())

describe('restoreReplayedToolInputs', () => {
  it('reads each replayed completion once per isolate, restores every call, names it in a warning', async () => {
    const rpc = session()
    const first = await restoreReplayedToolInputs(body(2), 'sess-a', rpc)
    const second = await restoreReplayedToolInputs(body(3), 'sess-a', rpc)
    expect(rpc.asked).toEqual([[completionId(0), completionId(1)], [completionId(2)]])
    expect(inputs(first.body)).toEqual([SAMPLED, SAMPLED])
    expect(inputs(second.body)).toEqual([SAMPLED, SAMPLED, SAMPLED])
    expect(second.warning?.code).toBe('tool_input_defaults_dropped')
  })

  it('keeps sessions apart and asks nothing when no replayed call carries a default value', async () => {
    const rpc = session()
    await restoreReplayedToolInputs(body(1), 'sess-a', rpc)
    await restoreReplayedToolInputs(body(1), 'sess-b', rpc)
    expect(rpc.asked).toHaveLength(2)
    const untouched = body(2, true)
    const result = await restoreReplayedToolInputs(untouched, 'sess-c', rpc)
    expect(rpc.asked).toHaveLength(2)
    expect(result).toEqual({ body: untouched, warning: null })
  })
})
