/**
 * @module
 * Trainer callback delivery (`TaskRequest.callback_url`): at least once, with exponential backoff
 * driven by the task object's alarm. Plain functions over an injected `fetch`, so the policy is
 * testable anywhere.
 *
 * Every attempt carries the same `Idempotency-Key` (`<task_id>/<run_id>`) so a receiver can drop
 * duplicates. Polar [later] retries 3 times on 408/425/429/500/502/503/504 and transport errors;
 * Rollgate keeps that retry set but retries for longer (the state survives restarts in SQLite).
 */
import type { CallbackStatus } from '../../contract/rollout.ts'

/** Polar's trainer-callback timeout (`docs/polar-compat.md` §5). */
export const CALLBACK_TIMEOUT_MS = 10_000
export const DEFAULT_CALLBACK_BASE_DELAY_MS = 1_000
export const CALLBACK_MAX_DELAY_MS = 5 * 60_000
export const DEFAULT_CALLBACK_MAX_ATTEMPTS = 10
const RETRYABLE_STATUSES = new Set([408, 425, 429, 500, 502, 503, 504])
const ERROR_TEXT_LIMIT = 300

export interface CallbackPolicy {
  baseDelayMs: number
  maxAttempts: number
}

export interface AttemptOutcome {
  ok: boolean
  status: number | null
  error: string | null
  retryable: boolean
}

export function newCallbackStatus(url: string, idempotencyKey: string, now: number): CallbackStatus {
  return {
    url,
    state: 'pending',
    attempts: 0,
    next_attempt_at: now,
    last_status: null,
    last_error: null,
    delivered_at: null,
    idempotency_key: idempotencyKey,
  }
}

/** Delay before attempt `attempt + 1` after `attempt` failures: base × 2^(attempt−1), capped. */
export function backoffDelayMs(attempt: number, baseDelayMs: number): number {
  return Math.min(baseDelayMs * 2 ** Math.max(0, attempt - 1), CALLBACK_MAX_DELAY_MS)
}

export async function attemptCallback(
  fetcher: typeof fetch,
  status: CallbackStatus,
  /** The TaskResult: text, or streamed from R2 (a result of many long sessions is never held). */
  body: string | ReadableStream<Uint8Array>,
  extraHeaders: Record<string, string>,
): Promise<AttemptOutcome> {
  try {
    const response = await fetcher(status.url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'idempotency-key': status.idempotency_key,
        'x-rollgate-delivery-attempt': String(status.attempts + 1),
        ...extraHeaders,
      },
      body,
      signal: AbortSignal.timeout(CALLBACK_TIMEOUT_MS),
    })
    const text = await response.text().catch(() => '')
    if (response.ok) return { ok: true, status: response.status, error: null, retryable: false }
    return {
      ok: false,
      status: response.status,
      error: `HTTP ${response.status}${text ? `: ${text.slice(0, ERROR_TEXT_LIMIT)}` : ''}`,
      retryable: RETRYABLE_STATUSES.has(response.status),
    }
  } catch (error) {
    return { ok: false, status: null, error: `transport: ${(error as Error).message}`.slice(0, ERROR_TEXT_LIMIT), retryable: true }
  }
}

/** Fold one attempt's outcome into the status. */
export function afterAttempt(status: CallbackStatus, outcome: AttemptOutcome, policy: CallbackPolicy, now: number): CallbackStatus {
  const attempts = status.attempts + 1
  if (outcome.ok) {
    return {
      ...status,
      state: 'delivered',
      attempts,
      next_attempt_at: null,
      last_status: outcome.status,
      last_error: null,
      delivered_at: new Date(now).toISOString(),
    }
  }
  const exhausted = !outcome.retryable || attempts >= policy.maxAttempts
  return {
    ...status,
    state: exhausted ? 'failed' : 'pending',
    attempts,
    next_attempt_at: exhausted ? null : now + backoffDelayMs(attempts, policy.baseDelayMs),
    last_status: outcome.status,
    last_error: outcome.error,
  }
}

/**
 * The one log line of a failed attempt (never a stack): where it went (origin and path, never a query that
 * may carry a secret), why it failed, and what happens next.
 */
export function callbackFailureLine(taskId: string, status: CallbackStatus, now: number): string {
  let target = status.url
  try {
    const url = new URL(status.url)
    target = `${url.origin}${url.pathname}`
  } catch {
    // stored URLs were validated at submit; keep it as is
  }
  const next =
    status.state === 'pending' && status.next_attempt_at !== null
      ? `retry in ${Math.max(0, Math.round((status.next_attempt_at - now) / 1000))} s`
      : 'giving up'
  const reason = (status.last_error ?? 'unknown error').replace(/\s+/g, ' ')
  return `trainer callback for task ${taskId}: attempt ${status.attempts} to ${target} failed (${reason}); ${next}`
}
