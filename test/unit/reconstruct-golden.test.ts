/**
 * Golden cases: Polar's worked example (§16.3, incl. the no-logprobs variant and SGLang/vLLM
 * shaped records), the leeyykk continuation example, record → trace extraction and per_request.
 */
import { describe, expect, it } from 'vitest'
import type { CompletionRecord } from '../../src/contract/completion-record.ts'
import { traceSchema, trajectorySchema } from '../../src/contract/trajectory.ts'
import { alignedLogprobs, reconstructTrajectory, traceFromRecord } from '../../src/reconstruct/index.ts'
import { makeRecord, withDeltas } from './reconstruct-support/records.ts'

const polarExample = (upstream: 'vllm' | 'sglang', c2Logprobs: number[] | null = [-0.5, -0.6, -0.7]) =>
  withDeltas(
    [
      makeRecord({
        seq: 0,
        prompt: [1, 2, 3],
        response: [10, 11, 99],
        logprobs: [-0.1, -0.2, -0.3],
        upstream,
      }),
      makeRecord({
        seq: 1,
        prompt: [1, 2, 3, 10, 11, 99, 50, 51],
        response: [20, 21, 99],
        logprobs: c2Logprobs,
        upstream,
      }),
    ],
    { 1: 0 },
  )

const builds = [
  { name: 'strict', config: { strict: true, end_of_turn_token_id: 99 } },
  { name: 'strict, auto EOT', config: { strict: true } },
  { name: 'tolerant', config: { end_of_turn_token_id: 99 } },
  { name: 'tolerant, auto EOT', config: {} },
]

describe('Polar worked example (EOT = 99)', () => {
  for (const build of builds) {
    for (const upstream of ['vllm', 'sglang'] as const) {
      it(`${build.name}, ${upstream}-shaped records → one trace`, () => {
        const trajectory = reconstructTrajectory(polarExample(upstream), {
          builder: 'prefix_merging',
          config: build.config,
        })
        expect(trajectorySchema.parse(trajectory).status).toBe('COMPLETED')
        expect(trajectory.traces).toHaveLength(1)
        const [trace] = trajectory.traces
        expect(trace?.prompt_ids).toEqual([1, 2, 3])
        expect(trace?.response_ids).toEqual([10, 11, 99, 50, 51, 20, 21, 99])
        expect(trace?.loss_mask).toEqual([1, 1, 1, 0, 0, 1, 1, 1])
        expect(trace?.response_logprobs).toEqual([-0.1, -0.2, -0.3, 0, 0, -0.5, -0.6, -0.7])
        expect(trajectory.metadata.reconstruction_stats).toMatchObject({
          chains_total: 1,
          chains_reconstructed_full: 1,
          chains_reconstructed_truncated: 0,
          completions_total: 2,
          completions_merged: 2,
        })
        if (!build.config.strict) {
          expect(trajectory.metadata.reconstruction_stats).toMatchObject({
            turns_continued: 1,
            turns_mergeable: 1,
            mergeable_merged_ratio: 1,
          })
        }
      })
    }

    it(`${build.name}: C2 without logprobs → same ids and mask, logprobs null`, () => {
      const trajectory = reconstructTrajectory(polarExample('vllm', null), {
        builder: 'prefix_merging',
        config: build.config,
      })
      const [trace] = trajectory.traces
      expect(trace?.response_ids).toEqual([10, 11, 99, 50, 51, 20, 21, 99])
      expect(trace?.loss_mask).toEqual([1, 1, 1, 0, 0, 1, 1, 1])
      expect(trace?.response_logprobs).toBeNull()
    })

    it(`${build.name}: C2 with misaligned logprobs (2 for 3 ids) → null, never padded`, () => {
      const trajectory = reconstructTrajectory(polarExample('vllm', [-0.5, -0.6]), {
        builder: 'prefix_merging',
        config: build.config,
      })
      expect(trajectory.traces[0]?.response_logprobs).toBeNull()
    })
  }

  it('SGLang- and vLLM-shaped records give identical trajectories', () => {
    for (const builder of ['per_request', 'prefix_merging'] as const) {
      const vllm = reconstructTrajectory(polarExample('vllm'), { builder })
      const sglang = reconstructTrajectory(polarExample('sglang'), { builder })
      expect(sglang.traces).toEqual(vllm.traces)
    }
  })
})

describe('leeyykk continuation example (Qwen3.5 scaffold replaced in history)', () => {
  const records = withDeltas(
    [
      makeRecord({ seq: 0, prompt: [10, 11, 90, 91], response: [20, 99] }),
      makeRecord({ seq: 1, prompt: [10, 11, 20, 99, 30, 31], response: [40, 99] }),
    ],
    { 1: 0 },
  )

  it('tolerant: one trace, raw response + canonical interstitial', () => {
    const trajectory = reconstructTrajectory(records, {
      builder: 'prefix_merging',
      config: { preset: 'tolerant', think_token_ids: [90, 91] },
    })
    expect(trajectory.traces).toHaveLength(1)
    const [trace] = trajectory.traces
    expect(trace?.prompt_ids).toEqual([10, 11, 90, 91])
    expect(trace?.response_ids).toEqual([20, 99, 30, 31, 40, 99])
    expect(trace?.loss_mask).toEqual([1, 1, 0, 0, 1, 1])
    const turns = trace?.metadata.turns as {
      context_drift_tokens: number
      drift_reason: string | null
    }[]
    // The context for turn 2 keeps the scaffold [90, 91] the model saw in turn 1 but not in turn 2.
    expect(turns.map((turn) => turn.context_drift_tokens)).toEqual([0, 2])
    expect(turns[1]?.drift_reason).toBe('thinking_rewrite')
  })

  it('strict (Polar): the prefix guard fails, two traces', () => {
    const trajectory = reconstructTrajectory(records, {
      builder: 'prefix_merging',
      config: { strict: true },
    })
    expect(trajectory.traces.map((trace) => trace.response_ids)).toEqual([
      [20, 99],
      [40, 99],
    ])
  })
})

