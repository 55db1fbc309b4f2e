/**
 * @module
 * What a task hands the runner hub for one sample, and what the hub keeps per queued session.
 * The hub completes it into a `SessionAssignment` (token, base URLs, injected env, route) at
 * assignment time, so no session token is ever stored.
 */
import type { SessionAssignment } from '../../contract/runner-protocol.ts'

export type AssignmentSpec = Omit<SessionAssignment, 'token' | 'base_urls' | 'env' | 'route'>

export interface DispatchTicket {
  session_id: string
  task_id: string
  run_id: string
  priority: number
  /** Origin harnesses use to reach the edge. */
  public_url: string
  /** The task's inference route: `runner` needs a runner that serves a model. */
  route: 'auto' | 'runner' | 'direct'
  spec: AssignmentSpec
}
