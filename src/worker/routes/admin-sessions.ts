/**
 * @module
 * Control plane for capture sessions (admin bearer token): create, inspect, list completions.
 */
import { upstreamUrlSchema } from '../../contract/upstream-url.ts'
import { Hono } from 'hono'
import { z } from 'zod'
import { upstreamKindSchema } from '../../contract/completion-record.ts'
import { type BuilderName, builderNameSchema } from '../../contract/trajectory.ts'
import { toPolarCompletionRecord } from '../../reconstruct/index.ts'
import type { SessionConfig } from '../../durable/session/record.ts'
import { logError } from '../../contract/log.ts'
import { parseOrThrow } from '../../normalize/zod-issues.ts'
import { discoverServedModel } from '../../normalize/engine/served-model.ts'
import { createSessionToken } from '../../contract/session-token.ts'
import { edgeConfig } from '../config.ts'
import { GatewayError } from '../errors.ts'
import { parseJsonBody, parseJsonWithinLimits, readBodyText } from '../pipeline/read-body.ts'
import { sessionStub } from '../pipeline/session-access.ts'
import { requireAdmin } from './require-admin.ts'
import { builderConfigOrThrow } from '../builder-config.ts'
import { intParam } from '../query.ts'
import { rangedObjectBody, STREAM_HEADERS } from '../stored-stream.ts'

/** Polar's accepted session id shape (`docs/polar-compat.md` §6). */
const SESSION_ID = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/
const MAX_PAGE = 1000
/** Record JSON per completions page (UTF-16 units); the rest comes with `after_seq=next_after_seq`. */
const PAGE_BUDGET_CHARS = 16 * 1024 * 1024
/** Estimated size of one DO RPC answer (an upper estimate; workerd refuses more than 32 MiB). */
const RPC_BUDGET_BYTES = 16 * 1024 * 1024
const MODEL_DISCOVERY_TIMEOUT_MS = 2_000

export const createSessionSchema = z.object({
  session_id: z.string().regex(SESSION_ID, 'session_id must match ^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$').optional(),
  task_id: z.string().min(1).max(256).optional(),
  metadata: z.record(z.string(), z.unknown()).optional(),
  policy_version: z.union([z.string(), z.number()]).optional(),
  /** Lifetime of the returned token (default `ROLLGATE_SESSION_TOKEN_TTL_SECONDS`, 24 h); at most 30 days. */
  token_ttl_seconds: z
    .number()
    .int()
    .positive()
    .max(30 * 24 * 60 * 60)
    .optional(),
  upstream: z
    .object({
      url: upstreamUrlSchema.optional(),
      kind: upstreamKindSchema.optional(),
      served_model: z.string().min(1).nullable().optional(),
      max_model_len: z.number().int().positive().optional(),
    })
    .optional(),
})

function newSessionId(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16))
  let hex = ''
  for (const byte of bytes) hex += byte.toString(16).padStart(2, '0')
  return `ses_${hex}`
}

export const adminSessions = new Hono<{ Bindings: Env }>()

adminSessions.use('*', requireAdmin)

adminSessions.post('/', async (c) => {
  const config = edgeConfig(c.env)
  const body = parseOrThrow(createSessionSchema, parseJsonBody(await readBodyText(c.req.raw, 1024 * 1024)))
  if (!config.signingKey) throw new GatewayError(503, 'internal', 'edge has no signing key configured')
  const sessionId = body.session_id ?? newSessionId()
  const upstreamUrl = (body.upstream?.url ?? config.upstreamUrl).replace(/\/+$/, '')
  const upstreamKind = body.upstream?.kind ?? config.upstreamKind
  let servedModel = body.upstream?.served_model === undefined ? config.servedModel : body.upstream.served_model
  let maxModelLen = body.upstream?.max_model_len ?? null
  // RL proxies send the engine's served model, not the harness's slug (docs/wire-protocols.md §5.5); the
  // engine's window lets the edge clamp output budgets harnesses over-ask for.
  const discoverModel = servedModel === null && body.upstream?.served_model === undefined
  if (upstreamKind !== 'openai' && (discoverModel || maxModelLen === null)) {
    const discovered = await discoverServedModel(upstreamUrl, {
      timeoutMs: MODEL_DISCOVERY_TIMEOUT_MS,
      onFailure: (reason) => logError('session.window_unknown', `${reason}: the window is unknown, output budgets are not lowered`),
    })
    if (discoverModel) servedModel = discovered.id
    maxModelLen ??= discovered.maxModelLen
  }
  const sessionConfig: SessionConfig = {
    session_id: sessionId,
    task_id: body.task_id ?? null,
    created_at: new Date().toISOString(),
    upstream: { url: upstreamUrl, kind: upstreamKind, served_model: servedModel, max_model_len: maxModelLen },
    policy_version: body.policy_version ?? null,
    metadata: body.metadata ?? {},
  }
  const { config: stored, created } = await sessionStub(c.env, sessionId).create(sessionConfig)
  if (!created && body.session_id) throw new GatewayError(409, 'invalid_request', `session ${sessionId} already exists`, 'session_id')
  const expiresAt = Date.now() + (body.token_ttl_seconds ?? config.sessionTokenTtlSeconds) * 1000
  const token = await createSessionToken(sessionId, config.signingKey, { expiresAt })
  const origin = new URL(c.req.url).origin
  return c.json(
    {
      session_id: sessionId,
      token,
      token_expires_at: new Date(Math.floor(expiresAt / 1000) * 1000).toISOString(),
      base_urls: { openai: `${origin}/v1`, anthropic: origin, google: origin },
      prefixed_base_urls: {
        openai: `${origin}/s/${token}/v1`,
        anthropic: `${origin}/s/${token}`,
        google: `${origin}/s/${token}`,
      },
      created_at: stored.created_at,
      task_id: stored.task_id,
      upstream: stored.upstream,
    },
    201,
  )
})

