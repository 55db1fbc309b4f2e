/**
 * @module
 * Submit warnings when a task's sessions will wait: runner API disabled, no runner connected, only draining ones.
 */
import { describe, expect, it } from 'vitest'
import type { RunnerInfo } from '../../../src/contract/rollout.ts'
import { runnerWarnings, waitingSessionWarnings } from '../../../src/worker/pipeline/runner-warnings.ts'

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

  it('in task status: only while the task has unfinished sessions and no runner takes work', () => {
    expect(waitingSessionWarnings(true, [], 0)).toEqual([])
    expect(waitingSessionWarnings(true, [runner(true, false)], 3)).toEqual([])
    expect(waitingSessionWarnings(true, [runner(false, false)], 1)).toEqual([
      {
        code: 'no_runner_connected',
        message:
          'no runner connected: 1 unfinished session cannot start until one connects (sessions in REGISTERED end TIMEOUT at timeout_seconds)',
      },
    ])
    expect(waitingSessionWarnings(true, [runner(true, true), runner(true, true)], 2)).toEqual([
      {
        code: 'no_runner_connected',
        message:
          'no runner connected that takes work (2 draining): 2 unfinished sessions cannot start until one connects (sessions in REGISTERED end TIMEOUT at timeout_seconds)',
      },
    ])
    expect(waitingSessionWarnings(false, [runner(true, false)], 2)[0]).toMatchObject({ code: 'runner_api_disabled' })
  })
})
