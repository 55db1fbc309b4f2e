/**
 * @module engine/server
 * The stand-in inference engine: a `node:http` server indistinguishable from vLLM's
 * OpenAI-compatible server for a capturing proxy (Qwen3 tokenizer and chat template, token ids,
 * float32 logprobs, reasoning and hermes tool parsing), with a pluggable policy instead of a
 * model, plus test controls under `/_stand-in/` (faults, stats, policy switch).
 *
 * Hot path: identical request bodies (benchmarks replay them) hit an LRU of finished
 * generations keyed by the raw body, so only ids, timestamps and serialization are redone.
 */

import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import { z } from 'zod'
import { type ChatGeneration, generateChat } from './chat-generation.ts'
import { type ChatRequest, parseChatRequest } from './chat-request.ts'
import { randomHex, renderChatCompletion } from './chat-response.ts'
import { chatStreamFrames } from './chat-stream.ts'
import {
  type CompletionGeneration,
  type CompletionRequest,
  completionId,
  completionStreamFrames,
  generateCompletion,
  parseCompletionRequest,
  renderCompletion,
} from './completions.ts'
import type { EngineContext, ResponseMeta } from './engine-context.ts'
import { badRequest, EngineError, errorBody } from './errors.ts'
import { type Fault, FaultQueue, faultListSchema } from './faults.ts'
import { readBody, sendEmpty, sendEventStream, sendJson } from './http-io.ts'
import { LruCache } from './lru-cache.ts'
import { buildPolicy, POLICY_NAMES, type PolicyName } from './policy/registry.ts'
import { type ScriptTurn, scriptSchema } from './policy/script.ts'
import type { Qwen3 } from './qwen3.ts'
import { loadQwen3 } from './qwen3.ts'
import { handleDetokenize, handleTokenize } from './tokenize.ts'

export const DEFAULT_SERVED_MODEL = 'Qwen/Qwen3-8B'
export const DEFAULT_MAX_MODEL_LEN = 32768
export const DEFAULT_HOST = '127.0.0.1'
/** vLLM version reported by `GET /version`. */
export const REPORTED_VLLM_VERSION = '0.11.0'
/** Idle keep-alive; above most clients' pool timeouts so benchmarks never race a close. */
const KEEP_ALIVE_TIMEOUT_MS = 30_000
const RESPONSE_CACHE_MAX_ENTRIES = 1024
/** Summed raw body characters (plus prompt ids) kept in the response cache. */
const RESPONSE_CACHE_MAX_CHARS = 64 * 1024 * 1024

export interface EngineOptions {
  /** 0 (default) picks an ephemeral port. */
  port?: number
  host?: string
  policy?: PolicyName
  /** Turns for the `script` policy (and for `drift` wrapping it). */
  script?: ScriptTurn[] | null
  seed?: number
  /** Share of eligible tokens split in drift mode (default 0.2). */
  driftRate?: number
  /** Base delay before answering each generation request. */
  latencyMs?: number
  /** Extra delay per sampled token (between SSE frames when streaming). */
  tokenDelayMs?: number
  servedModel?: string
  maxModelLen?: number
  /** Accept any `model` value instead of vLLM's 404 for unknown models. */
  acceptAnyModel?: boolean
  /** Faults queued at start (see {@link Fault}). */
  faults?: Fault[]
  /** Reuse finished generations for byte-identical bodies (default true). */
  responseCache?: boolean
}

export interface PolicyUpdate {
  policy?: PolicyName
  seed?: number
  script?: ScriptTurn[] | null
  driftRate?: number
  latencyMs?: number
  tokenDelayMs?: number
}

export interface PolicyState {
  policy: PolicyName
  seed: number
  script_turns: number | null
  drift_rate: number | null
  latency_ms: number
  token_delay_ms: number
}

export interface EngineStats {
  requests: Record<string, number>
  streams: number
  errors: Record<string, number>
  faults: { applied: number; pending: number }
  in_flight: number
  cache: {
    responses: { hits: number; misses: number; entries: number }
    encode: { hits: number; misses: number; entries: number; chars: number }
  }
  policy: PolicyState
  memory: { rss_mb: number; heap_used_mb: number; external_mb: number }
}

