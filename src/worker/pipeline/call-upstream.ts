/**
 * @module
 * One non-streaming call to the engine. Never throws: the outcome says what happened, so the caller
 * can always record it (nothing captured is lost) and answer in the harness's format.
 */
import { exceedsJsonDepth, jsonDepthMessage } from '../../normalize/json-depth.ts'
import { errorKindForStatus, upstreamErrorMessage } from '../../normalize/errors.ts'
import { EngineResponseError, parseEngineResponse } from '../../normalize/engine/engine-response.ts'
import { parseEngineAnswerBytes } from '../../normalize/engine/prompt-ids-text.ts'
import type { Completion, NormalizedError } from '../../normalize/types.ts'
import type { UpstreamConfig } from '../../durable/session/record.ts'

export type UpstreamOutcome =
  | { ok: true; completion: Completion; upstreamMs: number }
  | { ok: false; error: NormalizedError; upstreamMs: number; aborted: boolean }

export interface UpstreamCall {
  upstream: UpstreamConfig
  body: string
  apiKey: string | null
  timeoutMs: number
  /** Aborted when the client goes away. */
  signal?: AbortSignal
  fetch?: typeof fetch
}

export function chatCompletionsUrl(upstreamUrl: string): string {
  return upstreamUrl.endsWith('/v1') ? `${upstreamUrl}/chat/completions` : `${upstreamUrl}/v1/chat/completions`
}

export async function callUpstream(call: UpstreamCall): Promise<UpstreamOutcome> {
  const started = performance.now()
  const elapsed = () => performance.now() - started
  const timeout = AbortSignal.timeout(call.timeoutMs)
  const signal = call.signal ? AbortSignal.any([call.signal, timeout]) : timeout
  const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json' }
  if (call.apiKey) headers.authorization = `Bearer ${call.apiKey}`
  let response: Response
  let bytes: Uint8Array
  try {
    response = await (call.fetch ?? fetch)(chatCompletionsUrl(call.upstream.url), {
      method: 'POST',
      headers,
      body: call.body,
      signal,
    })
    // Bytes, not text: the prompt ids (most of a long context's answer) go on as a view of them, and only
    // the rest becomes a string (`parseEngineAnswerBytes`).
    bytes = new Uint8Array(await response.arrayBuffer())
  } catch (error) {
    const aborted = call.signal?.aborted === true
    if (timeout.aborted && !aborted) {
      return fail(504, 'timeout', `upstream did not answer within ${call.timeoutMs} ms`, elapsed(), false)
    }
    // workerd says "Network connection lost." for a refused connection: name the engine it could not reach.
    const reason = aborted ? 'client disconnected' : `engine unreachable at ${call.upstream.url} (${(error as Error).message})`
    return fail(502, 'upstream', reason, elapsed(), aborted)
  }
  let json: unknown
  // The prompt ids (most of a long context's answer) stay text for the session to parse incrementally.
  let promptIdsBytes: Uint8Array | null = null
  try {
    if (response.ok) ({ json, promptIdsBytes } = parseEngineAnswerBytes(bytes))
    else json = JSON.parse(new TextDecoder().decode(bytes))
    // Answers are held to the same nesting limit as requests (a runner's tunnel relays them).
    if (exceedsJsonDepth(json)) throw new Error(jsonDepthMessage())
  } catch {
    const status = response.ok ? 502 : response.status
    return fail(
      status,
      response.ok ? 'upstream' : errorKindForStatus(status),
      `upstream sent an unreadable body (HTTP ${response.status})`,
      elapsed(),
      false,
    )
  }
  if (!response.ok) {
    const message = upstreamErrorMessage(json, `upstream HTTP ${response.status}`)
    // Keep the engine's status: SDK retry logic (408/409/429/5xx) depends on it.
    return fail(response.status, errorKindForStatus(response.status), message, elapsed(), false)
  }
  try {
    return { ok: true, completion: parseEngineResponse(json, promptIdsBytes), upstreamMs: elapsed() }
  } catch (error) {
    const message = error instanceof EngineResponseError ? error.message : String(error)
    return fail(502, 'upstream', `upstream response unusable: ${message}`, elapsed(), false)
  }
}

function fail(status: number, kind: NormalizedError['kind'], message: string, upstreamMs: number, aborted: boolean): UpstreamOutcome {
  return { ok: false, error: { status, kind, message }, upstreamMs, aborted }
}
