/**
 * The segment (one trace under construction, `src/reconstruct/segment.ts`) driven directly: the
 * stream it reads back while chaining, how turns, re-sends and empty turns land in the finished
 * trace (ids, mask, logprobs, messages, per-turn metadata), checked against hand-computed traces.
 */
import { describe, expect, it } from 'vitest'
import type { CompletionRecord } from '../../src/contract/completion-record.ts'
import type { DriftState } from '../../src/reconstruct/drift-regions.ts'
import { EMPTY_DRIFT } from '../../src/reconstruct/drift-regions.ts'
import { reconstructTrajectory } from '../../src/reconstruct/index.ts'
import {
  type AppendTurn,
  appendTurn,
  createSegment,
  finalizeSegment,
  replaceTip,
  type Segment,
  streamSlice,
  tipResponseStart,
} from '../../src/reconstruct/segment.ts'
import { makeRecord, type RecordSpec, withDeltas, withPreviousDeltas } from './reconstruct-support/records.ts'

const EOT = 99
const ROOT = { index: 0, chain: 0, origin: 'root', parent: null } as const

const msg = (role: string, content: string) => ({ role, content })
const answer = (content: string) => ({ role: 'assistant' as const, content })

function turn(interStart: number, overrides: Partial<AppendTurn> = {}): AppendTurn {
  return { interStart, firstEot: -1, promptLcp: interStart, drift: EMPTY_DRIFT, boundaryDrift: 0, strictRuleMerge: true, ...overrides }
}

const drift = (byReason: Record<string, number>): DriftState => ({
  regions: [],
  total: Object.values(byReason).reduce((sum, value) => sum + value, 0),
  byReason,
})

/** The record with `prompt_token_ids` behind a getter that counts its reads (a lazily loaded prompt). */
function countingPrompt(spec: RecordSpec): { record: CompletionRecord; reads: () => number } {
  let reads = 0
  const { prompt_token_ids: prompt, ...rest } = makeRecord(spec)
  const record = Object.defineProperty(rest, 'prompt_token_ids', {
    get: () => {
      reads++
      return prompt
    },
    enumerable: true,
  }) as CompletionRecord
  return { record, reads: () => reads }
}

/**
 * Prompt [1, 2, 3]; turn 1 samples [10, 11, EOT]; turn 2 has interstitial [50, 51] and samples
 * [20]; turn 3 has an empty interstitial and an empty response; turn 4 interstitial [60], samples
 * [30, 31, EOT].
 */
function fourTurns(): { segment: Segment; stream: number[] } {
  const p1 = [1, 2, 3]
  const r1 = [10, 11, EOT]
  const p2 = [...p1, ...r1, 50, 51]
  const r2 = [20]
  const p3 = [...p2, ...r2]
  const p4 = [...p3, 60]
  const segment = createSegment(makeRecord({ seq: 0, prompt: p1, response: r1 }), ROOT, EOT)
  appendTurn(segment, makeRecord({ seq: 1, prompt: p2, response: r2 }), turn(p1.length + r1.length))
  appendTurn(segment, makeRecord({ seq: 2, prompt: p3, response: [] }), turn(p3.length))
  appendTurn(segment, makeRecord({ seq: 3, prompt: p4, response: [30, 31, EOT] }), turn(p3.length))
  return { segment, stream: [...p4, 30, 31, EOT] }
}

