/**
 * Hand-checked cases for each break reason and branch label, on a tiny ChatML-like template:
 * EOT = 99, `<think>` = 90, `</think>` = 91, `<|im_start|>` = 1, roles 2–5, newline 6.
 */
import { describe, expect, it } from 'vitest'
import type { CompletionRecord } from '../../src/contract/completion-record.ts'
import type { Trace, Trajectory } from '../../src/contract/trajectory.ts'
import { parsePrefixMergingConfig } from '../../src/reconstruct/config.ts'
import { type PrefixMergingConfigInput, reconstructTrajectory } from '../../src/reconstruct/index.ts'
import { startPrefixMerging } from '../../src/reconstruct/prefix-merging.ts'
import { checkInvariants } from './reconstruct-support/invariants.ts'
import { makeRecord, withBestDeltas, withDeltas, withPreviousDeltas } from './reconstruct-support/records.ts'

const EOT = 99
/** System turn with a two-token nonce slot and enough fixed text after it to re-synchronize. */
const system = (nonce: [number, number] = [71, 72]) => [1, 2, 6, 11, ...nonce, ...range(200, 214), EOT, 6]
const user = (...content: number[]) => [1, 3, 6, ...content, EOT, 6]
const tool = (...content: number[]) => [1, 5, 6, ...content, EOT, 6]
const gen = (scaffold = false) => [1, 4, 6, ...(scaffold ? [90, 91] : [])]
/** The assistant turn as the template replays it in history. */
const asst = (...content: number[]) => [1, 4, 6, ...content, EOT, 6]
function range(from: number, to: number): number[] {
  return Array.from({ length: to - from }, (_, i) => from + i)
}

/** These cases exercise merging within the drift bound: the `tolerant` preset (the default is `exact`). */
const THINK: PrefixMergingConfigInput = { preset: 'tolerant', think_token_ids: [90, 91] }

function build(records: CompletionRecord[], config: PrefixMergingConfigInput = {}, decode?: (ids: number[]) => string): Trajectory {
  const trajectory = reconstructTrajectory(records, {
    builder: 'prefix_merging',
    config: { ...THINK, ...config },
    ...(decode === undefined ? {} : { decode }),
  })
  const max = (config.max_context_drift_tokens ?? 64) as number
  checkInvariants(records, trajectory, { maxContextDrift: max })
  return trajectory
}

const turnsOf = (trace: Trace | undefined) =>
  (trace?.metadata.turns ?? []) as {
    completion_id: string
    context_drift_tokens: number
    boundary_drift_tokens: number
    drift_reason: string | null
    drift_by_reason: Record<string, number>
  }[]

/** Two-turn session where turn 2's prompt is `P1 + replay + tool result + gen`. */
function twoTurns(options: { prompt1: number[]; response1: number[]; prompt2: number[]; response2?: number[]; finish1?: string }) {
  return withPreviousDeltas([
    makeRecord({
      seq: 0,
      prompt: options.prompt1,
      response: options.response1,
      finish: options.finish1 ?? 'tool_calls',
    }),
    makeRecord({ seq: 1, prompt: options.prompt2, response: options.response2 ?? [51, EOT] }),
  ])
}

