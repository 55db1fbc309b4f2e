/**
 * @module
 * Group advantages for GRPO-style trainers with Polar's slime-bridge semantics
 * (`slime_bridge/reward_post_process.py`, §18), computed per prompt group (all trajectories of one
 * task): leave-one-trajectory-out.
 *
 * 1. Each trajectory's mean reward over its traces that have trainable tokens (mask 1); a missing
 *    reward counts as 0 (the adapter's `trace.reward or 0`). `ERROR`/`TIMEOUT` trajectories
 *    (slime FAILED/ABORTED) and trajectories without trainable traces are excluded.
 * 2. A trace with reward r in trajectory j: `others` = means of the other included trajectories,
 *    baseline = mean(others) (0 when there are none), advantage = (r − baseline) / D with
 *    D = sample stdev(others) + 1e-6 when `stdNormalization` and more than one other, else 1.
 * 3. Traces of excluded trajectories get advantage 0. (Like the bridge, traces without trainable
 *    tokens inside an included trajectory still get r − baseline; their mask makes it inert.)
 */
import type { Trajectory } from '../contract/trajectory.ts'

/** Added to the stdev of the other trajectories' means (the bridge's constant). */
export const ADVANTAGE_STD_EPSILON = 1e-6

export interface GroupAdvantageOptions {
  /** `grpo_std_normalization` (GRPO / GSPO). */
  stdNormalization?: boolean
}

export interface GroupAdvantages {
  /** One array per trajectory, one advantage per trace. */
  advantages: number[][]
  /** Mean trace reward per included trajectory; null when excluded. */
  trajectoryMeans: (number | null)[]
}

function hasTrainableTokens(mask: readonly number[]): boolean {
  return mask.some((value) => value !== 0)
}

function sampleStdev(values: readonly number[]): number {
  const mean = values.reduce((sum, value) => sum + value, 0) / values.length
  const variance = values.reduce((sum, value) => sum + (value - mean) ** 2, 0) / (values.length - 1)
  return Math.sqrt(variance)
}

export function isFailedTrajectory(trajectory: Trajectory): boolean {
  return trajectory.status === 'ERROR' || trajectory.status === 'TIMEOUT'
}

export function groupAdvantages(group: readonly Trajectory[], options: GroupAdvantageOptions = {}): GroupAdvantages {
  const trajectoryMeans = group.map((trajectory) => {
    if (isFailedTrajectory(trajectory)) return null
    const rewards = trajectory.traces.filter((trace) => hasTrainableTokens(trace.loss_mask)).map((trace) => trace.reward ?? 0)
    if (rewards.length === 0) return null
    return rewards.reduce((sum, value) => sum + value, 0) / rewards.length
  })

  const advantages = group.map((trajectory, index) => {
    if (trajectoryMeans[index] === null) return trajectory.traces.map(() => 0)
    const others: number[] = []
    trajectoryMeans.forEach((mean, other) => {
      if (other !== index && mean !== null) others.push(mean)
    })
    const baseline = others.length === 0 ? 0 : others.reduce((sum, value) => sum + value, 0) / others.length
    const scale = options.stdNormalization && others.length > 1 ? sampleStdev(others) + ADVANTAGE_STD_EPSILON : 1
    return trajectory.traces.map((trace) => ((trace.reward ?? 0) - baseline) / scale)
  })
  return { advantages, trajectoryMeans }
}
