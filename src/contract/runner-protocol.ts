/**
 * @module
 * Edge ↔ runner WebSocket protocol, version 1. Every frame is one JSON text message with a `type`;
 * both directions are validated with `z.discriminatedUnion('type', …)`. Runtime-neutral (zod only):
 * the edge's runner hub and any runner (Node, Python via the JSON schema) share it.
 *
 * Lifecycle: the runner connects to `GET /runners/connect?runner_id=<id>` with its runner token (and,
 * after its first registration, its per-runner secret in `x-rollgate-runner-secret`), sends
 * `register` (capacity, served model, sessions it still holds after a reconnect), then
 * `heartbeat` with stage metrics every `heartbeat_interval_ms`. The edge sends `assign`; the runner
 * answers `ack`, reports `session.status` (INITIALIZING → READY → RUNNING) and `session.finished`.
 *
 * Inference tunnel: the edge sends `tunnel.request` (+ `tunnel.body` frames while `more`), the
 * runner answers `tunnel.head` (+ `tunnel.chunk` frames while `more`) from its local engine, or
 * `tunnel.error`; `tunnel.cancel` aborts a request (client gone, timeout). Bodies are UTF-8 text
 * (the engine API is JSON and SSE), split into frames of at most `TUNNEL_CHUNK_CHARS`.
 *
 * Optional tunnel features, negotiated per connection: the runner lists what it speaks in
 * `register.capabilities`, the edge answers what it accepted in `registered.capabilities` (absent on
 * both sides = plain v1, which keeps working). `tunnel.binary`: the body-carrying frames travel as
 * binary WebSocket messages (`tunnel-frames.ts`: a small header + the raw body bytes, no JSON
 * escaping). `tunnel.credit` (only together with `tunnel.binary`): per-request flow control in both
 * directions — a sender may have at most `registered.tunnel_window_bytes` body bytes of one request
 * not yet acknowledged by `tunnel.credit` messages from the receiver, which grants credit as its
 * consumer (the engine for request bodies, the edge's reader for answers) drains them.
 */
import { z } from 'zod'
import { upstreamKindSchema } from './completion-record.ts'
import { agentSpecSchema, evaluatorSpecSchema, runtimeSpecSchema, stageMetricsSchema, strategySpecSchema } from './rollout.ts'
import { evalResultSchema } from './trajectory.ts'

export const RUNNER_PROTOCOL_VERSION = 1
/**
 * Characters of body per tunnel frame. Workers cap a WebSocket message at 1 MiB; JSON escaping can
 * grow text up to 6× (`\u00XX`), so 128 Ki characters keeps even a worst-case frame under it.
 */
export const TUNNEL_CHUNK_CHARS = 128 * 1024

/** Optional features a runner may ask for in `register.capabilities` (see the module doc). */
export const TUNNEL_CAPABILITY = { binary: 'tunnel.binary', credit: 'tunnel.credit' } as const
/** Body bytes per binary tunnel frame (Workers cap a WebSocket message at 1 MiB). */
export const TUNNEL_FRAME_BYTES = 256 * 1024
/** Default per-request credit window (body bytes in flight, unacknowledged) in each direction. */
export const TUNNEL_WINDOW_BYTES = 1024 * 1024
/**
 * Runner identity: the shared runner token only enrols. The first connection of a runner id gets a
 * per-runner secret once, in `registered.runner_secret`; every later connection of that id must send
 * it in this header (checked before the WebSocket is accepted: wrong or missing → HTTP 401, and a
 * live connection of that id stays).
 */
export const RUNNER_SECRET_HEADER = 'x-rollgate-runner-secret'

/** Close codes the edge uses (4000–4999 are application codes). */
export const RUNNER_CLOSE = {
  normal: 1000,
  replaced: 4001,
  protocol: 4002,
  lost: 4003,
  drained: 4004,
} as const

const headersSchema = z.record(z.string(), z.string())

export const agentResultSchema = z.object({
  status: z.enum(['completed', 'failed', 'timeout']),
  return_code: z.number().int().nullable().default(null),
  error: z.string().nullable().default(null),
  /** Where a timeout hit (Polar [later]); the edge fills `timeout_source`. */
  timeout_stage: z.enum(['setup', 'exec', 'postprocess']).nullable().default(null),
})
export type AgentResult = z.infer<typeof agentResultSchema>

