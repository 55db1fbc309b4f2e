/**
 * @module
 * Scripted runners for the chaos scenarios: take every assignment, whichever runner got it, and walk it
 * to RUNNING (ack, INITIALIZING, READY, RUNNING), as a real runner would once its sandbox is ready.
 */
import type { SessionAssignment } from '../../src/contract/runner-protocol.ts'
import type { RunnerClient } from '../../test/support/runner-client.ts'
import { until } from './stack.ts'

export function takeAllToRunning(runners: readonly RunnerClient[], count: number, timeoutMs: number): Promise<SessionAssignment[]> {
  return until(
    async () => {
      for (const runner of runners) {
        for (const [sessionId, status] of runner.held) {
          if (status !== 'ASSIGNED') continue
          runner.ack(sessionId)
          for (const stage of ['INITIALIZING', 'READY', 'RUNNING'] as const) runner.report(sessionId, stage)
        }
      }
      const held = runners.flatMap((runner) => [...runner.assignments.values()])
      return held.length >= count ? held : undefined
    },
    timeoutMs,
    `${count} sessions assigned`,
  )
}