describe('record → trace extraction', () => {
  it('maps a record to Polar field names', () => {
    const record = makeRecord({
      seq: 3,
      prompt: [1, 2],
      response: [5, 6, 7],
      finish: 'tool_calls',
      messages: [{ role: 'user', content: 'hi' }],
      tools: [{ type: 'function', function: { name: 'bash' } }],
      responseMessage: { role: 'assistant', content: null, tool_calls: [] },
      metadata: { task_id: 't', group_id: 'g' },
    })
    const trace = traceFromRecord(record)
    expect(traceSchema.parse(trace)).toBeTruthy()
    expect(trace).toMatchObject({
      prompt_ids: [1, 2],
      response_ids: [5, 6, 7],
      loss_mask: [1, 1, 1],
      prompt_messages: [{ role: 'user', content: 'hi' }],
      response_messages: [{ role: 'assistant', content: null, tool_calls: [] }],
      tools: [{ type: 'function', function: { name: 'bash' } }],
      finish_reason: 'tool_calls',
      reward: null,
      metadata: {
        task_id: 't',
        group_id: 'g',
        completion_id: record.completion_id,
        seq: 3,
        agent: 'main',
      },
    })
    expect(trace.response_logprobs).toHaveLength(3)
  })

  it('aligned-logprob rule: only 1:1 finite values, else null', () => {
    const base = makeRecord({ seq: 0, prompt: [1], response: [5, 6] })
    expect(alignedLogprobs({ ...base, response_logprobs: [-1, -2] })).toEqual([-1, -2])
    expect(alignedLogprobs({ ...base, response_logprobs: [-1] })).toBeNull()
    expect(alignedLogprobs({ ...base, response_logprobs: [-1, -2, -3] })).toBeNull()
    expect(alignedLogprobs({ ...base, response_logprobs: [-1, Number.NaN] })).toBeNull()
    expect(alignedLogprobs({ ...base, response_logprobs: null })).toBeNull()
  })

  it('tools absent or empty → null', () => {
    const record = makeRecord({ seq: 0, prompt: [1], response: [2], tools: null })
    expect(traceFromRecord(record).tools).toBeNull()
    expect(traceFromRecord({ ...record, request: { ...record.request, tools: [] } }).tools).toBeNull()
  })
})

describe('per_request builder', () => {
  const records: CompletionRecord[] = [
    makeRecord({ seq: 2, prompt: [1, 2, 3, 4], response: [9, 99] }),
    makeRecord({ seq: 0, prompt: [1, 2], response: [3, 99] }),
    {
      ...makeRecord({ seq: 1, prompt: [1, 2], response: [7] }),
      status: 'abandoned',
      trainable: false,
    },
    { ...makeRecord({ seq: 3, prompt: [5], response: [] }), trainable: false },
  ]
  const session = {
    session_id: 'sess-9',
    task_id: 'task-9',
    metadata: { group_id: 'g-17', policy_version: 17, rollout_step: 3, other: true },
  }

  it('one trace per trainable completion in arrival order; exclusions listed with a reason', () => {
    const trajectory = reconstructTrajectory(records, { builder: 'per_request', session })
    expect(trajectory).toMatchObject({ status: 'COMPLETED', error: null })
    expect(trajectory.traces.map((trace) => trace.metadata.seq)).toEqual([0, 2])
    expect(trajectory.metadata).toMatchObject({
      builder: 'per_request',
      session_id: 'sess-9',
      task_id: 'task-9',
      api_type: 'openai_chat',
      model_requested: 'qwen3',
      model_used: 'Qwen/Qwen3-8B',
      record_count: 4,
      task_metadata: session.metadata,
      trace_count: 2,
      group_id: 'g-17',
      policy_version: 17,
      rollout_step: 3,
    })
    expect(trajectory.metadata.excluded_completions).toEqual([
      {
        completion_id: 'msg_000000000001',
        seq: 1,
        agent: 'main',
        status: 'abandoned',
        reason: 'abandoned',
      },
      {
        completion_id: 'msg_000000000003',
        seq: 3,
        agent: 'main',
        status: 'ok',
        reason: 'not_trainable',
      },
    ])
  })

  it('no completions → ERROR (Polar), no trainable completions → ERROR with the list', () => {
    expect(reconstructTrajectory([], { builder: 'per_request' })).toMatchObject({
      status: 'ERROR',
      error: 'no completions',
      traces: [],
    })
    for (const builder of ['per_request', 'prefix_merging'] as const) {
      const onlyExcluded = reconstructTrajectory(records.slice(2), { builder })
      expect(onlyExcluded).toMatchObject({ status: 'ERROR', error: 'no trainable completions', traces: [] })
      expect(onlyExcluded.metadata.excluded_completions).toHaveLength(2)
      expect(onlyExcluded.metadata.trace_count).toBe(0)
    }
  })

  it('prefix_merging rejects unknown config keys (like Polar’s cls(**config)); per_request ignores them (like Polar’s)', () => {
    expect(reconstructTrajectory(records, { builder: 'per_request', config: { x: 1 } }).metadata.builder_warnings).toHaveLength(1)
    expect(() => reconstructTrajectory(records, { builder: 'prefix_merging', config: { end_of_turn: 1 } })).toThrow(/end_of_turn/)
  })
})