/** Everything a runner needs to run one session (edge → runner `assign`). */
export const sessionAssignmentSchema = z.object({
  session_id: z.string(),
  task_id: z.string(),
  run_id: z.string(),
  index: z.number().int(),
  /** The harness's API key for this session (a per-session token, not the session id). */
  token: z.string(),
  instruction: z.string(),
  runtime: runtimeSpecSchema.nullable(),
  agent: agentSpecSchema,
  builder: strategySpecSchema,
  evaluator: evaluatorSpecSchema.nullable(),
  metadata: z.record(z.string(), z.unknown()),
  timeout_seconds: z.number(),
  agent_timeout_seconds: z.number().nullable(),
  dispatch_priority: z.number().int(),
  /** Harness base URLs on the edge. */
  base_urls: z.object({ openai: z.string(), anthropic: z.string(), google: z.string() }),
  /** Polar §8 injected environment (base URLs, API keys = the session token, ids, directories). */
  env: headersSchema,
  /** `runner`: this runner's engine answers the session's model calls through the tunnel. */
  route: z.enum(['runner', 'direct']),
})
export type SessionAssignment = z.infer<typeof sessionAssignmentSchema>

export const runnerCapacitySchema = z.object({
  max_init_workers: z.number().int().min(1),
  max_run_workers: z.number().int().min(1),
  max_postrun_workers: z.number().int().min(1),
  /** Prepared sessions held waiting for a run slot; defaults to `max_run_workers` (Polar's ready target). */
  ready_buffer: z.number().int().min(0).optional(),
})
export type RunnerCapacity = z.infer<typeof runnerCapacitySchema>

/** Active statuses a runner reports (REGISTERED is the edge's; POST_RUN onward are the edge's). */
export const runnerSessionStatusSchema = z.enum(['INITIALIZING', 'READY', 'RUNNING'])
export type RunnerSessionStatus = z.infer<typeof runnerSessionStatusSchema>

/**
 * Flow control (`tunnel.credit` negotiated): the receiver of a request's body frames grants the sender
 * `bytes` more of that request's body (request bodies: runner → edge; answers: edge → runner).
 */
const tunnelCreditSchema = z.object({
  type: z.literal('tunnel.credit'),
  request_id: z.string(),
  bytes: z
    .number()
    .int()
    .positive()
    .max(2 ** 31),
})

/** Runner → edge: the engine's answer head (and its first body bytes). */
export const tunnelHeadSchema = z.object({
  type: z.literal('tunnel.head'),
  request_id: z.string(),
  status: z.number().int().min(100).max(599),
  headers: headersSchema.default({}),
  body: z.string().default(''),
  more: z.boolean().default(false),
})
/** Runner → edge: more of the answer's body. */
export const tunnelChunkSchema = z.object({ type: z.literal('tunnel.chunk'), request_id: z.string(), data: z.string(), more: z.boolean() })
/** Edge → runner: one engine request (and its first body bytes). */
export const tunnelRequestSchema = z.object({
  type: z.literal('tunnel.request'),
  request_id: z.string(),
  method: z.string(),
  /** Path and query on the runner's engine, e.g. `/v1/chat/completions`. */
  path: z.string(),
  headers: headersSchema,
  body: z.string(),
  more: z.boolean(),
  timeout_ms: z.number().int(),
})
/** Edge → runner: more of the request's body. */
export const tunnelBodySchema = z.object({ type: z.literal('tunnel.body'), request_id: z.string(), data: z.string(), more: z.boolean() })

// ---------------------------------------------------------------------------------------------
// Runner → edge
// ---------------------------------------------------------------------------------------------

/** The runner's local engine as it announces it (`register`, and `heartbeat` when it changed). */
const runnerUpstreamSchema = z.object({
  model: z.string().min(1),
  kind: upstreamKindSchema.default('vllm'),
  max_model_len: z.number().int().positive().optional(),
})