export interface EngineHandle {
  /** Origin, e.g. `http://127.0.0.1:41234` (OpenAI base URL = `${url}/v1`). */
  url: string
  port: number
  close(): Promise<void>
  injectFaults(faults: Fault[]): void
  clearFaults(): number
  setPolicy(update: PolicyUpdate): PolicyState
  stats(): EngineStats
}

interface GenerationRoute<R extends { stream: boolean }, G> {
  stat: string
  parse(body: unknown, context: EngineContext): R
  generate(context: EngineContext, request: R): G
  render(qwen3: Qwen3, generation: G, request: R, meta: ResponseMeta): string
  frames(qwen3: Qwen3, generation: G, request: R, meta: ResponseMeta): string[]
  newId(): string
  completionTokens(generation: G): number
  promptTokens(generation: G): number
}

const chatRoute: GenerationRoute<ChatRequest, ChatGeneration> = {
  stat: 'chat_completions',
  parse: parseChatRequest,
  generate: generateChat,
  render: renderChatCompletion,
  frames: chatStreamFrames,
  newId: () => `chatcmpl-${randomHex()}`,
  completionTokens: (generation) => generation.choices.reduce((sum, choice) => sum + choice.ids.length, 0),
  promptTokens: (generation) => generation.prompt.ids.length,
}

const completionRoute: GenerationRoute<CompletionRequest, CompletionGeneration> = {
  stat: 'completions',
  parse: parseCompletionRequest,
  generate: generateCompletion,
  render: renderCompletion,
  frames: completionStreamFrames,
  newId: completionId,
  completionTokens: (generation) => generation.choices.reduce((sum, choice) => sum + choice.ids.length, 0),
  promptTokens: (generation) => generation.prompts.reduce((sum, prompt) => sum + prompt.ids.length, 0),
}

const policyUpdateSchema = z
  .object({
    policy: z.enum(POLICY_NAMES).optional(),
    seed: z.number().int().optional(),
    script: scriptSchema.nullable().optional(),
    drift_rate: z.number().min(0).max(1).optional(),
    latency_ms: z.number().min(0).optional(),
    token_delay_ms: z.number().min(0).optional(),
  })
  .strict()

