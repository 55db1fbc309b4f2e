/**
 * @module
 * Submit warnings when a task's sessions will wait: runner API disabled, no runner connected, only draining ones.
 */
import { describe, expect, it } from 'vitest'
import type { RunnerInfo } from '../../../src/contract/rollout.ts'
import { runnerWarnings } from '../../../src/worker/pipeline/runner-warnings.ts'

const runner = (connected: boolean, draining: boolean) => ({ connected, draining }) as RunnerInfo

describe('runnerWarnings', () => {
  it('is silent when a connected runner takes work', () => {
    expect(runnerWarnings(true, [runner(false, false), runner(true, false)], 60)).toEqual([])
  })

  it('says why sessions will wait, and for how long', () => {
    expect(runnerWarnings(false, [runner(true, false)], 60)).toEqual([
      {
        code: 'runner_api_disabled',
        message:
          'the runner API is disabled (ROLLGATE_RUNNER_TOKEN is not set): its sessions wait in REGISTERED and end TIMEOUT after timeout_seconds (60 s) unless one connects',
      },
    ])
    expect(runnerWarnings(true, [], 30)).toEqual([
      {
        code: 'no_runner_connected',
        message: 'no runner connected: its sessions wait in REGISTERED and end TIMEOUT after timeout_seconds (30 s) unless one connects',
      },
    ])
    expect(runnerWarnings(true, [runner(true, true), runner(false, false)], 30)[0]?.message).toMatch(
      /^no runner connected that takes work \(1 draining\): /,
    )
  })
})
