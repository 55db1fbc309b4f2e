/**
 * The log line of a failed trainer-callback attempt: one line, the target without its query, the reason,
 * and what happens next (the retry delay, or giving up).
 */
import { describe, expect, it } from 'vitest'
import type { CallbackStatus } from '../../contract/rollout.ts'
import { callbackFailureLine } from './callback-delivery.ts'

const status = (overrides: Partial<CallbackStatus>): CallbackStatus => ({
  url: 'https://trainer.example/hook?secret=s3cret',
  state: 'pending',
  attempts: 2,
  next_attempt_at: 10_000 + 120_000,
  last_status: null,
  last_error: 'transport: Network connection lost.\nDNS lookup failed',
  delivered_at: null,
  idempotency_key: 't/r',
  ...overrides,
})

describe('callbackFailureLine', () => {
  it('says where, why and when next, on one line, without the query', () => {
    expect(callbackFailureLine('task-1', status({}), 10_000)).toBe(
      'trainer callback for task task-1: attempt 2 to https://trainer.example/hook failed (transport: Network connection lost. DNS lookup failed); retry in 120 s',
    )
  })

  it('says when it gives up (no attempt left, or not retryable)', () => {
    expect(callbackFailureLine('task-1', status({ state: 'failed', next_attempt_at: null, attempts: 10, last_error: 'HTTP 404' }), 0)).toBe(
      'trainer callback for task task-1: attempt 10 to https://trainer.example/hook failed (HTTP 404); giving up',
    )
    expect(callbackFailureLine('t', status({ next_attempt_at: 5_000 }), 9_000)).toContain('retry in 0 s')
    expect(callbackFailureLine('t', status({ last_error: null }), 0)).toContain('failed (unknown error)')
  })
})