describe('segment stream', () => {
  it('streamSlice equals the slice of prompt ++ response for every [start, end)', () => {
    const { segment, stream } = fourTurns()
    expect(segment.promptLength + segment.responseLength).toBe(stream.length)
    for (let start = 0; start <= stream.length; start++) {
      for (let end = start; end <= stream.length; end++) {
        expect(streamSlice(segment, start, end), `[${start}, ${end})`).toEqual(stream.slice(start, end))
      }
    }
    expect(tipResponseStart(segment)).toBe(stream.length - 3)
  })

  it('a slice after the first prompt never reads it (it may be loaded lazily)', () => {
    const { record, reads } = countingPrompt({ seq: 0, prompt: [1, 2, 3], response: [10, EOT] })
    const segment = createSegment(record, ROOT, EOT)
    const before = reads()
    expect(streamSlice(segment, 3, 5)).toEqual([10, EOT])
    expect(streamSlice(segment, 4, 5)).toEqual([EOT])
    expect(reads()).toBe(before)
    expect(streamSlice(segment, 2, 4)).toEqual([3, 10])
    expect(reads()).toBe(before + 1)
  })
})

describe('finished trace', () => {
  it('ids, mask and logprobs of turns with empty interstitials and empty responses', () => {
    const { segment } = fourTurns()
    const trace = finalizeSegment(segment, 2)
    expect(trace.prompt_ids).toEqual([1, 2, 3])
    expect(trace.response_ids).toEqual([10, 11, EOT, 50, 51, 20, 60, 30, 31, EOT])
    expect(trace.loss_mask).toEqual([1, 1, 1, 0, 0, 1, 0, 1, 1, 1])
    expect(trace.response_logprobs).toHaveLength(10)
    expect(trace.response_logprobs?.filter((_, i) => trace.loss_mask[i] === 0)).toEqual([0, 0, 0])
    expect(trace.metadata.chain_segment_index).toBe(2)
    expect(
      (trace.metadata.turns as { response_offset: number; response_length: number; interstitial_length: number }[]).map((t) => [
        t.response_offset,
        t.response_length,
        t.interstitial_length,
      ]),
    ).toEqual([
      [0, 3, 0],
      [5, 1, 2],
      [6, 0, 0],
      [7, 3, 1],
    ])
  })

  it('logprobs: an empty response without logprobs lacks none; no trainable token at all → null', () => {
    const withEmpty = createSegment(makeRecord({ seq: 0, prompt: [1], response: [5] }), ROOT, EOT)
    appendTurn(withEmpty, makeRecord({ seq: 1, prompt: [1, 5, 6], response: [], logprobs: null }), turn(2))
    expect(finalizeSegment(withEmpty, 0).response_logprobs).toHaveLength(2)

    // One record, nothing sampled: no logprob to report (Polar: null unless some slot has one).
    const nothing = createSegment(makeRecord({ seq: 0, prompt: [1], response: [], logprobs: [] }), ROOT, EOT)
    expect(finalizeSegment(nothing, 0)).toMatchObject({ response_ids: [], loss_mask: [], response_logprobs: null })

    // Context only (two empty responses around an interstitial): still null, not zeros.
    const contextOnly = createSegment(makeRecord({ seq: 0, prompt: [1], response: [], logprobs: [] }), ROOT, EOT)
    appendTurn(contextOnly, makeRecord({ seq: 1, prompt: [1, 7, 8], response: [], logprobs: [] }), turn(1))
    expect(finalizeSegment(contextOnly, 0)).toMatchObject({ response_ids: [7, 8], loss_mask: [0, 0], response_logprobs: null })
  })

  it('messages: the first prompt, then each sampled message and the new prompt messages in order', () => {
    const m1 = [msg('system', 's'), msg('user', 'u')]
    const a1 = answer('a1')
    const m2 = [...m1, a1, msg('tool', 't1')]
    const a2 = answer('a2')
    const m3 = [...m2, a2, msg('tool', 't2')]
    const segment = createSegment(makeRecord({ seq: 0, prompt: [1], response: [2], messages: m1, responseMessage: a1 }), ROOT, EOT)
    appendTurn(segment, makeRecord({ seq: 1, prompt: [1, 2, 3], response: [4], messages: m2, responseMessage: a2 }), turn(2))
    appendTurn(segment, makeRecord({ seq: 2, prompt: [1, 2, 3, 4, 5], response: [6], messages: m3, responseMessage: null }), turn(4))
    const trace = finalizeSegment(segment, 0)
    expect(trace.prompt_messages).toEqual(m1)
    expect(trace.response_messages).toEqual([a1, msg('tool', 't1'), a2, msg('tool', 't2')])
    // A turn without a sampled message has no message index.
    expect((trace.metadata.turns as { message_index: number }[]).map((t) => t.message_index)).toEqual([0, 2, -1])
  })

  it('per-turn metadata: first turn never a strict-rule merge; dominant drift reason (first of a tie); max drift', () => {
    const segment = createSegment(makeRecord({ seq: 0, prompt: [1], response: [2] }), ROOT, EOT)
    appendTurn(
      segment,
      makeRecord({ seq: 1, prompt: [1, 2, 3], response: [4] }),
      turn(2, { drift: drift({ system_edit: 1, thinking_rewrite: 3, history_edit: 3 }), boundaryDrift: 2 }),
    )
    appendTurn(segment, makeRecord({ seq: 2, prompt: [1, 2, 3, 4, 5], response: [6] }), turn(4, { drift: drift({ system_edit: 2 }) }))
    const trace = finalizeSegment(segment, 0)
    expect(trace.metadata.turns).toMatchObject([
      { strict_rule_merge: false, context_drift_tokens: 0, drift_reason: null, drift_by_reason: {} },
      {
        strict_rule_merge: true,
        context_drift_tokens: 7,
        boundary_drift_tokens: 2,
        drift_reason: 'thinking_rewrite',
        drift_by_reason: { system_edit: 1, thinking_rewrite: 3, history_edit: 3 },
      },
      { context_drift_tokens: 2, drift_reason: 'system_edit' },
    ])
    expect(trace.metadata.context_drift_tokens_max).toBe(7)
    expect(trace.metadata.trained_tokens_under_drift).toBe(2)
  })

  it('metadata: the first record’s, each record’s as completion_metadata; break and retry keys only when set', () => {
    const root = createSegment(
      makeRecord({ seq: 0, prompt: [1], response: [2], metadata: { task_id: 't', n: 0 } }),
      { ...ROOT, index: 3, chain: 1 },
      EOT,
    )
    appendTurn(root, makeRecord({ seq: 1, prompt: [1, 2, 3], response: [4], metadata: { task_id: 't', n: 1 } }), turn(2))
    const trace = finalizeSegment(root, 0)
    expect(trace.metadata).toMatchObject({ task_id: 't', n: 0, chain_index: 1, break_reason: null, branch: null })
    expect(trace.metadata.completion_metadata).toEqual([
      { task_id: 't', n: 0 },
      { task_id: 't', n: 1 },
    ])
    expect(trace.metadata).not.toHaveProperty('break_detail')
    expect(trace.metadata).not.toHaveProperty('retry')

    const broken = createSegment(
      makeRecord({ seq: 2, prompt: [9], response: [2] }),
      { index: 1, chain: 1, origin: 'break', parent: 0, breakReason: 'compaction', breakDetail: { x: 1 }, retryInfo: { retry_of: 'a' } },
      EOT,
    )
    expect(finalizeSegment(broken, 1).metadata).toMatchObject({
      break_reason: 'compaction',
      break_detail: { x: 1 },
      retry: { retry_of: 'a' },
    })
  })

  it('first end-of-turn index of the tip prompt: -1 without an end-of-turn token', () => {
    const record = makeRecord({ seq: 0, prompt: [1, EOT, 2, EOT], response: [3] })
    expect(createSegment(record, ROOT, EOT).tipFirstEot).toBe(1)
    expect(createSegment(record, ROOT, 7).tipFirstEot).toBe(-1)
    expect(createSegment(record, ROOT, null).tipFirstEot).toBe(-1)
  })
})

