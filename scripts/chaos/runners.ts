/**
 * @module
 * Scripted runners for the chaos scenarios: take every assignment, whichever runner got it, and walk it
 * to RUNNING (ack, INITIALIZING, READY, RUNNING), as a real runner would once its sandbox is ready.
 */
import type { SessionAssignment } from '../../src/contract/runner-protocol.ts'
import type { RunnerClient } from '../../test/support/runner-client.ts'
import { type ChaosStack, until } from './stack.ts'

/**
 * Walk every assignment to RUNNING until each of the task's `count` sessions is RUNNING at the edge and held
 * by one runner; the assignments, one per session (the one its current runner got).
 *
 * Counted per session id and confirmed at the edge: a session the edge re-dispatched (e.g. an acknowledgement
 * that reached a loaded edge after its deadline) sits in two runners' `assignments`, and counting those entries
 * stopped the walk early, leaving the re-dispatched sessions unacknowledged and REGISTERED.
 */
export function takeAllToRunning(
  stack: ChaosStack,
  taskId: string,
  runners: readonly RunnerClient[],
  count: number,
  timeoutMs: number,
): Promise<SessionAssignment[]> {
  return until(
    async () => {
      const running = new Map<string, SessionAssignment>()
      for (const runner of runners) {
        for (const [sessionId, status] of runner.held) {
          if (status === 'ASSIGNED') {
            runner.ack(sessionId)
            for (const stage of ['INITIALIZING', 'READY', 'RUNNING'] as const) runner.report(sessionId, stage)
          }
          const assignment = runner.assignments.get(sessionId)
          if (assignment) running.set(sessionId, assignment)
        }
      }
      if (running.size < count) return undefined
      const task = (await (await stack.admin(`/rollout/task/${taskId}?results=false`)).json()) as {
        sessions: { session_id: string; status: string }[]
      }
      const all = task.sessions.length === count && task.sessions.every((session) => session.status === 'RUNNING')
      return all && task.sessions.every((session) => running.has(session.session_id))
        ? task.sessions.map((session) => running.get(session.session_id) as SessionAssignment)
        : undefined
    },
    timeoutMs,
    `${count} sessions RUNNING`,
  )
}
