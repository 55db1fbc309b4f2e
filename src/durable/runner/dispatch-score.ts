/**
 * @module
 * Which runner takes the next session: Polar's balancer (`docs/polar-compat.md` §7), pure.
 *
 * Eligible: connected and healthy, not draining, `total < max_init + ready_target + max_run +
 * max_postrun` (ready target = the runner's ready buffer, Polar: `max_run_workers`), and post-run
 * backlog `< 2 × max_postrun`. Chosen: the lexicographic minimum of
 * `(run_inflight/max_run, postrun/max_postrun, (init + reservations)/max_init, −ready_gap,
 * total/admission_limit, runner_id)`.
 */
import type { StageMetrics } from '../../contract/rollout.ts'

export interface RunnerLoad {
  runner_id: string
  max_init_workers: number
  max_run_workers: number
  max_postrun_workers: number
  ready_buffer: number
  metrics: StageMetrics
  /** Sessions sent since the last heartbeat (reset by it). */
  reservations: number
  /** Sessions the edge currently assigns to this runner (authoritative, from the hub's table). */
  total: number
  healthy: boolean
  draining: boolean
}

export function admissionLimit(load: RunnerLoad): number {
  return load.max_init_workers + load.ready_buffer + load.max_run_workers + load.max_postrun_workers
}

export function canAccept(load: RunnerLoad): boolean {
  if (!load.healthy || load.draining) return false
  if (load.total >= admissionLimit(load)) return false
  const postrunBacklog = load.metrics.postrun_inflight + load.metrics.postrun_queue_depth
  return postrunBacklog < 2 * load.max_postrun_workers
}

export type Score = [number, number, number, number, number, string]

export function score(load: RunnerLoad): Score {
  const { metrics } = load
  const readyGap = Math.max(0, load.ready_buffer - metrics.ready_depth)
  return [
    metrics.run_inflight / load.max_run_workers,
    (metrics.postrun_inflight + metrics.postrun_queue_depth) / load.max_postrun_workers,
    (metrics.init_inflight + metrics.init_queue_depth + load.reservations) / load.max_init_workers,
    -readyGap,
    load.total / admissionLimit(load),
    load.runner_id,
  ]
}

export function compareScores(a: Score, b: Score): number {
  for (let i = 0; i < a.length; i++) {
    const left = a[i] as number | string
    const right = b[i] as number | string
    if (left < right) return -1
    if (left > right) return 1
  }
  return 0
}

/** The runner to take the next session, or null when none can. */
export function pickRunner(loads: readonly RunnerLoad[]): RunnerLoad | null {
  let best: RunnerLoad | null = null
  let bestScore: Score | null = null
  for (const load of loads) {
    if (!canAccept(load)) continue
    const current = score(load)
    if (!bestScore || compareScores(current, bestScore) < 0) {
      best = load
      bestScore = current
    }
  }
  return best
}
