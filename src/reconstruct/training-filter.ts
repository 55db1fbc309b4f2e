/**
 * @module
 * Polar's training filter for sessions that did not complete (Polar [later]
 * `node.py::_mask_noncompleted_trajectory`), as an explicit option (`TaskRequest.training_filter:
 * "mask_noncompleted"`; Rollgate's default `none` leaves traces as built and lets the trainer decide from
 * the status). Pure: returns a new trajectory.
 *
 * A trajectory that is not `COMPLETED` gets `reward = 0` and an all-zero `loss_mask` on every trace, except
 * an agent-budget timeout during `exec` (`agent_result.timeout_source = agent`, `timeout_stage = exec`)
 * whose trace is aligned (mask and logprobs as long as the response): it stays trainable as a
 * zero-reward negative. Each trace records `metadata.training_filter = {masked, trainable, reason, detail,
 * original_reward}`; the trajectory records `metadata.training_filter = {rule, masked_traces,
 * trainable_traces}`.
 */
import type { Trace, Trajectory } from '../contract/trajectory.ts'

export const TRAINING_FILTERS = ['none', 'mask_noncompleted'] as const
export type TrainingFilter = (typeof TRAINING_FILTERS)[number]

interface AgentOutcome {
  timeout_source?: string | null
  timeout_stage?: string | null
}

function aligned(trace: Trace): boolean {
  const n = trace.response_ids.length
  return n > 0 && trace.loss_mask.length === n && trace.response_logprobs !== null && trace.response_logprobs.length === n
}

export function applyTrainingFilter(trajectory: Trajectory, filter: TrainingFilter = 'none'): Trajectory {
  if (filter === 'none' || trajectory.status === 'COMPLETED') return trajectory
  const agent = (trajectory.metadata.agent_result ?? null) as AgentOutcome | null
  const execTimeout = trajectory.status === 'TIMEOUT' && agent?.timeout_source === 'agent' && agent?.timeout_stage === 'exec'
  const why = `trajectory ${trajectory.status}${trajectory.error ? `: ${trajectory.error}` : ''}`
  let masked = 0
  const traces = trajectory.traces.map((trace): Trace => {
    if (execTimeout && aligned(trace)) {
      return {
        ...trace,
        reward: 0,
        metadata: {
          ...trace.metadata,
          training_filter: {
            masked: false,
            trainable: true,
            reason: 'agent_timeout_negative',
            detail: 'the agent budget ran out during exec; kept as a zero-reward negative',
            original_reward: trace.reward,
          },
        },
      }
    }
    masked++
    return {
      ...trace,
      reward: 0,
      loss_mask: new Array<number>(trace.response_ids.length).fill(0),
      metadata: {
        ...trace.metadata,
        training_filter: { masked: true, trainable: false, reason: 'non_completed', detail: why, original_reward: trace.reward },
      },
    }
  })
  return {
    ...trajectory,
    traces,
    metadata: {
      ...trajectory.metadata,
      training_filter: { rule: 'mask_noncompleted', masked_traces: masked, trainable_traces: traces.length - masked },
    },
  }
}
