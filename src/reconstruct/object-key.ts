/**
 * @module
 * R2 key layout for reconstructed trajectories (pure string functions; the worker does the I/O):
 *
 *   trajectories/<session_id>/<builder>.json
 *
 * `<session_id>` is percent-encoded (`encodeURIComponent`), so an id can never add path segments
 * or traverse (`a/../b` → `a%2F..%2Fb`); listing `trajectories/<session_id>/` yields every builder
 * output of one session.
 */
import { type BuilderName, builderNameSchema } from '../contract/trajectory.ts'

export const TRAJECTORY_KEY_PREFIX = 'trajectories/'

export function trajectoryObjectKey(sessionId: string, builder: BuilderName): string {
  if (sessionId.length === 0 || sessionId === '.' || sessionId === '..') {
    throw new Error(`trajectoryObjectKey: invalid session id ${JSON.stringify(sessionId)}`)
  }
  const parsed = builderNameSchema.parse(builder)
  return `${TRAJECTORY_KEY_PREFIX}${encodeURIComponent(sessionId)}/${parsed}.json`
}

/** Prefix listing every stored trajectory of a session. */
export function trajectoryObjectPrefix(sessionId: string): string {
  return `${TRAJECTORY_KEY_PREFIX}${encodeURIComponent(sessionId)}/`
}