adminSessions.get('/:id', async (c) => {
  const summary = await sessionStub(c.env, c.req.param('id')).summary()
  if (!summary) throw new GatewayError(404, 'not_found', `session ${c.req.param('id')} not found`)
  return c.json({
    session_id: summary.config.session_id,
    task_id: summary.config.task_id,
    created_at: summary.config.created_at,
    upstream: summary.config.upstream,
    policy_version: summary.config.policy_version,
    metadata: summary.config.metadata,
    completion_count: summary.completion_count,
    storage: summary.storage,
    finalized: summary.finalized,
  })
})

export const trajectoryQuerySchema = z.object({
  builder: builderNameSchema.default('prefix_merging'),
  config: z.record(z.string(), z.unknown()).optional(),
  // `session-result` is the offline script's old spelling of `session_result`: both are accepted.
  format: z.preprocess(
    (value) => (value === 'session-result' ? 'session_result' : value),
    z.enum(['trajectory', 'session_result', 'nemo-gym', 'sft', 'sft-tokens']).default('trajectory'),
  ),
})

/** `GET …/trajectory`: without `builder`, a rollout session's own (its task's, the one its rewards belong to), else prefix_merging. */
export const trajectoryGetQuerySchema = trajectoryQuerySchema.extend({ builder: builderNameSchema.optional() })

function trajectoryQuery(query: Record<string, string>) {
  let config: unknown
  if (query.config !== undefined) {
    config = parseJsonWithinLimits(query.config, 'config')
  }
  const parsed = parseOrThrow(trajectoryGetQuerySchema, { ...query, config })
  if (parsed.builder === undefined && parsed.config !== undefined) builderConfigOrThrow('prefix_merging', parsed.config)
  return parsed.builder === undefined ? parsed : checkBuilderConfig({ ...parsed, builder: parsed.builder })
}

/** Reject a bad builder config with a 400 naming the key here, before the session does any work. */
function checkBuilderConfig<T extends { builder: BuilderName; config?: Record<string, unknown> | undefined }>(request: T): T {
  builderConfigOrThrow(request.builder, request.config)
  return request
}

/**
 * Trajectory of a session (`?builder=per_request|prefix_merging&config={…}&format=…`). An evaluated rollout
 * session's carries its evaluation (its task's result); `x-rollgate-evaluation` says whether it does
 * (`TrajectoryEvaluation`), `x-rollgate-rollout-status` the rollout status and `x-rollgate-builder` its task's builder (absent for a bare session).
 */
adminSessions.get('/:id/trajectory', async (c) => {
  const query = trajectoryQuery(c.req.query())
  const stub = sessionStub(c.env, c.req.param('id'))
  const summary = await stub.summary()
  if (!summary) throw new GatewayError(404, 'not_found', `session ${c.req.param('id')} not found`)
  // Streamed, never one string: from R2 when finalize wrote this very trajectory (a bare session: a rollout
  // session's export is its evaluated result), else built while it is sent.
  const stored = summary.finalized
  if (
    query.format === 'trajectory' &&
    stored &&
    summary.rollout_status === null &&
    stored.builder === (query.builder ?? 'prefix_merging') &&
    JSON.stringify(stored.config ?? null) === JSON.stringify(query.config ?? null)
  ) {
    const body = await rangedObjectBody(c.env.BLOBS, stored.trajectory_key)
    if (body)
      return c.body(body, 200, {
        'content-type': 'application/json',
        'x-rollgate-trajectory-key': stored.trajectory_key,
        'x-rollgate-evaluation': 'not_evaluated',
        ...STREAM_HEADERS,
      })
  }
  const exported = await stub.trajectoryStream({
    format: query.format,
    ...(query.builder ? { builder: query.builder } : {}),
    ...(query.config ? { config: query.config } : {}),
  })
  return c.body(exported.body, 200, {
    'content-type': exported.contentType,
    'x-rollgate-evaluation': exported.evaluation,
    ...(exported.rollout_status ? { 'x-rollgate-rollout-status': exported.rollout_status } : {}),
    ...(exported.builder ? { 'x-rollgate-builder': exported.builder } : {}),
    ...STREAM_HEADERS,
  })
})

