/**
 * Polar's training filter for non-COMPLETED sessions (`training_filter: "mask_noncompleted"`).
 */
import { describe, expect, it } from 'vitest'
import { type Trajectory, trajectorySchema } from '../../src/contract/trajectory.ts'
import { applyTrainingFilter } from '../../src/reconstruct/index.ts'

const trace = (reward: number | null, logprobs: number[] | null = [-0.1, -0.2]) => ({
  prompt_ids: [1, 2],
  response_ids: [10, 11],
  loss_mask: [1, 1],
  prompt_messages: [],
  response_messages: [],
  tools: null,
  finish_reason: 'stop',
  response_logprobs: logprobs,
  reward,
  reward_components: {},
  metadata: {},
})
const trajectory = (
  status: Trajectory['status'],
  agent: Record<string, unknown> | null,
  traces = [trace(1), trace(0.5, null)],
): Trajectory => ({
  status,
  metadata: { agent_result: agent },
  traces,
  error: status === 'COMPLETED' ? null : 'agent failed',
})

describe('applyTrainingFilter', () => {
  it('none (default) and COMPLETED trajectories are left as built', () => {
    const failed = trajectory('ERROR', { status: 'failed' })
    expect(applyTrainingFilter(failed)).toBe(failed)
    expect(applyTrainingFilter(failed, 'none')).toBe(failed)
    const done = trajectory('COMPLETED', { status: 'completed' })
    expect(applyTrainingFilter(done, 'mask_noncompleted')).toBe(done)
  })

  it('ERROR / TIMEOUT: reward 0 and loss mask zeroed on every trace, recorded with the original reward', () => {
    for (const [status, agent] of [
      ['ERROR', { status: 'failed' }],
      ['TIMEOUT', { status: 'timeout', timeout_source: 'session', timeout_stage: 'exec' }],
      ['TIMEOUT', { status: 'timeout', timeout_source: 'agent', timeout_stage: 'setup' }],
    ] as const) {
      const out = applyTrainingFilter(trajectory(status, agent), 'mask_noncompleted')
      expect(out.traces.map((t) => [t.reward, t.loss_mask])).toEqual([
        [0, [0, 0]],
        [0, [0, 0]],
      ])
      expect(out.traces[0]?.metadata.training_filter).toEqual({
        masked: true,
        trainable: false,
        reason: 'non_completed',
        detail: `trajectory ${status}: agent failed`,
        original_reward: 1,
      })
      expect(out.metadata.training_filter).toEqual({ rule: 'mask_noncompleted', masked_traces: 2, trainable_traces: 0 })
      expect(trajectorySchema.parse(out)).toBeTruthy()
    }
  })

  it('agent-budget timeout during exec: aligned traces stay trainable as zero-reward negatives', () => {
    const out = applyTrainingFilter(
      trajectory('TIMEOUT', { status: 'timeout', timeout_source: 'agent', timeout_stage: 'exec' }),
      'mask_noncompleted',
    )
    expect(out.traces[0]).toMatchObject({
      reward: 0,
      loss_mask: [1, 1],
      metadata: { training_filter: { masked: false, trainable: true, original_reward: 1 } },
    })
    // No aligned logprobs: not trainable, masked.
    expect(out.traces[1]).toMatchObject({ reward: 0, loss_mask: [0, 0], metadata: { training_filter: { masked: true } } })
    expect(out.metadata.training_filter).toEqual({ rule: 'mask_noncompleted', masked_traces: 1, trainable_traces: 1 })
  })
})