describe('break reasons (merge within the drift bound, split beyond it)', () => {
  const scaffoldSession = twoTurns({
    prompt1: [...system(), ...user(21, 22), ...gen(true)],
    response1: [31, 32, EOT],
    prompt2: [...system(), ...user(21, 22), ...asst(31, 32), ...tool(41), ...gen(true)],
  })

  it('thinking_rewrite: empty-think scaffold dropped from the replayed turn', () => {
    const merged = build(scaffoldSession)
    expect(merged.traces).toHaveLength(1)
    expect(merged.traces[0]?.response_ids).toEqual([31, 32, EOT, 6, ...tool(41), ...gen(true), 51, EOT])
    expect(merged.traces[0]?.loss_mask).toEqual([1, 1, 1, ...new Array(12).fill(0), 1, 1])
    expect(turnsOf(merged.traces[0])[1]).toMatchObject({
      context_drift_tokens: 2,
      drift_reason: 'thinking_rewrite',
    })

    const split = build(scaffoldSession, { max_context_drift_tokens: 1 })
    expect(split.traces).toHaveLength(2)
    expect(split.traces[1]?.metadata).toMatchObject({
      branch: 'main',
      break_reason: 'thinking_rewrite',
      chain_segment_index: 1,
      break_detail: { context_drift_tokens: 2, max_context_drift_tokens: 1 },
    })
  })

  it('thinking_rewrite: reasoning sampled but not replayed (thinking on)', () => {
    const records = twoTurns({
      prompt1: [...system(), ...user(21)],
      response1: [90, 61, 62, 63, 91, 31, EOT],
      prompt2: [...system(), ...user(21), ...asst(31), ...tool(41), ...gen()],
    })
    // prompt1 has no generation prompt of its own here; the replay starts right after it.
    records[0] = {
      ...(records[0] as CompletionRecord),
      prompt_token_ids: [...system(), ...user(21), ...gen()],
    }
    const fixed = withPreviousDeltas(records)
    expect(turnsOf(build(fixed).traces[0])[1]).toMatchObject({
      context_drift_tokens: 5,
      drift_reason: 'thinking_rewrite',
    })
    expect(build(fixed, { max_context_drift_tokens: 4 }).traces[1]?.metadata.break_reason).toBe('thinking_rewrite')
  })

  const retokenized = twoTurns({
    prompt1: [...system(), ...user(21), ...gen()],
    response1: [31, 1032, 2032, 33, EOT],
    prompt2: [...system(), ...user(21), ...asst(31, 32, 33), ...tool(41), ...gen()],
  })
  const decodeSame = (ids: number[]) => ids.map((id) => ({ 1032: 'ab', 2032: 'cd', 32: 'abcd' })[id] ?? `<${id}>`).join('')
  const decodeOther = (ids: number[]) => ids.map((id) => `<${id}>`).join('')

  it('retokenization: sampled ids are a non-canonical split of the replayed text', () => {
    const merged = build(retokenized, {}, decodeSame)
    expect(merged.traces).toHaveLength(1)
    expect(turnsOf(merged.traces[0])[1]).toMatchObject({
      context_drift_tokens: 2,
      drift_reason: 'retokenization',
    })
    // Without a decoder the same shape is labelled heuristically; with one that disagrees it is a
    // template rewrite.
    expect(turnsOf(build(retokenized).traces[0])[1]?.drift_reason).toBe('retokenization')
    expect(turnsOf(build(retokenized, {}, decodeOther).traces[0])[1]?.drift_reason).toBe('template_rewrite')
    expect(build(retokenized, { max_context_drift_tokens: 1 }, decodeSame).traces[1]?.metadata.break_reason).toBe('retokenization')
  })

  it('template_rewrite: the replayed turn gains tokens the model did not sample', () => {
    const records = twoTurns({
      prompt1: [...system(), ...user(21), ...gen()],
      response1: [31, 32, EOT],
      prompt2: [...system(), ...user(21), ...asst(31, 35, 36, 32), ...tool(41), ...gen()],
    })
    expect(turnsOf(build(records).traces[0])[1]).toMatchObject({
      context_drift_tokens: 2,
      drift_reason: 'template_rewrite',
    })
    expect(build(records, { max_context_drift_tokens: 0 }).traces[1]?.metadata.break_reason).toBe('template_rewrite')
  })

  const nonceSession = twoTurns({
    prompt1: [...system([71, 72]), ...user(21), ...gen()],
    response1: [31, EOT],
    prompt2: [...system([73, 74]), ...user(21), ...asst(31), ...tool(41), ...gen()],
  })

  it('system_edit: a nonce in the system prompt changes per request', () => {
    const merged = build(nonceSession)
    expect(merged.traces).toHaveLength(1)
    expect(turnsOf(merged.traces[0])[1]).toMatchObject({
      context_drift_tokens: 2,
      drift_reason: 'system_edit',
    })
    expect(build(nonceSession, { max_context_drift_tokens: 1 }).traces[1]?.metadata.break_reason).toBe('system_edit')
    // Polar's prefix rule cannot continue past the nonce.
    expect(reconstructTrajectory(nonceSession, { builder: 'prefix_merging', config: { strict: true } }).traces).toHaveLength(2)
  })

  it('system_edit: the nonce region is counted once, not once per turn', () => {
    const p1 = [...system([71, 72]), ...user(21), ...gen()]
    const p2 = [...system([73, 74]), ...user(21), ...asst(31), ...tool(41), ...gen()]
    const p3 = [...system([75, 76]), ...user(21), ...asst(31), ...tool(41), ...asst(51), ...tool(42), ...gen()]
    const records = withPreviousDeltas([
      makeRecord({ seq: 0, prompt: p1, response: [31, EOT] }),
      makeRecord({ seq: 1, prompt: p2, response: [51, EOT] }),
      makeRecord({ seq: 2, prompt: p3, response: [52, EOT] }),
    ])
    const turns = turnsOf(build(records).traces[0])
    expect(turns.map((turn) => turn.context_drift_tokens)).toEqual([0, 2, 2])
  })

  it('history_edit: a small edit after the system turn', () => {
    const records = twoTurns({
      prompt1: [...system(), ...user(21, 22, ...range(300, 312)), ...gen()],
      response1: [31, EOT],
      prompt2: [...system(), ...user(21, 23, ...range(300, 312)), ...asst(31), ...tool(41), ...gen()],
    })
    expect(turnsOf(build(records).traces[0])[1]).toMatchObject({
      context_drift_tokens: 1,
      drift_reason: 'history_edit',
    })
    expect(build(records, { max_context_drift_tokens: 0 }).traces[1]?.metadata.break_reason).toBe('history_edit')
  })

  it('compaction: history replaced by a shorter summary, old context never continued', () => {
    const p1 = [...system(), ...user(21, 22), ...gen()]
    const p2 = [...p1, 31, EOT, 6, ...tool(...range(400, 440)), ...gen()]
    const p3 = [...system(), ...user(81, 82), ...gen()]
    const p4 = [...p3, 53, EOT, 6, ...tool(43), ...gen()]
    const records = withPreviousDeltas([
      makeRecord({ seq: 0, prompt: p1, response: [31, EOT] }),
      makeRecord({ seq: 1, prompt: p2, response: [52, EOT] }),
      makeRecord({ seq: 2, prompt: p3, response: [53, EOT] }),
      makeRecord({ seq: 3, prompt: p4, response: [54, EOT] }),
    ])
    const trajectory = build(records)
    expect(trajectory.traces.map((t) => [t.metadata.branch, t.metadata.break_reason, t.metadata.source_completion_ids])).toEqual([
      ['main', null, ['msg_000000000000', 'msg_000000000001']],
      ['compaction', 'compaction', ['msg_000000000002', 'msg_000000000003']],
    ])
    expect(trajectory.metadata.reconstruction_stats).toMatchObject({
      chains_total: 1,
      chains_reconstructed_truncated: 1,
      breaks: { compaction: 1 },
    })
  })

  it('prefix_mismatch: history diverges beyond any bounded edit, context not shorter', () => {
    const p1 = [...system(), ...user(21, 22), ...gen()]
    const p2 = [...system(), ...user(...range(500, 540)), ...asst(31), ...tool(41), ...gen()]
    const records = twoTurns({ prompt1: p1, response1: [31, EOT], prompt2: p2 })
    const trajectory = build(records)
    expect(trajectory.traces[1]?.metadata.break_reason).toBe('prefix_mismatch')
  })

  it('eot_unavailable: no natural stop, no configured EOT; exact replays still merge', () => {
    const p1 = [...system(), ...user(21), ...gen(true)]
    const exactP2 = [...p1, 31, 32, EOT, 6, ...tool(41), ...gen(true)]
    const rewrittenP2 = [...system(), ...user(21), ...asst(31, 32), ...tool(41), ...gen(true)]
    const session = (p2: number[]) =>
      withPreviousDeltas([
        makeRecord({ seq: 0, prompt: p1, response: [31, 32], finish: 'length' }),
        makeRecord({ seq: 1, prompt: p2, response: [51, 52], finish: 'length' }),
      ])
    expect(build(session(exactP2)).traces).toHaveLength(1)
    const broken = build(session(rewrittenP2))
    expect(broken.traces[1]?.metadata.break_reason).toBe('eot_unavailable')
    expect(broken.metadata.reconstruction).toMatchObject({ end_of_turn_token_id: null })
    // With the EOT configured the same session merges (the truncated turn is closed by the EOT).
    const configured = build(session(rewrittenP2), { end_of_turn_token_id: EOT })
    expect(configured.traces).toHaveLength(1)
    expect(configured.traces[0]?.response_ids.slice(2, 4)).toEqual([EOT, 6])
  })

  it('interstitial_split_failed: the replayed turn is never closed', () => {
    const p1 = [...system(), ...user(21), ...gen()]
    const records = twoTurns({
      prompt1: p1,
      response1: [31, 32, 33, EOT],
      prompt2: [...p1, 31, 32],
    })
    expect(build(records).traces[1]?.metadata.break_reason).toBe('interstitial_split_failed')
  })
})