export async function startEngine(options: EngineOptions = {}): Promise<EngineHandle> {
  const qwen3 = await loadQwen3()
  let policyName: PolicyName = options.policy ?? 'scripted'
  let script: ScriptTurn[] | null = options.script ?? null
  let driftRate = options.driftRate
  let latencyMs = options.latencyMs ?? 0
  let tokenDelayMs = options.tokenDelayMs ?? 0
  const context: EngineContext = {
    qwen3,
    policy: buildPolicy({ policy: policyName, script, driftRate }, qwen3),
    seed: options.seed ?? 0,
    servedModel: options.servedModel ?? DEFAULT_SERVED_MODEL,
    maxModelLen: options.maxModelLen ?? DEFAULT_MAX_MODEL_LEN,
    acceptAnyModel: options.acceptAnyModel ?? false,
  }
  const useCache = options.responseCache ?? true
  const cache = new LruCache<string, { request: unknown; generation: unknown }>({
    maxEntries: RESPONSE_CACHE_MAX_ENTRIES,
    maxWeight: RESPONSE_CACHE_MAX_CHARS,
  })
  const faults = new FaultQueue()
  faults.push(options.faults ?? [])
  const requestCounts: Record<string, number> = { total: 0 }
  const errorCounts: Record<string, number> = {}
  let streams = 0
  let inFlight = 0
  const count = (key: string) => {
    requestCounts[key] = (requestCounts[key] ?? 0) + 1
  }

  const policyState = (): PolicyState => ({
    policy: policyName,
    seed: context.seed,
    script_turns: script === null ? null : script.length,
    drift_rate: policyName === 'drift' ? (driftRate ?? null) : null,
    latency_ms: latencyMs,
    token_delay_ms: tokenDelayMs,
  })

  const setPolicy = (update: PolicyUpdate): PolicyState => {
    const nextName = update.policy ?? policyName
    const nextScript = update.script === undefined ? script : update.script
    const nextRate = update.driftRate ?? driftRate
    context.policy = buildPolicy({ policy: nextName, script: nextScript, driftRate: nextRate }, qwen3)
    policyName = nextName
    script = nextScript
    driftRate = nextRate
    if (update.seed !== undefined) context.seed = update.seed
    if (update.latencyMs !== undefined) latencyMs = update.latencyMs
    if (update.tokenDelayMs !== undefined) tokenDelayMs = update.tokenDelayMs
    cache.clear()
    return policyState()
  }

  const stats = (): EngineStats => ({
    requests: { ...requestCounts },
    streams,
    errors: { ...errorCounts },
    faults: { applied: faults.applied, pending: faults.pending.length },
    in_flight: inFlight,
    cache: {
      responses: { hits: cache.hits, misses: cache.misses, entries: cache.size },
      encode: qwen3.encodeCacheStats(),
    },
    policy: policyState(),
    memory: memoryMb(),
  })

  const sendError = (response: ServerResponse, error: EngineError) => {
    errorCounts[error.status] = (errorCounts[error.status] ?? 0) + 1
    if (!response.headersSent) sendJson(response, error.status, errorBody(error))
    else response.destroy()
  }

  async function serveGeneration<R extends { stream: boolean }, G>(
    route: GenerationRoute<R, G>,
    request: IncomingMessage,
    response: ServerResponse,
  ): Promise<void> {
    const fault = faults.take()
    const raw = await readBody(request)
    if (fault?.delay_ms !== undefined) await sleep(fault.delay_ms)
    if (fault?.reset === true) {
      request.socket.destroy()
      return
    }
    if (fault?.status !== undefined) {
      const body =
        fault.body === undefined
          ? errorBody(new EngineError(fault.status, `Injected fault (HTTP ${fault.status})`))
          : typeof fault.body === 'string'
            ? fault.body
            : JSON.stringify(fault.body)
      errorCounts[fault.status] = (errorCounts[fault.status] ?? 0) + 1
      sendJson(response, fault.status, body, { headers: fault.headers, truncate: fault.truncate })
      return
    }
    if (latencyMs > 0) await sleep(latencyMs)
    const key = `${route.stat}\n${raw}`
    let entry = useCache ? (cache.get(key) as { request: R; generation: G } | undefined) : undefined
    if (entry === undefined) {
      const parsed = route.parse(parseJson(raw), context)
      entry = { request: parsed, generation: route.generate(context, parsed) }
      if (useCache) cache.set(key, entry, raw.length + route.promptTokens(entry.generation) * 8)
    }
    const meta: ResponseMeta = {
      id: route.newId(),
      created: Math.floor(Date.now() / 1000),
      model: context.servedModel,
    }
    const { request: parsed, generation } = entry
    if (parsed.stream) {
      streams++
      const frames = route.frames(qwen3, generation, parsed, meta)
      await sendEventStream(response, frames, {
        frameDelayMs: tokenDelayMs,
        truncate: fault?.truncate,
        headers: fault?.headers,
      })
      return
    }
    const body = route.render(qwen3, generation, parsed, meta)
    if (tokenDelayMs > 0) await sleep(tokenDelayMs * route.completionTokens(generation))
    sendJson(response, 200, body, { truncate: fault?.truncate, headers: fault?.headers })
  }

  async function serveControl(method: string, path: string, request: IncomingMessage, response: ServerResponse): Promise<boolean> {
    if (path === '/_stand-in/faults') {
      if (method === 'POST') {
        const parsed = faultListSchema.safeParse(parseJson(await readBody(request)))
        if (!parsed.success) throw badRequest(`Invalid faults: ${z.prettifyError(parsed.error)}`)
        faults.push(parsed.data)
        sendJson(response, 200, JSON.stringify({ pending: faults.pending.length }))
        return true
      }
      if (method === 'DELETE') {
        sendJson(response, 200, JSON.stringify({ cleared: faults.clear() }))
        return true
      }
      if (method === 'GET') {
        sendJson(response, 200, JSON.stringify({ pending: faults.pending, applied: faults.applied }))
        return true
      }
    }
    if (path === '/_stand-in/stats' && method === 'GET') {
      sendJson(response, 200, JSON.stringify(stats()))
      return true
    }
    if (path === '/_stand-in/policy') {
      if (method === 'GET') {
        sendJson(response, 200, JSON.stringify(policyState()))
        return true
      }
      if (method === 'POST') {
        const parsed = policyUpdateSchema.safeParse(parseJson(await readBody(request)))
        if (!parsed.success) throw badRequest(`Invalid policy update: ${z.prettifyError(parsed.error)}`)
        const update = parsed.data
        try {
          const state = setPolicy({
            policy: update.policy,
            seed: update.seed,
            script: update.script,
            driftRate: update.drift_rate,
            latencyMs: update.latency_ms,
            tokenDelayMs: update.token_delay_ms,
          })
          sendJson(response, 200, JSON.stringify(state))
        } catch (error) {
          throw badRequest((error as Error).message)
        }
        return true
      }
    }
    return false
  }

  async function route(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const method = request.method ?? 'GET'
    const rawUrl = request.url ?? '/'
    const queryAt = rawUrl.indexOf('?')
    const path = queryAt < 0 ? rawUrl : rawUrl.slice(0, queryAt)
    requestCounts.total = (requestCounts.total ?? 0) + 1
    switch (`${method} ${path}`) {
      case 'POST /v1/chat/completions':
        count(chatRoute.stat)
        return serveGeneration(chatRoute, request, response)
      case 'POST /v1/completions':
        count(completionRoute.stat)
        return serveGeneration(completionRoute, request, response)
      case 'POST /tokenize':
        count('tokenize')
        return sendJson(response, 200, handleTokenize(context, parseJson(await readBody(request))))
      case 'POST /detokenize':
        count('detokenize')
        return sendJson(response, 200, handleDetokenize(context, parseJson(await readBody(request))))
      case 'GET /v1/models':
        count('models')
        return sendJson(response, 200, modelsBody(context))
      case 'GET /health':
        count('health')
        return sendEmpty(response, 200)
      case 'GET /version':
        count('version')
        return sendJson(response, 200, JSON.stringify({ version: REPORTED_VLLM_VERSION }))
    }
    if (path.startsWith('/_stand-in/')) {
      count('control')
      if (await serveControl(method, path, request, response)) return
    }
    count('not_found')
    const known = ['/v1/chat/completions', '/v1/completions', '/tokenize', '/detokenize', '/v1/models', '/health']
    if (known.includes(path)) return sendJson(response, 405, '{"detail":"Method Not Allowed"}')
    sendJson(response, 404, '{"detail":"Not Found"}')
  }

  const server: Server = createServer((request, response) => {
    inFlight++
    response.once('close', () => {
      inFlight--
    })
    route(request, response).catch((error: unknown) => {
      const engineError = error instanceof EngineError ? error : new EngineError(500, `Internal error: ${(error as Error).message}`)
      sendError(response, engineError)
    })
  })
  server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS
  server.headersTimeout = KEEP_ALIVE_TIMEOUT_MS + 1000

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(options.port ?? 0, options.host ?? DEFAULT_HOST, () => {
      server.off('error', reject)
      resolve()
    })
  })
  const address = server.address() as AddressInfo
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address
  return {
    url: `http://${host}:${address.port}`,
    port: address.port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections()
      }),
    injectFaults: (list) => faults.push(list),
    clearFaults: () => faults.clear(),
    setPolicy,
    stats,
  }
}

function memoryMb(): EngineStats['memory'] {
  const usage = process.memoryUsage()
  const mb = (bytes: number) => Math.round(bytes / 1024 / 1024)
  return {
    rss_mb: mb(usage.rss),
    heap_used_mb: mb(usage.heapUsed),
    external_mb: mb(usage.external),
  }
}

function parseJson(raw: string): unknown {
  try {
    return JSON.parse(raw)
  } catch (error) {
    throw badRequest(`JSON decode error: ${(error as Error).message}`)
  }
}

function modelsBody(context: EngineContext): string {
  const created = Math.floor(Date.now() / 1000)
  return JSON.stringify({
    object: 'list',
    data: [
      {
        id: context.servedModel,
        object: 'model',
        created,
        owned_by: 'vllm',
        root: context.servedModel,
        parent: null,
        max_model_len: context.maxModelLen,
        permission: [
          {
            id: `modelperm-${randomHex()}`,
            object: 'model_permission',
            created,
            allow_create_engine: false,
            allow_sampling: true,
            allow_logprobs: true,
            allow_search_indices: false,
            allow_view: true,
            allow_fine_tuning: false,
            organization: '*',
            group: null,
            is_blocking: false,
          },
        ],
      },
    ],
  })
}
