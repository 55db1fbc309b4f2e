/**
 * @module
 * The session size limit (`ROLLGATE_MAX_SESSION_BYTES`) as a named error in the caller's shape, before the
 * engine is called. Every commit reports what its session now holds; a session at its limit is remembered
 * (per isolate), so its next model call gets a 413 that says why and what to do — never a failure later, at
 * finalize. The limit is soft by design: a call already answered by the engine is always recorded (nothing
 * captured is lost), so an isolate that has not yet seen the session full lets one more call through.
 */
import { GatewayError } from '../errors.ts'

/** Session id → bytes held when it reached its limit. Bounded: cleared when it grows past this many. */
const fullSessions = new Map<string, number>()
const REMEMBERED = 10_000

const mib = (bytes: number) => (bytes / 1024 / 1024).toFixed(1)

export function assertSessionHasRoom(sessionId: string, limitBytes: number): void {
  const held = fullSessions.get(sessionId)
  if (held === undefined || held < limitBytes) return
  throw new GatewayError(
    413,
    'request_too_large',
    `session ${sessionId} holds ${mib(held)} MiB of captured calls, at its ${mib(limitBytes)} MiB limit (ROLLGATE_MAX_SESSION_BYTES): it takes no more model calls; finalize it and start a new session`,
  )
}

/** What a commit reported; remembers the session once it is at its limit. */
export function noteSessionBytes(sessionId: string, sessionBytes: number | undefined, limitBytes: number): void {
  if (sessionBytes === undefined || sessionBytes < limitBytes) return
  if (fullSessions.size >= REMEMBERED) fullSessions.clear()
  fullSessions.set(sessionId, sessionBytes)
}
