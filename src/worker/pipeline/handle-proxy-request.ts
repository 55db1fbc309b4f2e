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
import { buildEngineRequest, engineRequestText } from '../../normalize/engine/engine-request.ts'
import { SSE_HEADERS } from '../../normalize/sse.ts'
import type { EdgeConfig } from '../config.ts'
import { type UpstreamOutcome, callUpstream } from './call-upstream.ts'
import { type CallFacts, completionInput } from './completion-input.ts'
import { parseJsonBody, readBodyText } from './read-body.ts'
import { resolvePreviousResponseBody, sessionCompletionLookup } from './resolve-previous-response.ts'
import { authenticateSession } from './session-access.ts'

export interface ProxyContext {
  env: Env
  config: EdgeConfig
  request: Request
  url: URL
  path: { token?: string; agent?: string }
  waitUntil(promise: Promise<unknown>): void
}

export function newCompletionId(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(12))
  let hex = ''
  for (const byte of bytes) hex += byte.toString(16).padStart(2, '0')
  return `cmpl_${hex}`
}

export async function handleProxyRequest(context: ProxyContext, adapter: ProviderAdapter): Promise<Response> {
  const startedAt = Date.now()
  const startedClock = performance.now()
  const { env, config, request, url } = context
  const access = await authenticateSession(env, config, request, url, context.path)
  const originalText = await readBodyText(request, config.maxBodyBytes)
  let body = parseJsonBody(originalText)
  if (adapter.id === 'openai-responses') body = await resolvePreviousResponseBody(body, sessionCompletionLookup(access.stub))
  const parsed = adapter.parseRequest(body, url)
  const upstream = access.config.upstream
  const engineOptions = { kind: upstream.kind, servedModel: upstream.served_model }
  const engineBody = buildEngineRequest(parsed.request, engineOptions)
  const facts: CallFacts = {
    adapter,
    access,
    parsed,
    completionId: newCompletionId(),
    engineBody,
    requestText: engineRequestText(engineBody, { request: parsed.request, body, text: originalText }, engineOptions),
    originalText,
    startedAt,
    startedClock,
    route: 'direct',
  }
  const responseContext: ResponseContext = {
    modelRequested: parsed.modelRequested,
    completionId: facts.completionId,
    streamUsage: parsed.streamUsage,
    created: Math.floor(startedAt / 1000),
    ...(parsed.responseOptions === undefined ? {} : { responseOptions: parsed.responseOptions }),
  }
  const call = (signal: AbortSignal) =>
    callUpstream({ upstream, body: facts.requestText, apiKey: config.upstreamApiKey, timeoutMs: config.upstreamTimeoutMs, signal })

  if (parsed.stream) return streamAnswer(context, adapter, facts, responseContext, call)

  const prepared = performance.now()
  const outcome = await call(request.signal)
  const answered = performance.now()
  const abandoned = request.signal.aborted
  await record(facts, outcome, abandoned)
  const committed = performance.now()
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

function record(facts: CallFacts, outcome: UpstreamOutcome, abandoned: boolean) {
  const status = abandoned ? 'abandoned' : outcome.ok ? 'ok' : 'failed'
  return facts.access.stub.record(completionInput(facts, outcome, status))
}

function streamAnswer(
  context: ProxyContext,
  adapter: ProviderAdapter,
  facts: CallFacts,
  responseContext: ResponseContext,
  call: (signal: AbortSignal) => Promise<UpstreamOutcome>,
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
    writer.write(encoder.encode(text)).catch(() => clientGone.abort())
  }

  const run = async () => {
    write(streamEncoder.start())
    const heartbeat = setInterval(() => write(streamEncoder.heartbeat()), context.config.heartbeatMs)
    let outcome: UpstreamOutcome
    try {
      outcome = await call(clientGone.signal)
    } finally {
      clearInterval(heartbeat)
    }
    const abandoned = clientGone.signal.aborted
    try {
      await record(facts, outcome, abandoned)
    } catch (error) {
      // The capture failed: the client must not get an answer we did not keep.
      write(streamEncoder.error({ status: 500, kind: 'internal', message: `capture failed: ${(error as Error).message}` }))
      await writer.close().catch(() => {})
      return
    }
    write(outcome.ok ? streamEncoder.completion(outcome.completion) : streamEncoder.error(outcome.error))
    await writer.close().catch(() => {})
  }
  context.waitUntil(run())
  return new Response(readable, { headers: SSE_HEADERS })
}