/** Build the trajectory and write it to R2; body `{builder?, config?}`. */
adminSessions.post('/:id/finalize', async (c) => {
  const text = await readBodyText(c.req.raw, 1024 * 1024)
  const body = checkBuilderConfig(parseOrThrow(trajectoryQuerySchema.omit({ format: true }), text.trim() ? parseJsonBody(text) : {}))
  const stub = sessionStub(c.env, c.req.param('id'))
  if (!(await stub.config())) throw new GatewayError(404, 'not_found', `session ${c.req.param('id')} not found`)
  const outcome = await stub.finalize({ builder: body.builder, ...(body.config ? { config: body.config } : {}) })
  if (!outcome.ok) {
    const { builder, config } = outcome.finalization
    throw new GatewayError(
      409,
      'invalid_request',
      `session ${c.req.param('id')} was already finalized at ${outcome.finalization.finalized_at} with builder ${builder} and config ${JSON.stringify(config ?? null)}`,
      'builder',
    )
  }
  return c.json({ ...outcome.finalization, already_finalized: !outcome.created })
})

/** The trajectory finalize wrote to R2, read back as stored (404 until the session is finalized). */
adminSessions.get('/:id/trajectory/stored', async (c) => {
  const summary = await sessionStub(c.env, c.req.param('id')).summary()
  if (!summary) throw new GatewayError(404, 'not_found', `session ${c.req.param('id')} not found`)
  if (!summary.finalized) throw new GatewayError(404, 'not_found', `session ${c.req.param('id')} is not finalized`)
  const body = await rangedObjectBody(c.env.BLOBS, summary.finalized.trajectory_key)
  if (!body) throw new GatewayError(404, 'not_found', `stored trajectory ${summary.finalized.trajectory_key} is missing from R2`)
  return c.body(body, 200, {
    'content-type': 'application/json',
    'x-rollgate-trajectory-key': summary.finalized.trajectory_key,
    ...STREAM_HEADERS,
  })
})

/**
 * `?format=polar`: Polar's `CompletionRecord` shape (token data inside a vLLM-shaped `response`,
 * Rollgate's extra fields under `rollgate`). Polar records only answered calls, so records whose
 * status is not `ok` are listed in `excluded_completions` instead (nothing disappears).
 */
adminSessions.get('/:id/completions', async (c) => {
  const format = c.req.query('format') ?? 'rollgate'
  if (format !== 'rollgate' && format !== 'polar')
    throw new GatewayError(400, 'invalid_request', 'format must be rollgate or polar', 'format')
  const excluded: string[] = []
  // after_seq: the last seq already read (-1 or empty = from the start); limit: page size, capped at MAX_PAGE.
  const afterSeq = intParam(c.req.query('after_seq'), 'after_seq', -1, { min: -1, max: Number.MAX_SAFE_INTEGER })
  const limit = Math.min(intParam(c.req.query('limit'), 'limit', MAX_PAGE, { min: 1, max: Number.MAX_SAFE_INTEGER }), MAX_PAGE)
  const stub = sessionStub(c.env, c.req.param('id'))
  if (!(await stub.config())) throw new GatewayError(404, 'not_found', `session ${c.req.param('id')} not found`)
  // A page is bounded by size as well as by count: one DO RPC answer may not exceed 32 MiB (workerd), and a
  // record carries its prompt ids and two request bodies (≈150 KB for a Claude Code turn, MBs late in a long
  // rollout), so 1000 records of a long session do not fit. The session answers in size-bounded chunks;
  // the page stops at PAGE_BUDGET_CHARS of JSON and says where to go on (`next_after_seq`).
  const parts: string[] = []
  let chars = 0
  let cursor = afterSeq
  let exhausted = false
  let seen = 0
  while (seen < limit && chars < PAGE_BUDGET_CHARS) {
    const chunk = await stub.completions(cursor, limit - seen, RPC_BUDGET_BYTES)
    if (chunk.length === 0) {
      exhausted = true
      break
    }
    for (const record of chunk) {
      cursor = record.seq
      seen++
      if (format === 'polar' && record.status !== 'ok') {
        excluded.push(
          JSON.stringify({ completion_id: record.completion_id, seq: record.seq, status: record.status, reason: record.status }),
        )
        continue
      }
      const text = JSON.stringify(format === 'polar' ? toPolarCompletionRecord(record) : record)
      parts.push(text)
      chars += text.length
    }
  }
  const nextAfterSeq = !exhausted && seen > 0 ? cursor : null
  const tail = format === 'polar' ? `,"excluded_completions":[${excluded.join(',')}]` : ''
  const body = `{"session_id":${JSON.stringify(c.req.param('id'))},"completions":[${parts.join(',')}]${tail},"next_after_seq":${nextAfterSeq}}`
  return c.body(body, 200, { 'content-type': 'application/json' })
})