describe('re-send replacing the tip', () => {
  /** Turn 1 [1] → [2, 3, EOT] (with a message), turn 2 [1, 2, 3, EOT, 4] → [5, 6, EOT] without logprobs. */
  function twoTurnSegment(): Segment {
    const segment = createSegment(makeRecord({ seq: 0, prompt: [1], response: [2, 3, EOT], messages: [msg('user', 'u')] }), ROOT, EOT)
    appendTurn(
      segment,
      makeRecord({
        seq: 1,
        prompt: [1, 2, 3, EOT, 4],
        response: [5, 6, EOT],
        logprobs: null,
        messages: [msg('user', 'u'), msg('assistant', 'answer 0'), msg('tool', 't')],
      }),
      turn(4),
    )
    return segment
  }

  it('a later turn: its sampled tokens, message and logprobs replaced; the trace prompt kept', () => {
    const segment = twoTurnSegment()
    expect(finalizeSegment(segment, 0).response_logprobs).toBeNull()
    const resend = makeRecord({
      seq: 2,
      prompt: [1, 2, 3, EOT, 4],
      response: [7],
      logprobs: [-0.5],
      messages: [msg('user', 'u'), msg('assistant', 'answer 0'), msg('tool', 't')],
    })
    const replaced = replaceTip(segment, resend)
    expect(replaced.seq).toBe(1)
    const trace = finalizeSegment(segment, 0)
    expect(trace.prompt_ids).toEqual([1])
    expect(trace.response_ids).toEqual([2, 3, EOT, 4, 7])
    expect(trace.loss_mask).toEqual([1, 1, 1, 0, 1])
    expect(trace.response_logprobs).toEqual([...makeRecord({ seq: 0, prompt: [], response: [2, 3, EOT] }).response_logprobs!, 0, -0.5])
    expect(trace.response_messages).toEqual([msg('assistant', 'answer 0'), msg('tool', 't'), msg('assistant', 'answer 2')])
    expect(trace.metadata.source_completion_ids).toEqual(['msg_000000000000', 'msg_000000000002'])
    expect(trace.metadata.turns).toMatchObject([
      {},
      { seq: 2, response_offset: 4, response_length: 1, interstitial_length: 1, message_index: 2 },
    ])

    // The next turn continues after the re-send: its new prompt messages are appended once.
    appendTurn(
      segment,
      makeRecord({
        seq: 3,
        prompt: [1, 2, 3, EOT, 4, 7, 8],
        response: [9],
        messages: [msg('user', 'u'), msg('assistant', 'answer 0'), msg('tool', 't'), msg('assistant', 'answer 2'), msg('tool', 't2')],
      }),
      turn(6),
    )
    expect(finalizeSegment(segment, 0).response_messages).toEqual([
      msg('assistant', 'answer 0'),
      msg('tool', 't'),
      msg('assistant', 'answer 2'),
      msg('tool', 't2'),
      msg('assistant', 'answer 3'),
    ])
  })

  it('a re-send without a message drops the replaced one; a message-less tip replaced by one with a message', () => {
    const segment = twoTurnSegment()
    replaceTip(segment, makeRecord({ seq: 2, prompt: [1, 2, 3, EOT, 4], response: [7], responseMessage: null }))
    expect(finalizeSegment(segment, 0).response_messages).toEqual([msg('assistant', 'answer 0'), msg('tool', 't')])
    replaceTip(segment, makeRecord({ seq: 3, prompt: [1, 2, 3, EOT, 4], response: [8] }))
    expect(finalizeSegment(segment, 0).response_messages).toEqual([
      msg('assistant', 'answer 0'),
      msg('tool', 't'),
      msg('assistant', 'answer 3'),
    ])
  })

  it('the first turn: the re-send’s prompt becomes the trace prompt, drift reset', () => {
    const segment = createSegment(makeRecord({ seq: 0, prompt: [1, 2], response: [3, EOT] }), ROOT, EOT)
    replaceTip(segment, makeRecord({ seq: 1, prompt: [1, 5], response: [4], responseMessage: answer('x') }), {
      state: drift({ system_edit: 1 }),
      boundaryDrift: 1,
      firstEot: 6,
    })
    const trace = finalizeSegment(segment, 0)
    expect(trace).toMatchObject({ prompt_ids: [1, 5], response_ids: [4], loss_mask: [1], response_messages: [msg('assistant', 'x')] })
    expect(trace.metadata.turns).toMatchObject([{ seq: 1, context_drift_tokens: 0, boundary_drift_tokens: 0, drift_by_reason: {} }])
    expect(segment.tipFirstEot).toBe(6)
    expect(streamSlice(segment, 0, 3)).toEqual([1, 5, 4])
  })

  it('a re-send with edits (a fresh nonce): its drift replaces the tip’s, and so does its first end-of-turn index', () => {
    const segment = twoTurnSegment()
    replaceTip(segment, makeRecord({ seq: 2, prompt: [1, 2, 3, EOT, 4], response: [7] }), {
      state: drift({ history_edit: 1, system_edit: 2 }),
      boundaryDrift: 3,
      firstEot: 3,
    })
    expect(segment.tipFirstEot).toBe(3)
    expect(segment.drift.total).toBe(3)
    expect(finalizeSegment(segment, 0).metadata.turns).toMatchObject([
      {},
      {
        context_drift_tokens: 3,
        boundary_drift_tokens: 3,
        drift_reason: 'system_edit',
        drift_by_reason: { history_edit: 1, system_edit: 2 },
      },
    ])
  })
})

