/**
 * @module
 * Reconnect delays: exponential with full jitter (a uniformly random delay up to the capped exponential),
 * so runners that lost the edge together do not come back in lockstep.
 */
export interface BackoffOptions {
  baseMs: number
  maxMs: number
  random?: () => number
}

export function backoffDelay(attempt: number, options: BackoffOptions): number {
  const cap = Math.min(options.maxMs, options.baseMs * 2 ** Math.min(attempt, 30))
  return Math.round((options.random ?? Math.random)() * cap)
}
