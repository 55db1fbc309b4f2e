import { describe, expect, it } from 'vitest'
import { chunkText, edgeMessageSchema, RUNNER_PROTOCOL_VERSION, runnerMessageSchema } from './runner-protocol.ts'

describe('runner protocol v1', () => {
  it('validates both directions by type and fills defaults', () => {
    const register = runnerMessageSchema.parse({
      type: 'register',
      protocol_version: RUNNER_PROTOCOL_VERSION,
      runner_id: 'r1',
      capacity: { max_init_workers: 1, max_run_workers: 1, max_postrun_workers: 1 },
    })
    expect(register).toMatchObject({ upstream: null, sessions: [], labels: {} })
    expect(register).not.toHaveProperty('evaluators')
    expect(runnerMessageSchema.parse({ ...register, evaluators: ['test_on_output'] })).toMatchObject({ evaluators: ['test_on_output'] })
    expect(runnerMessageSchema.safeParse({ ...register, evaluators: [''] }).success).toBe(false)
    expect(runnerMessageSchema.safeParse({ type: 'heartbeat', metrics: { run_inflight: -1 } }).success).toBe(false)
    expect(runnerMessageSchema.safeParse({ type: 'nope' }).success).toBe(false)
    expect(runnerMessageSchema.parse({ type: 'session.finished', session_id: 's' })).toMatchObject({
      agent_result: null,
      eval_result: null,
      error: null,
    })
    expect(edgeMessageSchema.safeParse({ type: 'cancel', session_id: 's' }).success).toBe(false)
  })

  it('chunks bodies without splitting surrogate pairs, and rejoins them exactly', () => {
    const text = `${'a'.repeat(9)}😀${'b'.repeat(20)}`
    const chunks = chunkText(text, 10)
    expect(chunks.join('')).toBe(text)
    expect(chunks.every((chunk) => chunk.length <= 10)).toBe(true)
    expect(chunks[0]).toBe('a'.repeat(9))
    expect(chunkText('')).toEqual([''])
  })
})