describe('through the builder', () => {
  it('keep_last re-send of a later turn with a shorter answer: the chain holds only the re-send', () => {
    const p1 = [1, 2, 3]
    const p2 = [1, 2, 3, 10, 11, EOT, 50]
    const records = withDeltas(
      [
        makeRecord({ seq: 0, prompt: p1, response: [10, 11, EOT] }),
        makeRecord({ seq: 1, prompt: p2, response: [20, 21, 22, EOT], logprobs: null }),
        makeRecord({ seq: 2, prompt: p2, response: [23, EOT] }),
      ],
      { 1: 0, 2: 1 },
    )
    const trajectory = reconstructTrajectory(records, { builder: 'prefix_merging', config: { end_of_turn_token_id: EOT } })
    const [main, superseded] = trajectory.traces
    expect(main).toMatchObject({
      prompt_ids: p1,
      response_ids: [10, 11, EOT, 50, 23, EOT],
      loss_mask: [1, 1, 1, 0, 1, 1],
      response_messages: [
        { role: 'assistant', content: 'answer 0' },
        { role: 'assistant', content: 'answer 2' },
      ],
    })
    expect(main?.response_logprobs).toHaveLength(6)
    expect(superseded).toMatchObject({ prompt_ids: p2, response_ids: [20, 21, 22, EOT], response_logprobs: null })
  })

  it('no end-of-turn token: a prompt sharing less than half of the tip’s is a new chain, more stays in it', () => {
    const p1 = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
    const session = (p2: number[]) =>
      withPreviousDeltas([
        makeRecord({ seq: 0, prompt: p1, response: [31], finish: 'length' }),
        makeRecord({ seq: 1, prompt: p2, response: [32], finish: 'length' }),
      ])
    const chains = (p2: number[]) => {
      const trajectory = reconstructTrajectory(session(p2), { builder: 'prefix_merging', config: { preset: 'tolerant' } })
      expect(trajectory.metadata.reconstruction).toMatchObject({ end_of_turn_token_id: null })
      return trajectory.traces.map((trace) => [trace.metadata.chain_index, trace.metadata.break_reason])
    }
    expect(chains([1, 2, 3, ...p1.map((t) => t + 100)])).toEqual([
      [0, null],
      [1, null],
    ])
    expect(chains([1, 2, 3, 4, 5, 6, ...p1.map((t) => t + 100)])).toEqual([
      [0, null],
      [0, 'eot_unavailable'],
    ])
  })
})
