/**
 * @module
 * The proxy pipeline, top to bottom: authenticate → read → parse (harness wire → chat) → engine call
 * (non-streaming, with token capture) → commit the record to the session → answer in the harness's
 * own format (JSON, or a synthetic stream with keep-alives while the engine works).
 *
 * The record is committed before any part of the answer is released. A client that disconnects aborts
 * the engine call and the completion is recorded as `abandoned` (kept, never trainable).
 */
import type { ProviderAdapter, ResponseContext } from '../../normalize/adapter.ts'
import { clampWarning, engineRequestSplice } from '../../normalize/engine/engine-request.ts'
import { SSE_HEADERS } from '../../normalize/sse.ts'
import { type EdgeConfig, upstreamKeyFor } from '../config.ts'
import { type UpstreamOutcome, callUpstream } from './call-upstream.ts'
import { type CallFacts, completionInput } from './completion-input.ts'
import { parseJsonBody, readBodyText } from './read-body.ts'
import { prepareEngineBody } from './prepare-engine-body.ts'
import { authenticateSession } from './session-access.ts'
import { type CallTarget, resolveCallTarget } from './call-target.ts'
import { captureSize } from './capture-budget.ts'
import { assertSessionHasRoom, noteSessionBytes } from './session-limits.ts'
import { diffText } from '../../durable/session/text-delta.ts'
import { GatewayError } from '../errors.ts'
import type { SessionRolloutRpc } from '../../durable/session/session-rollout.ts'
import { SESSION_CLOSED } from '../../durable/session/session-store.ts'

export interface ProxyContext {
  env: Env
  config: EdgeConfig
  request: Request
  url: URL
  path: { token?: string; agent?: string }
  waitUntil(promise: Promise<unknown>): void
}

const HEX = Array.from({ length: 256 }, (_, byte) => byte.toString(16).padStart(2, '0'))

/** Random bytes drawn 12 per id from a pool refilled every 256 ids (one `getRandomValues` call, not one per call). */
const ID_BYTES = 12
const idPool = new Uint8Array(ID_BYTES * 256)
let idPoolAt = idPool.length

export function newCompletionId(): string {
  if (idPoolAt === idPool.length) {
    crypto.getRandomValues(idPool)
    idPoolAt = 0
  }
  let hex = 'cmpl_'
  for (let i = idPoolAt; i < idPoolAt + ID_BYTES; i++) hex += HEX[idPool[i] as number]
  idPoolAt += ID_BYTES
  return hex
}

export async function handleProxyRequest(context: ProxyContext, adapter: ProviderAdapter): Promise<Response> {
  const startedAt = Date.now()
  const startedClock = performance.now()
  const { env, config, request, url } = context
  const access = await authenticateSession(env, config, request, url, context.path)
  assertSessionHasRoom(access.sessionId, config.maxSessionBytes)
  const target = await resolveCallTarget(env, config, access)
  const originalText = await readBodyText(request, config.maxBodyBytes)
  const upstream = target.upstream
  const engineOptions = {
    kind: upstream.kind,
    servedModel: upstream.served_model,
    maxModelLen: upstream.max_model_len ?? null,
    promptChars: originalText.length,
  }
  const { body, parsed, engineBody } = await prepareEngineBody(
    adapter.id,
    parseJsonBody(originalText),
    (wire) => adapter.parseRequest(wire, url),
    access,
    engineOptions,
  )
  // A finalized or ended session's token is revoked: refused before the engine is called.
  await access.stillValid()
  const clamped = clampWarning(parsed.request, engineBody, upstream.max_model_len ?? null)
  if (clamped) parsed.warnings.push(clamped)
  const { text: requestText, splice } = engineRequestSplice(
    engineBody,
    { request: parsed.request, body, text: originalText },
    engineOptions,
  )
  // The engine body usually is the harness's bytes plus a few keys: sent to the session as a delta, once
  // (known from how it was made; else a diff).
  const delta = splice ? { prefix: splice.at, suffix: 0, middle: splice.insert } : diffText(originalText, requestText)
  // Stryker disable next-line EqualityOperator: at exactly half either form stores the same request; the cut is a size heuristic
  const requestDelta = delta.middle.length * 2 < requestText.length ? delta : null
  const capture = captureSize({
    originalText,
    requestText,
    requestDelta,
    maxModelLen: upstream.max_model_len ?? null,
    tokenData: upstream.kind !== 'openai',
  })
  if (capture.bytes > capture.limit) {
    throw new GatewayError(
      413,
      'request_too_large',
      `request too large to capture: its record could need ${(capture.bytes / 1048576).toFixed(1)} MiB (the body, the engine body and ids and logprobs for a ${capture.windowTokens}-token window), over the ${capture.limit / 1048576} MiB one capture can carry; the engine was not called`,
    )
  }
  const facts: CallFacts = {
    adapter,
    access,
    parsed,
    completionId: newCompletionId(),
    engineBody,
    requestText,
    requestDelta,
    maxSessionBytes: config.maxSessionBytes,
    originalText,
    startedAt,
    startedClock,
    route: target.route,
  }
  const responseContext: ResponseContext = {
    modelRequested: parsed.modelRequested,
    completionId: facts.completionId,
    streamUsage: parsed.streamUsage,
    created: Math.floor(startedAt / 1000),
    responseOptions: parsed.responseOptions,
  }
  const call = (signal: AbortSignal) =>
    callUpstream({
      upstream,
      body: facts.requestText,
      apiKey: target.fetch ? null : upstreamKeyFor(config, upstream.url),
      timeoutMs: config.upstreamTimeoutMs,
      signal,
      ...(target.fetch ? { fetch: target.fetch } : {}),
    })
  const record = (outcome: UpstreamOutcome, abandoned: boolean) => recordCall(facts, target, outcome, abandoned)

  if (parsed.stream) return streamAnswer(context, adapter, responseContext, call, record)

  const prepared = performance.now()
  // A client that disconnects cancels this handler; under waitUntil the call still ends with its record (abandoned).
  const settled = (async () => {
    const outcome = await call(request.signal)
    const answered = performance.now()
    await record(outcome, request.signal.aborted)
    return { outcome, answered, committed: performance.now() }
  })()
  context.waitUntil(settled)
  const { outcome, answered, committed } = await settled
  // Server-Timing lets operators (and bench:gateway) see where the edge's time goes.
  const headers = {
    'server-timing': `prepare;dur=${(prepared - startedClock).toFixed(2)}, upstream;dur=${(answered - prepared).toFixed(2)}, capture;dur=${(committed - answered).toFixed(2)}`,
  }
  if (!outcome.ok) {
    const { status, body } = adapter.buildError(outcome.error)
    // Who failed: the engine (relayed, status kept) or the edge itself (see app.onError).
    return Response.json(body, { status, headers: { ...headers, 'x-rollgate-error-source': 'upstream' } })
  }
  return Response.json(adapter.buildResponse(outcome.completion, responseContext), { headers })
}

