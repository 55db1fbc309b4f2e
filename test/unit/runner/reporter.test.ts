/**
 * The runner's output: JSON lines (one object per event) when not on a TTY; on a TTY, notable events as
 * lines above one status line redrawn in place (sessions per stage, outcomes, edge link).
 */
import { Writable } from 'node:stream'
import { describe, expect, it } from 'vitest'
import type { RunnerAgent } from '../../../runner/agent.ts'
import { Reporter } from '../../../runner/status/reporter.ts'

function sink(tty: boolean) {
  let text = ''
  const stream = new Writable({
    write(chunk, _encoding, done) {
      text += chunk.toString()
      done()
    },
  }) as unknown as NodeJS.WriteStream
  Object.assign(stream, { isTTY: tty, columns: 200 })
  return { stream, text: () => text }
}

const agent = {
  startedAt: Date.now() - 10_000,
  draining: false,
  recent: [{ at: Date.now(), sessionId: 's', status: 'completed', reward: 1 }],
  pipeline: {
    metrics: () => ({
      init_queue_depth: 1,
      init_inflight: 2,
      ready_depth: 3,
      run_inflight: 4,
      postrun_queue_depth: 0,
      postrun_inflight: 1,
    }),
    counters: { finished: 3, completed: 2, failed: 1, timeout: 0, cancelled: 0 },
  },
  connection: { registered: true },
  tunnel: { inflight: 5 },
} as unknown as RunnerAgent

describe('runner reporter', () => {
  it('writes one JSON object per event when not on a TTY', () => {
    const out = sink(false)
    const reporter = new Reporter(out.stream, false)
    reporter.log('session.stage', { session_id: 'ses_1', stage: 'RUNNING' })
    const lines = out.text().trim().split('\n')
    expect(lines).toHaveLength(1)
    expect(JSON.parse(lines[0] as string)).toMatchObject({ event: 'session.stage', session_id: 'ses_1', stage: 'RUNNING' })
  })

  it('on a TTY: one status line with sessions per stage, outcomes and the link; notable events above it', () => {
    const out = sink(true)
    const reporter = new Reporter(out.stream, true)
    reporter.attach(agent)
    expect(reporter.line()).toBe(
      'edge ✓ queue 1 · init 2 · ready 3 · run 4 · postrun 1 | 0.10 done/s · ok 2 · failed 1 · timeout 0 · cancelled 0 | tunnel 5',
    )
    reporter.log('session.stage', { session_id: 'ses_1' }) // not notable: no line
    reporter.log('session.finished', { session_id: 'ses_2', reward: 1 })
    reporter.stop()
    const text = out.text()
    expect(text).not.toContain('ses_1')
    expect(text).toMatch(/session\.finished session_id=ses_2 reward=1\n/)
    expect(text).toContain('\r\x1b[2K')
  })
})