describe('branch labels', () => {
  const mainP1 = [...system(), ...user(21), ...gen()]
  const mainP2 = [...mainP1, 31, EOT, 6, ...tool(41), ...gen()]
  const mainP3 = [...mainP2, 32, EOT, 6, ...tool(42), ...gen()]
  const subSystem = [1, 2, 6, ...range(600, 640), EOT, 6]
  const subP1 = [...subSystem, ...user(22), ...gen()]
  const subP2 = [...subP1, 61, EOT, 6, ...tool(43), ...gen()]
  const sideP = [1, 2, 6, ...range(700, 730), EOT, 6, ...user(21), ...gen()]

  it('main, sub_agent (same agent label), side_call, labelled agent with its own main', () => {
    const records = withPreviousDeltas([
      makeRecord({ seq: 0, prompt: mainP1, response: [31, EOT] }),
      makeRecord({ seq: 1, prompt: subP1, response: [61, EOT] }),
      makeRecord({ seq: 2, prompt: sideP, response: [71, EOT], tools: null, finish: 'stop' }),
      makeRecord({ seq: 3, prompt: mainP2, response: [32, EOT] }),
      makeRecord({ seq: 4, prompt: subP2, response: [62, EOT] }),
      makeRecord({ seq: 5, prompt: subP1, response: [81, EOT], agent: 'explore' }),
      makeRecord({ seq: 6, prompt: mainP3, response: [33, EOT] }),
    ])
    const trajectory = build(records)
    expect(trajectory.traces.map((t) => [t.metadata.agent, t.metadata.branch, t.metadata.source_completion_ids])).toEqual([
      ['main', 'main', ['msg_000000000000', 'msg_000000000003', 'msg_000000000006']],
      ['main', 'sub_agent', ['msg_000000000001', 'msg_000000000004']],
      ['main', 'side_call', ['msg_000000000002']],
      ['explore', 'main', ['msg_000000000005']],
    ])
    expect(trajectory.metadata.reconstruction_stats).toMatchObject({
      branches: { main: 2, sub_agent: 1, side_call: 1 },
      chains_total: 4,
      completions_merged: 7,
    })
    // Polar groups by prefix only: same number of chains here, but never labels them.
    const strict = reconstructTrajectory(records, {
      builder: 'prefix_merging',
      config: { strict: true },
    })
    expect(strict.traces).toHaveLength(4)
  })

  const retrySession = () =>
    withDeltas(
      [
        makeRecord({ seq: 0, prompt: mainP1, response: [31, EOT] }),
        makeRecord({ seq: 1, prompt: mainP1, response: [34, EOT] }),
        makeRecord({
          seq: 2,
          prompt: [...mainP1, 34, EOT, 6, ...tool(41), ...gen()],
          response: [35, EOT],
        }),
      ],
      { 1: 0, 2: 1 },
    )

  it('retry (keep_last): the re-send stays in the chain, the earlier one is labelled', () => {
    const trajectory = build(retrySession())
    expect(trajectory.traces.map((t) => [t.metadata.branch, t.metadata.source_completion_ids, t.metadata.retry])).toEqual([
      ['main', ['msg_000000000001', 'msg_000000000002'], { replaced_attempts: ['msg_000000000000'] }],
      ['retry', ['msg_000000000000'], { superseded_by: 'msg_000000000001' }],
    ])
    expect(turnsOf(trajectory.traces[0])[1]?.context_drift_tokens).toBe(0)
    // Polar: the identical prompt joins the chain and breaks it; the rest is dropped.
    const strict = reconstructTrajectory(retrySession(), {
      builder: 'prefix_merging',
      config: { strict: true },
    })
    expect(strict.traces).toHaveLength(1)
    expect(strict.metadata.excluded_completions).toHaveLength(2)
  })

  it('retry (keep_first): the first attempt stays; re-send labelled, drift reported', () => {
    const trajectory = build(retrySession(), { retry_policy: 'keep_first' })
    expect(trajectory.traces.map((t) => [t.metadata.branch, t.metadata.source_completion_ids])).toEqual([
      ['main', ['msg_000000000000', 'msg_000000000002']],
      ['retry', ['msg_000000000001']],
    ])
    // Turn 2 replays the re-send's answer (34), not the kept one (31).
    expect(turnsOf(trajectory.traces[0])[1]?.context_drift_tokens).toBe(1)
  })

  it('retry with a fresh nonce is still a retry, and its drift is reported', () => {
    const p1 = [...system([71, 72]), ...user(21), ...gen()]
    const p1b = [...system([73, 74]), ...user(21), ...gen()]
    const records = withDeltas(
      [
        makeRecord({ seq: 0, prompt: p1, response: [31, EOT] }),
        makeRecord({ seq: 1, prompt: p1b, response: [34, EOT] }),
        makeRecord({
          seq: 2,
          prompt: [...p1b, 34, EOT, 6, ...tool(41), ...gen()],
          response: [35, EOT],
        }),
      ],
      { 1: 0, 2: 1 },
    )
    const trajectory = build(records)
    expect(trajectory.traces.map((t) => t.metadata.branch)).toEqual(['main', 'retry'])
    expect(trajectory.traces[0]?.prompt_ids).toEqual(p1b)
  })

  it('abandoned and failed records are listed, never trained, do not break the chain', () => {
    const records = withDeltas(
      [
        makeRecord({ seq: 0, prompt: mainP1, response: [31, EOT] }),
        {
          ...makeRecord({ seq: 1, prompt: mainP2, response: [9] }),
          status: 'abandoned',
          trainable: false,
        },
        {
          ...makeRecord({ seq: 2, prompt: mainP2, response: [] }),
          status: 'failed',
          trainable: false,
        },
        makeRecord({ seq: 3, prompt: mainP2, response: [32, EOT] }),
      ],
      { 1: 0, 2: 1, 3: 2 },
    )
    const trajectory = build(records)
    expect(trajectory.traces).toHaveLength(1)
    expect(trajectory.traces[0]?.metadata.source_completion_ids).toEqual(['msg_000000000000', 'msg_000000000003'])
    expect(trajectory.metadata.reconstruction_stats).toMatchObject({
      completions_excluded: 2,
      excluded_by_reason: { abandoned: 1, failed: 1 },
    })
  })
})