/**
 * Commit the record; a rollout call also returns its generation-gate lease and carries the gate's policy version.
 * A finalized session refuses the record: the caller gets a 409 and not the answer (it would not be covered by the
 * stored trajectory).
 */
async function recordCall(facts: CallFacts, target: CallTarget, outcome: UpstreamOutcome, abandoned: boolean) {
  try {
    const result = await commitRecord(facts, target, outcome, abandoned)
    noteSessionBytes(facts.access.sessionId, result.session_bytes, facts.maxSessionBytes)
    return result
  } catch (error) {
    // Stryker disable next-line StringLiteral: any fallback but the closed marker rethrows alike; it only keeps a non-Error rejection from a TypeError
    const message = (error as Error).message ?? ''
    if (message.startsWith(SESSION_CLOSED)) throw new GatewayError(409, 'invalid_request', message.slice(SESSION_CLOSED.length).trim())
    throw error
  }
}

function commitRecord(facts: CallFacts, target: CallTarget, outcome: UpstreamOutcome, abandoned: boolean) {
  const status = abandoned ? 'abandoned' : outcome.ok ? 'ok' : 'failed'
  const input = completionInput(facts, outcome, status)
  // A tunnelled call went to the runner's engine, not to the session's configured upstream.
  input.provenance.upstream_url = target.upstream.url
  input.provenance.upstream_kind = target.upstream.kind
  if (target.policyVersion !== null) input.provenance.policy_version = target.policyVersion
  if (target.ticket === null) return facts.access.stub.record(input)
  return (facts.access.stub as unknown as Pick<SessionRolloutRpc, 'recordAdmitted'>).recordAdmitted(target.ticket, input)
}

function streamAnswer(
  context: ProxyContext,
  adapter: ProviderAdapter,
  responseContext: ResponseContext,
  call: (signal: AbortSignal) => Promise<UpstreamOutcome>,
  record: (outcome: UpstreamOutcome, abandoned: boolean) => Promise<unknown>,
): Response {
  const { readable, writable } = new TransformStream<Uint8Array, Uint8Array>()
  const writer = writable.getWriter()
  const encoder = new TextEncoder()
  const streamEncoder = adapter.createStreamEncoder(responseContext)
  const clientGone = new AbortController()
  writer.closed.catch(() => clientGone.abort())
  context.request.signal.addEventListener('abort', () => clientGone.abort())
  const write = (text: string) => {
    if (!text || clientGone.signal.aborted) return
    // Stryker disable next-line ArrowFunction: a failed write has errored the stream, so `writer.closed` aborts too (kept: workerd sees a gone client first as a failed write)
    writer.write(encoder.encode(text)).catch(() => clientGone.abort())
  }

  const run = async () => {
    // First body bytes at once (the protocol's first frame, else its keep-alive): some harness idle timers
    // start on the headers and count body silence, and the engine may take seconds before the answer.
    write(streamEncoder.start() || streamEncoder.heartbeat())
    const heartbeat = setInterval(() => write(streamEncoder.heartbeat()), context.config.heartbeatMs)
    let outcome: UpstreamOutcome
    try {
      outcome = await call(clientGone.signal)
    } finally {
      clearInterval(heartbeat)
    }
    const abandoned = clientGone.signal.aborted
    try {
      await record(outcome, abandoned)
    } catch (error) {
      // The capture failed: the client must not get an answer we did not keep.
      const failure =
        error instanceof GatewayError
          ? error.toNormalized()
          : { status: 500, kind: 'internal' as const, message: `capture failed: ${(error as Error).message}` }
      write(streamEncoder.error(failure))
      await writer.close().catch(() => {})
      return
    }
    write(outcome.ok ? streamEncoder.completion(outcome.completion) : streamEncoder.error(outcome.error))
    await writer.close().catch(() => {})
  }
  context.waitUntil(run())
  return new Response(readable, { headers: SSE_HEADERS })
}
