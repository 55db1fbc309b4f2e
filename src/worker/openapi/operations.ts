/**
 * @module
 * Every route the edge serves, described once: method, path (hono style), who may call it, and the zod
 * schemas that already validate it. `document.ts` turns this table into OpenAPI 3.1; a test checks the
 * table against the routes actually mounted (both ways) and validates each request example.
 *
 * Session routes are also served under the base-URL prefixes `/s/{token}` and `/s/{token}/a/{agent}`;
 * they are documented once, without the prefix.
 */
import { z } from 'zod'
import { completionRecordSchema } from '../../contract/completion-record.ts'
import {
  rolloutStatusSchema,
  runnerListSchema,
  taskRequestSchema,
  taskStatusBodySchema,
  taskSubmitResponseSchema,
} from '../../contract/rollout.ts'
import { sessionResultSchema, trajectorySchema } from '../../contract/trajectory.ts'
import { anthropicCountTokensSchema, anthropicRequestSchema } from '../../normalize/providers/anthropic/anthropic-wire.ts'
import { googleCountTokensSchema, googleRequestSchema } from '../../normalize/providers/google/google-wire.ts'
import { openaiChatRequestSchema } from '../../normalize/providers/openai-chat/openai-chat-wire.ts'
import { responsesRequestSchema } from '../../normalize/providers/openai-responses/openai-responses-wire.ts'
import { createSessionSchema, trajectoryQuerySchema } from '../routes/admin-sessions.ts'
import { detokenizeBodySchema } from '../routes/dashboard.ts'
import { gateBodySchema } from '../routes/inference-admin.ts'

export type Auth = 'admin' | 'session' | 'runner' | 'none'
export type Method = 'get' | 'post' | 'delete' | 'head'

export interface Operation {
  method: Method
  /** Hono-style path (`/v1/sessions/:id`). */
  path: string
  auth: Auth
  tag: 'health' | 'sessions' | 'rollout' | 'runners' | 'inference' | 'model APIs' | 'operator'
  summary: string
  query?: z.ZodObject
  body?: z.ZodType
  /** 200/201 JSON body, when it has a schema. */
  response?: z.ZodType
  /** Status of the success answer (default 200). */
  status?: number
  /** Media type of the success answer (default application/json). */
  contentType?: string
  /** A valid request body (checked against `body` by the tests). */
  example?: unknown
}

const SESSION_ID = { id: 'ses_0123456789abcdef0123456789abcdef' }
const pageQuery = z.object({
  after_seq: z.string().optional().describe('return records with seq > after_seq (empty: from the start)'),
  limit: z.string().optional().describe('page size, 1–1000'),
})
const completionsQuery = pageQuery.extend({
  format: z
    .string()
    .optional()
    .describe("`rollgate` (default) or `polar`: Polar's CompletionRecord shape, non-`ok` calls in `excluded_completions`"),
})
const eventsQuery = z.object({
  task_id: z.string().optional(),
  timeout_seconds: z.string().optional(),
})
const pauseQuery = z.object({ timeout_seconds: z.string().optional().describe('drain timeout in seconds') })
const healthSchema = z.object({ status: z.literal('ok'), service: z.literal('rollgate') })
const chatExample = { model: 'Qwen/Qwen3-8B', messages: [{ role: 'user', content: 'create hello.txt containing hi' }] }