describe('reconstruction_stats and trace order (hand-counted)', () => {
  const p1 = [...system([71, 72]), ...user(21), ...gen()]
  const p2 = [...system([73, 74]), ...user(21), ...asst(31), ...tool(41), ...gen()]
  const sideP = [1, 2, 6, ...range(700, 730), EOT, 6, ...user(21), ...gen()]
  const p4 = [...p2, 52, 53, EOT, 6, ...tool(42), ...gen()]
  const p5 = [...system([73, 74]), ...user(81, 82), ...gen()]
  /**
   * seq 0 → 1 continues under a fresh nonce (system_edit 2); 2 is a side call; 3 re-sends 1's prompt
   * (keep_last: 1 superseded); 4 continues 3 exactly (Polar's rule); 5 compacts the history; 6 abandoned.
   */
  const records = withBestDeltas([
    makeRecord({ seq: 0, prompt: p1, response: [31, EOT] }),
    makeRecord({ seq: 1, prompt: p2, response: [51, EOT] }),
    makeRecord({ seq: 2, prompt: sideP, response: [71, EOT], tools: null }),
    makeRecord({ seq: 3, prompt: p2, response: [52, 53, EOT] }),
    makeRecord({ seq: 4, prompt: p4, response: [54, EOT] }),
    makeRecord({ seq: 5, prompt: p5, response: [55, EOT] }),
    { ...makeRecord({ seq: 6, prompt: p5, response: [9] }), status: 'abandoned', trainable: false },
  ])

  it('traces in arrival order of their first record (not creation order); every counter', () => {
    const trajectory = build(records)
    expect(
      trajectory.traces.map((t) => [
        t.metadata.branch,
        t.metadata.chain_index,
        t.metadata.chain_segment_index,
        t.metadata.break_reason,
        t.metadata.source_completion_ids,
      ]),
    ).toEqual([
      ['main', 0, 0, null, ['msg_000000000000', 'msg_000000000003', 'msg_000000000004']],
      ['retry', 2, 0, null, ['msg_000000000001']],
      ['side_call', 1, 0, null, ['msg_000000000002']],
      ['compaction', 0, 1, 'compaction', ['msg_000000000005']],
    ])
    expect(turnsOf(trajectory.traces[0]).map((t) => [t.context_drift_tokens, t.boundary_drift_tokens])).toEqual([
      [0, 0],
      [2, 2],
      [2, 0],
    ])
    expect(trajectory.metadata.builder).toBe('prefix_merging')
    expect(trajectory.metadata.reconstruction_stats).toEqual({
      chains_total: 3,
      chains_reconstructed_full: 2,
      chains_reconstructed_truncated: 1,
      completions_total: 6,
      completions_merged: 6,
      records_total: 7,
      completions_excluded: 1,
      excluded_by_reason: { abandoned: 1 },
      traces_total: 4,
      turns_continued: 2,
      // 6 completions, 2 roots (main, side call).
      turns_mergeable: 4,
      merged_turn_ratio: 2 / 6,
      mergeable_merged_ratio: 2 / 4,
      // Only seq 4 extends its predecessor's prompt + response exactly.
      strict_rule_merges: 1,
      breaks: { compaction: 1 },
      branches: { main: 1, side_call: 1, retry: 1, compaction: 1 },
      retries: 1,
      drift: {
        turns_with_drift: 2,
        context_drift_tokens_max: 2,
        context_drift_tokens_sum: 4,
        boundary_drift_tokens_total: 2,
        trained_tokens_total: 13,
        // seq 3 (3 tokens) and seq 4 (2) are trained under the old nonce.
        trained_tokens_under_drift: 5,
        final_drift_by_reason: { system_edit: 2 },
      },
    })
    expect(trajectory.metadata.reconstruction).toEqual({
      mode: 'tolerant',
      preset: 'tolerant',
      end_of_turn_token_id: EOT,
      end_of_turn_token_source: 'auto',
      max_context_drift_tokens: 64,
      retry_policy: 'keep_last',
    })
  })

  it('the configured end-of-turn token is reported as such; no preset → null', () => {
    const trajectory = reconstructTrajectory(records, {
      builder: 'prefix_merging',
      config: { end_of_turn_token_id: EOT, retry_policy: 'keep_first' },
    })
    expect(trajectory.metadata.reconstruction).toMatchObject({
      preset: null,
      end_of_turn_token_id: EOT,
      end_of_turn_token_source: 'config',
      retry_policy: 'keep_first',
    })
    expect(trajectory.metadata.reconstruction_stats).toMatchObject({ retries: 1, branches: { retry: 1 } })
  })

  it('routing tells which records open a trace (a streamed build keeps their requests for it)', () => {
    const run = startPrefixMerging(records, { config: parsePrefixMergingConfig({ ...THINK, retry_policy: 'keep_first' }) })
    const opened = run.trainable.map((record) => [record.seq, run.route(record)])
    // 0 root, 1 continues, 2 side call, 3 a retry trace of its own (keep_first), 4 continues, 5 a break.
    expect(opened).toEqual([
      [0, true],
      [1, false],
      [2, true],
      [3, true],
      [4, false],
      [5, true],
    ])
    expect(run.finish().entries.map((entry) => entry.first.seq)).toEqual([0, 2, 3, 5])
    // keep_last: 3 replaces 1 in the chain and 1 moves to a trace of its own — not 3's.
    const keepLast = startPrefixMerging(records, { config: parsePrefixMergingConfig(THINK) })
    expect(keepLast.trainable.map((record) => keepLast.route(record))).toEqual([true, false, true, false, false, true])
  })

  it('no records or none trainable: ERROR without traces, the shell still filled', () => {
    const none = reconstructTrajectory([], { builder: 'prefix_merging' })
    expect(none).toMatchObject({ status: 'ERROR', error: 'no completions', traces: [] })
    expect(none.metadata.reconstruction_stats).toMatchObject({ chains_total: 0, records_total: 0, breaks: {} })
    const excluded = reconstructTrajectory(records.slice(6), { builder: 'prefix_merging' })
    expect(excluded).toMatchObject({ status: 'ERROR', error: 'no trainable completions', traces: [] })
    expect(excluded.metadata.reconstruction_stats).toMatchObject({ records_total: 1, completions_excluded: 1 })
  })
})
