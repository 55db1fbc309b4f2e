/**
 * Replayed tool calls put back to their sampled arguments when the harness only filled in schema defaults
 * (Claude Code's `Edit` replay with `"replace_all": false`, recorded in `claude-code-fix-stats.8`), and left as
 * sent for every other difference.
 */
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import type { ResponseMessage } from '../../../src/contract/completion-record.ts'
import {
  restoredToolInputWarning,
  restoreSampledToolInputs,
  toolInputRestoreCandidates,
} from '../../../src/normalize/providers/anthropic/index.ts'
import { parseAnthropicRequest } from '../../../src/normalize/providers/anthropic/anthropic-request.ts'

const FIXTURES = join(import.meta.dirname, '../../../src/normalize/providers/anthropic/__fixtures__')
const EDIT_ID = 'toolu_cmpl_0794d1eaa6544a016260f53d_0'
const SAMPLED_ARGS = '{"file_path": "/w/stats/core.py", "old_string": "a + 1", "new_string": "a - 1"}'

const EDIT_TOOL = {
  name: 'Edit',
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
}

function sampled(args = SAMPLED_ARGS, name = 'Edit'): Map<string, ResponseMessage> {
  return new Map([
    [
      'cmpl_0794d1eaa6544a016260f53d',
      { role: 'assistant', content: null, tool_calls: [{ id: 'c0', type: 'function', function: { name, arguments: args } }] },
    ],
  ])
}

function body(input: Record<string, unknown>, id = EDIT_ID) {
  return {
    model: 'claude-sonnet-4-5',
    max_tokens: 1000,
    tools: [EDIT_TOOL],
    messages: [
      { role: 'user', content: 'fix it' },
      { role: 'assistant', content: [{ type: 'tool_use', id, name: 'Edit', input }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: id, content: 'ok' }] },
    ],
  }
}

const REPLAYED = { replace_all: false, file_path: '/w/stats/core.py', old_string: 'a + 1', new_string: 'a - 1' }

function toolCallArguments(requestBody: unknown): string {
  const parsed = parseAnthropicRequest(requestBody)
  const calls = parsed.request.messages[1]?.tool_calls as { function: { arguments: string } }[] | undefined
  return calls?.[0]?.function.arguments as string
}

describe('restoring replayed tool calls whose harness filled in schema defaults', () => {
  it('the recorded Claude Code session replays its Edit call with replace_all: false the model never wrote', () => {
    const recorded = JSON.parse(readFileSync(join(FIXTURES, 'claude-code-fix-stats.8.request.json'), 'utf8')) as { body: unknown }
    expect(toolInputRestoreCandidates(recorded.body)).toEqual(['cmpl_f16b1fa420498ab3a2eee205'])
    expect(JSON.stringify(recorded.body)).toContain('"name":"Edit","input":{"replace_all":false,"file_path"')
  })

  it('asks only for gateway-issued calls that carry a schema-default value', () => {
    expect(toolInputRestoreCandidates(body(REPLAYED))).toEqual(['cmpl_0794d1eaa6544a016260f53d'])
    expect(toolInputRestoreCandidates(body({ ...REPLAYED, replace_all: true }))).toEqual([])
    expect(toolInputRestoreCandidates(body(REPLAYED, 'toolu_01AbCdEf'))).toEqual([])
    const { replace_all: _omitted, ...withoutDefault } = REPLAYED
    expect(toolInputRestoreCandidates(body(withoutDefault))).toEqual([])
    expect(toolInputRestoreCandidates({ ...body(REPLAYED), tools: [{ ...EDIT_TOOL, input_schema: { type: 'object' } }] })).toEqual([])
  })

  it('sends the call as sampled (key order and all), records a warning, leaves the input body untouched', () => {
    const input = body(REPLAYED)
    const before = JSON.stringify(input)
    const restore = restoreSampledToolInputs(input, sampled())
    expect(restore.restored).toBe(1)
    expect(restore.droppedKeys).toEqual(['replace_all'])
    expect(JSON.stringify(input)).toBe(before)
    expect(toolCallArguments(restore.body)).toBe(JSON.stringify(JSON.parse(SAMPLED_ARGS)))
    expect(toolCallArguments(input)).toBe(JSON.stringify(REPLAYED))
    expect(restoredToolInputWarning(restore)?.code).toBe('tool_input_defaults_dropped')
    expect(restoredToolInputWarning(restore)?.message).toContain('replace_all')
  })

  it('keeps a default the model sampled itself', () => {
    const args = '{"replace_all": false, "file_path": "/w/stats/core.py", "old_string": "a + 1", "new_string": "a - 1"}'
    const restore = restoreSampledToolInputs(body(REPLAYED), sampled(args))
    expect(restore.restored).toBe(0)
    expect(restoredToolInputWarning(restore)).toBeNull()
  })

  it('leaves every other difference as the harness sent it', () => {
    const cases: [string, Record<string, unknown>, Map<string, ResponseMessage>][] = [
      ['an edited argument', { ...REPLAYED, new_string: 'a - 2' }, sampled()],
      ['a dropped argument', { replace_all: false, file_path: '/w/stats/core.py', old_string: 'a + 1' }, sampled()],
      ['an added key without a schema default', { ...REPLAYED, note: 'x' }, sampled()],
      ['another tool at that index', REPLAYED, sampled(SAMPLED_ARGS, 'Write')],
      ['unparseable sampled arguments', REPLAYED, sampled('{"file_path": ')],
      ['no recorded completion', REPLAYED, new Map()],
    ]
    for (const [label, input, recorded] of cases) {
      const restore = restoreSampledToolInputs(body(input), recorded)
      expect(restore.restored, label).toBe(0)
      expect(toolCallArguments(restore.body), label).toBe(JSON.stringify(input))
    }
  })
})