export const OPERATIONS: readonly Operation[] = [
  { method: 'get', path: '/', auth: 'none', tag: 'health', summary: 'health', response: healthSchema },
  { method: 'head', path: '/', auth: 'none', tag: 'health', summary: 'health (no body)' },
  {
    method: 'get',
    path: '/health',
    auth: 'none',
    tag: 'health',
    summary: "health (Polar's launch scripts poll it)",
    response: healthSchema,
  },
  { method: 'head', path: '/health', auth: 'none', tag: 'health', summary: 'health (no body)' },
  { method: 'get', path: '/api/hello', auth: 'none', tag: 'health', summary: "Claude Code's connectivity probe", response: healthSchema },
  { method: 'head', path: '/api/hello', auth: 'none', tag: 'health', summary: "Claude Code's connectivity probe (no body)" },
  { method: 'get', path: '/openapi.json', auth: 'none', tag: 'operator', summary: 'this document' },
  {
    method: 'get',
    path: '/dashboard',
    auth: 'none',
    tag: 'operator',
    summary: 'operator dashboard (static page; its views read the admin API with the token typed into its login form)',
    contentType: 'text/html',
  },

  // --- capture sessions (admin) ---
  {
    method: 'post',
    path: '/v1/sessions',
    auth: 'admin',
    tag: 'sessions',
    summary: 'create a capture session; its token is the harness API key',
    body: createSessionSchema,
    status: 201,
    example: { task_id: 't1', metadata: { group_id: 'g1' } },
  },
  { method: 'get', path: '/v1/sessions/:id', auth: 'admin', tag: 'sessions', summary: 'session config, completion count, storage figures' },
  {
    method: 'get',
    path: '/v1/sessions/:id/completions',
    auth: 'admin',
    tag: 'sessions',
    summary: 'completion records in arrival order, paged (`next_after_seq`)',
    query: completionsQuery,
    response: z.object({
      session_id: z.string(),
      completions: z.array(completionRecordSchema),
      next_after_seq: z.number().int().nullable(),
    }),
  },
  {
    method: 'get',
    path: '/v1/sessions/:id/trajectory',
    auth: 'admin',
    tag: 'sessions',
    summary:
      "trajectory rebuilt from the durable log, or a trainer export (`format`); an evaluated rollout session's carries its evaluation (`x-rollgate-evaluation`)",
    query: z.object({
      builder: z.string().optional(),
      config: z.string().optional().describe('builder config, a JSON object'),
      format: z.string().optional(),
    }),
    response: z.union([trajectorySchema, sessionResultSchema]),
  },
  {
    method: 'get',
    path: '/v1/sessions/:id/trajectory/stored',
    auth: 'admin',
    tag: 'sessions',
    summary: 'the trajectory finalize wrote to R2, read back as stored (404 until finalized)',
    response: trajectorySchema,
  },
  {
    method: 'post',
    path: '/v1/sessions/:id/detokenize',
    auth: 'admin',
    tag: 'sessions',
    summary: "token text for segments of ids, from the session engine's /detokenize (display only; null texts when unreachable)",
    body: detokenizeBodySchema,
    example: { segments: [[9707, 11], [1879]] },
  },
  {
    method: 'post',
    path: '/v1/sessions/:id/finalize',
    auth: 'admin',
    tag: 'sessions',
    summary: 'build the trajectory and write it to R2',
    body: trajectoryQuerySchema.omit({ format: true }),
    example: { builder: 'prefix_merging' },
  },

  // --- rollout (admin) ---
  {
    method: 'post',
    path: '/rollout/task/submit',
    auth: 'admin',
    tag: 'rollout',
    summary: 'submit a TaskRequest (Polar field names)',
    body: taskRequestSchema,
    response: taskSubmitResponseSchema,
    example: {
      task_id: 'demo-1',
      instruction: 'create hello.txt containing hi',
      num_samples: 2,
      agent: { harness: 'qwen_code' },
      builder: { strategy: 'prefix_merging' },
    },
  },
  {
    method: 'post',
    path: '/v1/tasks',
    auth: 'admin',
    tag: 'rollout',
    summary: 'alias of /rollout/task/submit',
    body: taskRequestSchema,
    response: taskSubmitResponseSchema,
    example: { task_id: 'demo-2', instruction: 'x', agent: { harness: 'shell', custom_shell: { command: 'echo {instruction}' } } },
  },
  {
    method: 'get',
    path: '/rollout/task/:id',
    auth: 'admin',
    tag: 'rollout',
    summary: 'task status with its sessions (`?results=false` omits results)',
    query: z.object({ results: z.string().optional() }),
    response: taskStatusBodySchema,
  },
  {
    method: 'get',
    path: '/v1/tasks/:id',
    auth: 'admin',
    tag: 'rollout',
    summary: 'alias of /rollout/task/{id}',
    response: taskStatusBodySchema,
  },
  { method: 'delete', path: '/rollout/task/:id', auth: 'admin', tag: 'rollout', summary: 'cancel every session of a task' },
  { method: 'get', path: '/rollout/session/:id', auth: 'admin', tag: 'rollout', summary: "a rollout session's lifecycle" },
  { method: 'delete', path: '/rollout/session/:id', auth: 'admin', tag: 'rollout', summary: 'cancel one session' },
  {
    method: 'get',
    path: '/rollout/status',
    auth: 'admin',
    tag: 'rollout',
    summary: 'tasks, pipeline, runners',
    response: rolloutStatusSchema,
  },
  {
    method: 'get',
    path: '/rollout/runners',
    auth: 'admin',
    tag: 'runners',
    summary: 'the runner registry: state, health, own and admin drain, slots, connection, credential of each id the edge knows',
    response: runnerListSchema,
  },
  {
    method: 'delete',
    path: '/rollout/runners/:id',
    auth: 'admin',
    tag: 'runners',
    summary: 'drain a runner (no new sessions; holds across its reconnects and restarts until resumed); 404 for an id never seen',
  },
  {
    method: 'post',
    path: '/rollout/runners/:id/resume',
    auth: 'admin',
    tag: 'runners',
    summary: 'undo an admin drain (a runner draining itself stays draining)',
  },
  {
    method: 'get',
    path: '/v1/events',
    auth: 'admin',
    tag: 'rollout',
    summary: 'server-sent events of task, session, runner and inference state changes (`Last-Event-ID` replays)',
    query: eventsQuery,
    contentType: 'text/event-stream',
  },

  {
    method: 'delete',
    path: '/rollout/runners/:id/credential',
    auth: 'admin',
    tag: 'runners',
    summary: "forget a runner's enrolment secret (the host may enrol again with the shared runner token)",
  },

  // --- inference gate (admin) ---
  { method: 'get', path: '/admin/inference/status', auth: 'admin', tag: 'inference', summary: 'generation gate state' },
  {
    method: 'post',
    path: '/admin/inference/pause',
    auth: 'admin',
    tag: 'inference',
    summary: 'pause generation; drains in-flight calls (504 when they do not drain in time)',
    query: pauseQuery,
    body: gateBodySchema,
    example: { policy_version: 3 },
  },
  {
    method: 'post',
    path: '/admin/inference/resume',
    auth: 'admin',
    tag: 'inference',
    summary: 'resume generation (optionally recording a new policy version)',
    body: gateBodySchema,
    example: { policy_version: 4 },
  },

  // --- runners ---
  {
    method: 'get',
    path: '/runners/connect',
    auth: 'runner',
    tag: 'runners',
    summary: 'runner WebSocket (protocol v1, src/contract/runner-protocol.ts)',
    query: z.object({ runner_id: z.string() }),
    status: 101,
  },

  // --- model APIs (session token) ---
  { method: 'get', path: '/v1/models', auth: 'session', tag: 'model APIs', summary: 'served model (OpenAI or Anthropic list shape)' },
  {
    method: 'post',
    path: '/v1/chat/completions',
    auth: 'session',
    tag: 'model APIs',
    summary: 'OpenAI chat completions (streaming and not)',
    body: openaiChatRequestSchema,
    example: chatExample,
  },
  {
    method: 'post',
    path: '/v1/messages',
    auth: 'session',
    tag: 'model APIs',
    summary: 'Anthropic Messages (streaming and not; `?beta=true` accepted)',
    body: anthropicRequestSchema,
    example: { model: 'Qwen/Qwen3-8B', max_tokens: 256, messages: [{ role: 'user', content: 'hi' }] },
  },
  {
    method: 'post',
    path: '/v1/messages/count_tokens',
    auth: 'session',
    tag: 'model APIs',
    summary: "exact prompt length from the engine's /tokenize (never recorded)",
    body: anthropicCountTokensSchema,
    example: { model: 'Qwen/Qwen3-8B', messages: [{ role: 'user', content: 'hi' }] },
  },
  {
    method: 'post',
    path: '/v1/responses',
    auth: 'session',
    tag: 'model APIs',
    summary: 'OpenAI Responses (streaming and not; previous_response_id resolved from the session log)',
    body: responsesRequestSchema,
    example: { model: 'Qwen/Qwen3-8B', input: 'hi' },
  },
  {
    method: 'get',
    path: '/v1/responses',
    auth: 'session',
    tag: 'model APIs',
    summary: 'Responses WebSocket probe: 426 (use HTTP)',
    status: 426,
  },
  { method: 'get', path: '/:version/models', auth: 'session', tag: 'model APIs', summary: 'Gemini model list (version v1beta or v1alpha)' },
  { method: 'get', path: '/:version/models/:model', auth: 'session', tag: 'model APIs', summary: 'Gemini model' },
  {
    method: 'post',
    path: '/:version/models/:model:generateContent',
    auth: 'session',
    tag: 'model APIs',
    summary: 'Gemini generateContent',
    body: googleRequestSchema,
    example: { contents: [{ role: 'user', parts: [{ text: 'hi' }] }] },
  },
  {
    method: 'post',
    path: '/:version/models/:model:streamGenerateContent',
    auth: 'session',
    tag: 'model APIs',
    summary: 'Gemini streamGenerateContent (`?alt=sse`)',
    body: googleRequestSchema,
    contentType: 'text/event-stream',
    example: { contents: [{ role: 'user', parts: [{ text: 'hi' }] }] },
  },
  {
    method: 'post',
    path: '/:version/models/:model:countTokens',
    auth: 'session',
    tag: 'model APIs',
    summary: "Gemini countTokens (engine's /tokenize; never recorded)",
    body: googleCountTokensSchema,
    example: { contents: [{ role: 'user', parts: [{ text: 'hi' }] }] },
  },
]

/** Example values for path parameters (the route tests fill paths with these). */
export const PATH_EXAMPLES: Record<string, string> = { ...SESSION_ID, version: 'v1beta', model: 'Qwen3-8B', token: 'rg_x.y', agent: 'main' }
