import { describe, expect, it } from 'vitest'
import { admissionLimit, canAccept, pickRunner, type RunnerLoad } from './dispatch-score.ts'

function load(runnerId: string, overrides: Partial<RunnerLoad> = {}, metrics: Partial<RunnerLoad['metrics']> = {}): RunnerLoad {
  return {
    runner_id: runnerId,
    max_init_workers: 4,
    max_run_workers: 2,
    max_postrun_workers: 4,
    ready_buffer: 2,
    reservations: 0,
    total: 0,
    healthy: true,
    draining: false,
    ...overrides,
    metrics: {
      init_queue_depth: 0,
      init_inflight: 0,
      ready_depth: 0,
      run_inflight: 0,
      postrun_queue_depth: 0,
      postrun_inflight: 0,
      ...metrics,
    },
  }
}

describe('Polar pressure score (§7)', () => {
  it('prefers the lowest run pressure, then post-run, then init (with reservations), then the larger ready gap, then the id', () => {
    expect(pickRunner([load('a', {}, { run_inflight: 2 }), load('b', {}, { run_inflight: 1 })])?.runner_id).toBe('b')
    expect(pickRunner([load('a', {}, { postrun_inflight: 2 }), load('b', {}, { postrun_queue_depth: 1 })])?.runner_id).toBe('b')
    expect(pickRunner([load('a', { reservations: 2 }), load('b', {}, { init_inflight: 1 })])?.runner_id).toBe('b')
    expect(pickRunner([load('a', {}, { ready_depth: 2 }), load('b', {}, { ready_depth: 1 })])?.runner_id).toBe('b')
    expect(pickRunner([load('b'), load('a')])?.runner_id).toBe('a')
  })

  it('admits only healthy, non-draining runners below the admission limit and the post-run backlog bound', () => {
    expect(admissionLimit(load('a'))).toBe(4 + 2 + 2 + 4)
    expect(canAccept(load('a', { total: 11 }))).toBe(true)
    expect(canAccept(load('a', { total: 12 }))).toBe(false)
    expect(canAccept(load('a', { healthy: false }))).toBe(false)
    expect(canAccept(load('a', { draining: true }))).toBe(false)
    expect(canAccept(load('a', {}, { postrun_inflight: 4, postrun_queue_depth: 3 }))).toBe(true)
    expect(canAccept(load('a', {}, { postrun_inflight: 4, postrun_queue_depth: 4 }))).toBe(false)
    expect(pickRunner([load('a', { draining: true }), load('b', { total: 12 })])).toBeNull()
  })
})
