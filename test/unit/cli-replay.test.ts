/**
 * `rollgate replay`'s pure parts: the gateway-derived ids of a recorded request renamed to the replayed
 * session's completions, and the explanation of a prompt that differs.
 */
import { describe, expect, it } from 'vitest'
import { diffRecords, explainPromptDivergence, mapGatewayIds } from '../../cli/lib/replay.ts'

const ids = new Map([
  ['cmpl_old1', 'cmpl_new1'],
  ['cmpl_old_2', 'cmpl_new2'],
])

describe('mapGatewayIds', () => {
  it('renames tool-call ids of every API and previous_response_id, nothing else', () => {
    const body = {
      previous_response_id: 'resp_cmpl_old1',
      messages: [
        {
          role: 'assistant',
          content: 'call_cmpl_old1_0 is quoted here',
          tool_calls: [{ id: 'call_cmpl_old1_0' }, { id: 'call_cmpl_old_2_13' }],
        },
        { role: 'tool', tool_call_id: 'call_cmpl_old1_0', content: 'ok' },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_cmpl_old1_1' }] },
      ],
      input: [{ type: 'function_call', id: 'fc_cmpl_old1_0', call_id: 'call_cmpl_old1_0' }, { id: 'ctc_cmpl_old_2_0' }],
      other: ['call_cmpl_unknown_0', 'call_abc', 'resp_cmpl_old1'],
    }
    expect(mapGatewayIds(body, ids)).toEqual({
      previous_response_id: 'resp_cmpl_new1',
      messages: [
        {
          role: 'assistant',
          content: 'call_cmpl_old1_0 is quoted here',
          tool_calls: [{ id: 'call_cmpl_new1_0' }, { id: 'call_cmpl_new2_13' }],
        },
        { role: 'tool', tool_call_id: 'call_cmpl_new1_0', content: 'ok' },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_cmpl_new1_1' }] },
      ],
      input: [{ type: 'function_call', id: 'fc_cmpl_new1_0', call_id: 'call_cmpl_new1_0' }, { id: 'ctc_cmpl_new2_0' }],
      other: ['call_cmpl_unknown_0', 'call_abc', 'resp_cmpl_old1'],
    })
    const untouched = { messages: [{ role: 'user', content: 'hi' }] }
    expect(mapGatewayIds(untouched, ids)).toBe(untouched)
  })
})

const record = (over: Record<string, unknown>) =>
  ({
    seq: 3,
    api: 'openai-chat',
    agent: 'main',
    stream: false,
    model_requested: 'm',
    original_request: {},
    prompt_token_ids: [1, 2, 3],
    response_token_ids: [4],
    status: 'ok',
    completion_id: 'cmpl_x',
    request: { messages: [{ role: 'user', content: 'a' }] },
    warnings: [],
    ...over,
  }) as Parameters<typeof diffRecords>[0]

describe('explainPromptDivergence', () => {
  it('names the message, field, one-sided restore and earlier differing answers', () => {
    const recorded = record({
      request: {
        messages: [
          { role: 'user', content: 'a' },
          { role: 'assistant', content: 'x', tool_calls: [] },
        ],
      },
      warnings: [
        {
          code: 'replay_restored',
          message: 'restored 1 replayed assistant turn(s) to their sampled form: message 1 (cmpl_a): content_separator',
        },
      ],
    })
    const replayed = record({
      prompt_token_ids: [1, 2, 9],
      request: {
        messages: [
          { role: 'user', content: 'a' },
          { role: 'assistant', content: 'x\n', tool_calls: [] },
        ],
      },
    })
    expect(explainPromptDivergence(recorded, replayed, [1])).toBe(
      'engine-body message 1 (assistant) differs in content; replayed-turn restore differs (recorded: restored 1 replayed assistant turn(s) ' +
        'to their sampled form: message 1: content_separator; replay: none); the engine answered call(s) #1 differently in the replay, ' +
        'and this request re-sends the recorded answer (inherent unless the engine is deterministic)',
    )
    expect(diffRecords(recorded, replayed, undefined, [1])).toMatchObject({ prompt_equal: false, prompt_divergence: 2 })
    expect(diffRecords(recorded, record({}), undefined, [1]).prompt_cause).toBeUndefined()
    expect(explainPromptDivergence(record({}), record({ prompt_token_ids: [0] }), [])).toMatch(/^same engine body and restores/)
  })
})
