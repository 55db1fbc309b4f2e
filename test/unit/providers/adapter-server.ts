/**
 * @module
 * A tiny loopback HTTP server that speaks a harness API through the adapters exactly as the edge does:
 * detect → parse → (scripted engine completion) → JSON answer or synthetic stream with keep-alives, and
 * provider-shaped errors. The official SDKs talk to it, so they parse our real bytes.
 */
import { type IncomingMessage, type ServerResponse, createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { type ResponseContext, RequestValidationError } from '../../../src/normalize/adapter.ts'
import { detectAdapter } from '../../../src/normalize/registry.ts'
import { SSE_HEADERS } from '../../../src/normalize/sse.ts'
import type { Completion, NormalizedError, ParsedRequest } from '../../../src/normalize/types.ts'

export interface RecordedCall {
  path: string
  headers: IncomingMessage['headers']
  body: unknown
  parsed: ParsedRequest | null
  completionId: string
}

/** What the scripted engine does for one call. */
export type Outcome = { completion: Completion } | { error: NormalizedError } | { streamError: NormalizedError }

export interface AdapterServer {
  url: string
  calls: RecordedCall[]
  close(): Promise<void>
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

export async function startAdapterServer(policy: (parsed: ParsedRequest, call: number) => Outcome): Promise<AdapterServer> {
  const calls: RecordedCall[] = []
  const server = createServer((request, response) => {
    handle(request, response).catch((error) => {
      response.statusCode = 500
      response.end(String(error))
    })
  })

  async function handle(request: IncomingMessage, response: ServerResponse) {
    const chunks: Buffer[] = []
    for await (const chunk of request) chunks.push(chunk as Buffer)
    const url = new URL(request.url ?? '/', 'http://127.0.0.1')
    const headers = new Headers()
    for (const [name, value] of Object.entries(request.headers)) if (typeof value === 'string') headers.set(name, value)
    const adapter = detectAdapter(url, headers)
    const json = (status: number, body: unknown) => {
      response.writeHead(status, { 'content-type': 'application/json' })
      response.end(JSON.stringify(body))
    }
    if (!adapter) return json(404, { error: { message: 'no route' } })
    const body: unknown = chunks.length ? JSON.parse(Buffer.concat(chunks).toString('utf8')) : null
    const completionId = `cmpl_sdk${calls.length}`
    const call: RecordedCall = { path: url.pathname + url.search, headers: request.headers, body, parsed: null, completionId }
    calls.push(call)
    try {
      if (adapter.countTokens?.matches(url)) {
        const tokenize = adapter.countTokens.parseRequest(body, url)
        return json(200, adapter.countTokens.buildResponse(JSON.stringify(tokenize.messages).length))
      }
      call.parsed = adapter.parseRequest(body, url)
    } catch (error) {
      if (!(error instanceof RequestValidationError)) throw error
      const built = adapter.buildError({ status: error.status, kind: 'invalid_request', message: error.message, param: error.param })
      return json(built.status, built.body)
    }
    const parsed = call.parsed
    const context: ResponseContext = {
      modelRequested: parsed.modelRequested,
      completionId,
      streamUsage: parsed.streamUsage,
      created: 1_760_000_000,
      responseOptions: parsed.responseOptions,
    }
    const outcome = policy(parsed, calls.length - 1)
    if (!parsed.stream) {
      if ('completion' in outcome) return json(200, adapter.buildResponse(outcome.completion, context))
      const built = adapter.buildError('error' in outcome ? outcome.error : outcome.streamError)
      return json(built.status, built.body)
    }
    if ('error' in outcome) {
      const built = adapter.buildError(outcome.error)
      return json(built.status, built.body)
    }
    response.writeHead(200, SSE_HEADERS)
    const encoder = adapter.createStreamEncoder(context)
    const write = (text: string) => text && response.write(text)
    write(encoder.start())
    write(encoder.heartbeat())
    await sleep(5)
    write(encoder.heartbeat())
    write('completion' in outcome ? encoder.completion(outcome.completion) : encoder.error(outcome.streamError))
    response.end()
  }

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    calls,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections()
        server.close((error) => (error ? reject(error) : resolve()))
      }),
  }
}

/** Fail the test if an SDK (or anything else) warns: every answer must be accepted silently. */
export function captureWarnings() {
  const seen: string[] = []
  const original = { warn: console.warn, error: console.error, emitWarning: process.emitWarning }
  console.warn = (...args: unknown[]) => void seen.push(`console.warn: ${args.map(String).join(' ')}`)
  console.error = (...args: unknown[]) => void seen.push(`console.error: ${args.map(String).join(' ')}`)
  process.emitWarning = ((warning: string | Error) => void seen.push(`process warning: ${String(warning)}`)) as typeof process.emitWarning
  return {
    seen,
    restore() {
      console.warn = original.warn
      console.error = original.error
      process.emitWarning = original.emitWarning
    },
  }
}

export function engineCompletion(
  message: Completion['message'],
  finish: 'stop' | 'length' | 'tool_calls' = message.tool_calls?.length ? 'tool_calls' : 'stop',
  extra: Partial<Completion> = {},
): Completion {
  return {
    id: 'chatcmpl-engine',
    created: 1_760_000_000,
    model: 'Qwen/Qwen3-8B',
    message,
    finishReason: { unified: finish === 'tool_calls' ? 'tool-calls' : finish, raw: finish },
    stopReason: null,
    usage: { inputTokens: 900, cachedInputTokens: 300, outputTokens: 42, reasoningTokens: null },
    promptTokenIds: null,
    responseTokenIds: null,
    responseLogprobs: null,
    logprobsMode: null,
    ...extra,
  }
}