export const runnerMessageSchema = z.discriminatedUnion('type', [
  z.object({
    type: z.literal('register'),
    protocol_version: z.number().int(),
    runner_id: z.string().min(1).max(128),
    capacity: runnerCapacitySchema,
    /**
     * The model this runner's local engine serves; null when it has none (direct upstreams only).
     * `max_model_len`: the engine's context window (its `/v1/models`), so the edge lowers output budgets
     * that do not fit; omitted (older runners, engines that do not say): budgets pass unchanged.
     */
    upstream: runnerUpstreamSchema.nullable().default(null),
    /** Sessions still held after a reconnect, with their status (so none is re-dispatched or lost). */
    sessions: z.array(z.object({ session_id: z.string(), status: z.enum(['ASSIGNED', 'INITIALIZING', 'READY', 'RUNNING']) })).default([]),
    labels: z.record(z.string(), z.string()).default({}),
    /**
     * Runner-side evaluator strategies this runner can run (registry names, e.g. `test_on_output`).
     * Omitted: not reported (the edge assumes nothing). The edge warns at submit when a task names a
     * runner-side evaluator that no connected runner reports.
     */
    evaluators: z.array(z.string().min(1).max(256)).max(256).optional(),
    /** Optional tunnel features this runner speaks (`TUNNEL_CAPABILITY`); unknown names are ignored. */
    capabilities: z.array(z.string().min(1).max(64)).max(64).optional(),
  }),
  z.object({
    type: z.literal('heartbeat'),
    metrics: stageMetricsSchema,
    /**
     * Sent once when the runner's engine now serves another model or window than it last announced (the engine
     * restarted): the edge takes it for sessions it dispatches from then on. Omitted: unchanged. (A heartbeat,
     * not a second `register`, so assignments in flight are never taken for lost.)
     */
    upstream: runnerUpstreamSchema.optional(),
  }),
  z.object({ type: z.literal('ack'), session_id: z.string(), accepted: z.boolean(), reason: z.string().nullable().default(null) }),
  z.object({ type: z.literal('session.status'), session_id: z.string(), status: runnerSessionStatusSchema }),
  z.object({
    type: z.literal('session.finished'),
    session_id: z.string(),
    /** The harness outcome; null when the session failed before RUNNING (`error` says why). */
    agent_result: agentResultSchema.nullable().default(null),
    /** Runtime-bound evaluators run on the runner after the agent exits. */
    eval_result: evalResultSchema.nullable().default(null),
    error: z.string().nullable().default(null),
  }),
  z.object({ type: z.literal('drain') }),
  /**
   * The secret of `registered.runner_secret` is kept (written durably), sent on the connection that received it
   * when the edge asked (`registered.confirm_secret`): it confirms the secret at once instead of at the next
   * connect, so no token holder can enrol the id again in between.
   */
  z.object({ type: z.literal('secret.kept'), runner_secret: z.string().min(1) }),
  tunnelHeadSchema,
  tunnelChunkSchema,
  z.object({ type: z.literal('tunnel.error'), request_id: z.string(), message: z.string() }),
  tunnelCreditSchema,
])
export type RunnerMessage = z.infer<typeof runnerMessageSchema>
export type RunnerMessageInput = z.input<typeof runnerMessageSchema>

// ---------------------------------------------------------------------------------------------
// Edge → runner
// ---------------------------------------------------------------------------------------------

export const edgeMessageSchema = z.discriminatedUnion('type', [
  z.object({
    type: z.literal('registered'),
    protocol_version: z.number().int(),
    runner_id: z.string(),
    heartbeat_interval_ms: z.number().int(),
    /**
     * How long the edge waits for a disconnected runner (counted from the disconnect, or from the edge's
     * restart) before it ends the runner's sessions. A runner retries at least every third of it.
     */
    reconnect_grace_ms: z.number().int().positive().optional(),
    /** Reported sessions the edge still assigns to this runner: keep running them. */
    keep: z.array(z.string()),
    /** Reported sessions the edge no longer assigns to this runner: stop them. */
    drop: z.array(z.string()),
    /**
     * Sent once, on the registration that enrolled this runner id: the per-runner secret every later
     * connection must present in `x-rollgate-runner-secret` (`RUNNER_SECRET_HEADER`). Keep it durably.
     */
    runner_secret: z.string().optional(),
    /** With `runner_secret`: send `secret.kept` once it is kept durably (edges before it would not understand one). */
    confirm_secret: z.boolean().optional(),
    /** The optional tunnel features the edge accepted from `register.capabilities` (absent: none). */
    capabilities: z.array(z.string()).optional(),
    /** With `tunnel.credit`: the per-request window in bytes, each direction. */
    tunnel_window_bytes: z.number().int().positive().optional(),
  }),
  z.object({ type: z.literal('assign'), session: sessionAssignmentSchema }),
  z.object({ type: z.literal('cancel'), session_id: z.string(), reason: z.string() }),
  tunnelRequestSchema,
  tunnelBodySchema,
  z.object({ type: z.literal('tunnel.cancel'), request_id: z.string(), reason: z.string() }),
  tunnelCreditSchema,
  z.object({ type: z.literal('drained') }),
  z.object({ type: z.literal('error'), message: z.string() }),
])
export type EdgeMessage = z.infer<typeof edgeMessageSchema>

/** Split a body into tunnel frames' worth of text (at least one, possibly empty). */
export function chunkText(text: string, size = TUNNEL_CHUNK_CHARS): string[] {
  if (text.length <= size) return [text]
  const chunks: string[] = []
  let offset = 0
  while (offset < text.length) {
    let end = Math.min(offset + size, text.length)
    // Never split a surrogate pair across frames.
    const last = text.charCodeAt(end - 1)
    if (end < text.length && last >= 0xd800 && last <= 0xdbff) end--
    chunks.push(text.slice(offset, end))
    offset = end
  }
  return chunks
}
