/**
 * Reward attachment (Polar §17) and leave-one-trajectory-out group advantages (§18).
 */
import { describe, expect, it } from 'vitest'
import { type EvalResult, type Trajectory, trajectorySchema } from '../../src/contract/trajectory.ts'
import { applyEvalResult, groupAdvantages } from '../../src/reconstruct/index.ts'

const trace = (reward: number | null, mask: number[] = [1]) => ({
  prompt_ids: [1],
  response_ids: mask.map(() => 2),
  loss_mask: mask,
  prompt_messages: [],
  response_messages: [],
  tools: null,
  finish_reason: 'stop',
  response_logprobs: null,
  reward,
  reward_components: {},
  metadata: {},
})
const trajectory = (rewards: (number | null)[], status: Trajectory['status'] = 'COMPLETED'): Trajectory => ({
  status,
  metadata: { builder: 'prefix_merging' },
  traces: rewards.map((reward) => trace(reward)),
  error: null,
})
const evalResult = (partial: Partial<EvalResult>): EvalResult => ({
  outcome_reward: null,
  trace_rewards: null,
  metadata: {},
  ...partial,
})

describe('applyEvalResult', () => {
  it('assigns trace_rewards one per trace and records the evaluation', () => {
    const out = applyEvalResult(trajectory([null, null]), evalResult({ trace_rewards: [1, 0.5], metadata: { resolved: true } }), {
      strategy: 'test_on_output',
    })
    expect(out.traces.map((t) => t.reward)).toEqual([1, 0.5])
    expect(out.metadata.evaluation).toEqual({
      strategy: 'test_on_output',
      outcome_reward: null,
      trace_rewards: [1, 0.5],
      resolved: true,
    })
    expect(out.status).toBe('COMPLETED')
    expect(trajectorySchema.parse(out)).toBeTruthy()
  })

  it('trace_rewards of the wrong length → ERROR with a clear message, no reward assigned', () => {
    const input = trajectory([null, null, null])
    const out = applyEvalResult(input, evalResult({ trace_rewards: [1], outcome_reward: 1 }))
    expect(out.status).toBe('ERROR')
    expect(out.error).toBe('evaluator returned 1 trace_rewards but trajectory has 3 traces')
    expect(out.traces.map((t) => t.reward)).toEqual([null, null, null])
    // Pure: the input is untouched.
    expect(input.status).toBe('COMPLETED')
  })

  it('broadcasts outcome_reward to every trace; a null outcome leaves rewards alone', () => {
    expect(applyEvalResult(trajectory([null, null]), evalResult({ outcome_reward: 0.25 })).traces.map((t) => t.reward)).toEqual([
      0.25, 0.25,
    ])
    const untouched = applyEvalResult(trajectory([0.5]), evalResult({}))
    expect(untouched.traces[0]?.reward).toBe(0.5)
    expect(untouched.metadata.evaluation).toMatchObject({
      outcome_reward: null,
      trace_rewards: null,
    })
  })
})

describe('reward components', () => {
  it('traces default to {}; component scores are copied to every trace and recorded', () => {
    expect(trajectorySchema.parse({ status: 'COMPLETED', traces: [{}] }).traces[0]?.reward_components).toEqual({})
    const plain = applyEvalResult(trajectory([null]), evalResult({ outcome_reward: 1 }))
    expect(plain.traces[0]?.reward_components).toEqual({})
    const parts = { tests: 1, format: 0.5 }
    const scored = applyEvalResult(trajectory([null, null]), evalResult({ outcome_reward: 0.75, reward_components: parts }))
    expect(scored.traces.map((t) => t.reward_components)).toEqual([parts, parts])
    expect(scored.metadata.evaluation).toMatchObject({ reward_components: parts })
    const perTrace = applyEvalResult(trajectory([null]), evalResult({ trace_rewards: [0.2], reward_components: parts }))
    expect(perTrace.traces[0]).toMatchObject({ reward: 0.2, reward_components: parts })
    expect(trajectorySchema.parse(scored)).toBeTruthy()
  })
})

describe('groupAdvantages (leave-one-trajectory-out)', () => {
  it('baseline is the mean of the other trajectories’ mean rewards', () => {
    const group = [trajectory([1, 0]), trajectory([1]), trajectory([0])]
    // Means: 0.5, 1, 0. Trajectory 0: others {1, 0} → baseline 0.5.
    const { advantages, trajectoryMeans } = groupAdvantages(group)
    expect(trajectoryMeans).toEqual([0.5, 1, 0])
    expect(advantages[0]).toEqual([0.5, -0.5])
    expect(advantages[1]).toEqual([1 - 0.25])
    expect(advantages[2]).toEqual([0 - 0.75])
  })

  it('std normalization: sample stdev of the others + 1e-6, when ≥ 2 others', () => {
    const group = [trajectory([1]), trajectory([1]), trajectory([0]), trajectory([0.5])]
    const { advantages } = groupAdvantages(group, { stdNormalization: true })
    // Trajectory 0: others {1, 0, 0.5}: mean 0.5, sample stdev 0.5.
    expect(advantages[0]?.[0]).toBeCloseTo((1 - 0.5) / (0.5 + 1e-6), 9)
    // Two trajectories: a single other → no normalization.
    const pair = groupAdvantages([trajectory([1]), trajectory([0])], { stdNormalization: true })
    expect(pair.advantages).toEqual([[1], [-1]])
  })

  it('failed / aborted trajectories are excluded from baselines and get advantage 0', () => {
    const group = [trajectory([1]), trajectory([0.2], 'ERROR'), trajectory([0], 'TIMEOUT'), trajectory([0])]
    const { advantages, trajectoryMeans } = groupAdvantages(group)
    expect(trajectoryMeans).toEqual([1, null, null, 0])
    expect(advantages).toEqual([[1], [0], [0], [-1]])
  })

  it('traces without trainable tokens are not in the mean; missing rewards are 0', () => {
    const withContextOnly: Trajectory = {
      ...trajectory([]),
      traces: [trace(1), trace(5, [0, 0]), trace(null)],
    }
    const { trajectoryMeans } = groupAdvantages([withContextOnly, trajectory([0])])
    expect(trajectoryMeans[0]).toBe(0.5)
  })

  it('a missing reward counts as 0 in the advantages, not only in the means', () => {
    const group = [trajectory([null]), trajectory([1]), trajectory([null, 0.5])]
    const { advantages, trajectoryMeans } = groupAdvantages(group)
    expect(trajectoryMeans).toEqual([0, 1, 0.25])
    // Trajectory 0: baseline mean(1, 0.25) = 0.625; trajectory 2: baseline mean(0, 1) = 0.5.
    expect(advantages).toEqual([[-0.625], [1 - 0.125], [-0.5, 0]])
  })

  it('a lone trajectory has baseline 0', () => {
    expect(groupAdvantages([trajectory([0.7])]).advantages).toEqual([[0.7]])
  })
})
