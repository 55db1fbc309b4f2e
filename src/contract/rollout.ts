/**
 * @module
 * Rollout API contract: Polar's `TaskRequest` (with its nested `RuntimeSpec`, `AgentSpec`,
 * `StrategySpec`, `EvaluatorSpec`), `TaskStatus`, the rollout status overview and the SSE event
 * stream (`docs/polar-compat.md` §1, §2). Field names are Polar's; Rollgate's extensions are
 * marked. Runtime-neutral (zod only): the edge validates submissions with it and the runner reads
 * assignments with it.
 *
 * Results reuse `src/contract/trajectory.ts` (`SessionResult`, `TaskResult`, `SessionStatus`).
 */
import { z } from 'zod'
import { upstreamKindSchema } from './completion-record.ts'
import { upstreamUrlSchema } from './upstream-url.ts'
import { HARNESS_NAMES, isHarnessName } from './harness-names.ts'
import { builderNameSchema, sessionResultSchema, sessionStatusSchema, taskStatusSchema } from './trajectory.ts'

const metadataSchema = z.record(z.string(), z.unknown())
const stringMapSchema = z.record(z.string(), z.string())

/** A task id names a Durable Object and an R2 prefix: no slashes, bounded. */
export const TASK_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,191}$/
/** Polar's accepted session id shape (`docs/polar-compat.md` §6). */
export const SESSION_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/
/**
 * Rollout session ids carry this prefix (bare capture sessions get `ses_…`), so the edge knows without
 * a lookup which sessions need the per-call status check. A bare session that picks such an id itself
 * only pays that check (it is admitted as bare).
 */
export const ROLLOUT_SESSION_PREFIX = 'rs_'

export function isRolloutSessionId(sessionId: string): boolean {
  return sessionId.startsWith(ROLLOUT_SESSION_PREFIX)
}

/** Upper bound on samples per task: one Durable Object per sample, one task object tracks them all. */
export const MAX_SAMPLES_PER_TASK = 512
/** Polar's default session budget (`TaskRequest.timeout_seconds`). */
export const DEFAULT_TIMEOUT_SECONDS = 600

// ---------------------------------------------------------------------------------------------
// Nested specs (Polar src/polar/runtime/models.py, agent/models.py, trajectory/models.py)
// ---------------------------------------------------------------------------------------------

export const prepareActionSchema = z
  .object({
    type: z.enum(['upload_file', 'upload_dir', 'exec']),
    source: z.string().nullable().optional(),
    target: z.string().nullable().optional(),
    command: z.string().nullable().optional(),
    cwd: z.string().nullable().optional(),
    env: stringMapSchema.nullable().optional(),
    /** [later] exec retries. */
    max_attempts: z.number().int().min(1).max(10).optional(),
    retry_backoff_seconds: z.number().min(0).max(60).optional(),
  })
  .superRefine((action, ctx) => {
    if (action.type === 'exec') {
      if (!action.command) ctx.addIssue({ code: 'custom', path: ['command'], message: 'exec actions need a command' })
      if (action.source || action.target) ctx.addIssue({ code: 'custom', path: ['source'], message: 'exec actions take no source/target' })
    } else {
      if (!action.source || !action.target) ctx.addIssue({ code: 'custom', path: ['source'], message: 'uploads need source and target' })
      if (action.command || action.cwd || action.env) {
        ctx.addIssue({ code: 'custom', path: ['command'], message: 'uploads take no command/cwd/env' })
      }
    }
  })
export type PrepareAction = z.infer<typeof prepareActionSchema>

/** Sandbox backends a runner offers (`local` = bubblewrap on the runner host; Rollgate's addition). */
export const runtimeBackendSchema = z.enum(['docker', 'apptainer', 'local'])
export type RuntimeBackend = z.infer<typeof runtimeBackendSchema>

/**
 * A task with `runtime: null` runs on the runner's default backend (`rollgate runner --runtime`); a spec
 * without `backend` is Polar's `docker`. `image` is required except for `local` (the host's system dirs).
 */
export const runtimeSpecSchema = z
  .looseObject({
    backend: runtimeBackendSchema.default('docker'),
    image: z.string().min(1).optional(),
    prepare: z.array(prepareActionSchema).default([]),
    eval_prepare: z.array(prepareActionSchema).nullable().default(null),
    env: stringMapSchema.default({}),
    network: z.string().nullable().default('host'),
    workdir: z.string().nullable().default(null),
    cpus: z.number().int().positive().nullable().default(null),
    memory_mb: z.number().int().positive().nullable().default(null),
    storage_mb: z.number().int().positive().nullable().default(null),
    gpus: z.number().int().min(0).default(0),
    allow_internet: z.boolean().default(true),
    import_path: z.string().nullable().default(null),
    kwargs: metadataSchema.default({}),
  })
  .superRefine((spec, ctx) => {
    if (spec.backend !== 'local' && !spec.image) {
      ctx.addIssue({ code: 'custom', path: ['image'], message: `runtime.image is required for the ${spec.backend} backend` })
    }
  })
export type RuntimeSpec = z.infer<typeof runtimeSpecSchema>

export const execInputSchema = z.object({
  command: z.string().min(1),
  cwd: z.string().nullable().optional(),
  env: stringMapSchema.nullable().optional(),
})

export const mcpServerSpecSchema = z
  .object({
    name: z.string().min(1),
    transport: z.enum(['stdio', 'sse', 'streamable-http']),
    command: z.string().nullable().optional(),
    args: z.array(z.string()).default([]),
    url: z.string().nullable().optional(),
  })
  .superRefine((server, ctx) => {
    if (server.transport === 'stdio' && !server.command)
      ctx.addIssue({ code: 'custom', path: ['command'], message: 'stdio needs a command' })
    if (server.transport !== 'stdio' && !server.url)
      ctx.addIssue({ code: 'custom', path: ['url'], message: `${server.transport} needs a url` })
  })

export const agentSpecSchema = z
  .object({
    harness: z.string().min(1).nullable().default(null),
    import_path: z.string().min(1).nullable().default(null),
    model_name: z.string().nullable().default(null),
    settings: metadataSchema.default({}),
    env: stringMapSchema.default({}),
    mcp_servers: z.array(mcpServerSpecSchema).default([]),
    skills_path: z.string().nullable().default(null),
    custom_shell: execInputSchema.nullable().default(null),
  })
  .superRefine((agent, ctx) => {
    if ((agent.harness === null) === (agent.import_path === null)) {
      ctx.addIssue({ code: 'custom', path: ['harness'], message: 'exactly one of harness / import_path is required' })
    }
    if (agent.harness === 'shell' && !agent.custom_shell) {
      ctx.addIssue({ code: 'custom', path: ['custom_shell'], message: 'harness "shell" requires custom_shell' })
    }
    if (agent.custom_shell && agent.harness !== 'shell') {
      ctx.addIssue({ code: 'custom', path: ['custom_shell'], message: 'custom_shell is only allowed with harness "shell"' })
    }
  })
export type AgentSpec = z.infer<typeof agentSpecSchema>

/**
 * Builder: the edge reconstructs trajectories itself, so only its builders are accepted
 * (Polar also takes `module:Class`, which cannot run on the edge).
 */
export const strategySpecSchema = z.object({
  strategy: builderNameSchema,
  config: metadataSchema.default({}),
})
export type StrategySpec = z.infer<typeof strategySpecSchema>

export const evaluatorSpecSchema = z.object({
  strategy: z.string().min(1),
  config: metadataSchema.default({}),
  env: stringMapSchema.default({}),
  refresh_runtime: z.boolean().default(false),
})
export type EvaluatorSpec = z.infer<typeof evaluatorSpecSchema>

/** Evaluators the edge runs itself (no runtime needed); any other strategy runs on the runner. */
export const EDGE_EVALUATORS = ['session_completed'] as const

/**
 * Rollgate extension: where a task's model calls go. `runner` tunnels them over the assigned runner's
 * WebSocket to its local engine; `direct` calls `url` (or the edge default) from the edge; `auto`
 * (default) tunnels when the assigned runner serves a model, else goes direct.
 */
export const taskUpstreamSchema = z.object({
  route: z.enum(['auto', 'runner', 'direct']).default('auto'),
  /** Credentials in it are removed (`upstream-url.ts`); the edge's upstream key is never sent to another origin. */
  url: upstreamUrlSchema.optional(),
  kind: upstreamKindSchema.optional(),
  served_model: z.string().min(1).nullable().optional(),
  /** The direct engine's context window; omitted: read from its `GET /v1/models` at dispatch (as `POST /v1/sessions`). */
  max_model_len: z.number().int().positive().optional(),
})
export type TaskUpstream = z.infer<typeof taskUpstreamSchema>

// ---------------------------------------------------------------------------------------------
// TaskRequest (Polar src/polar/rollout/models.py)
// ---------------------------------------------------------------------------------------------

export const taskRequestSchema = z
  .object({
    task_id: z.string().regex(TASK_ID_PATTERN, 'task_id must match ^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,191}$'),
    instruction: z.string(),
    num_samples: z.number().int().min(1).max(MAX_SAMPLES_PER_TASK).default(1),
    timeout_seconds: z.number().positive().default(DEFAULT_TIMEOUT_SECONDS),
    runtime: runtimeSpecSchema.nullable().default(null),
    agent: agentSpecSchema,
    builder: strategySpecSchema.default({ strategy: 'per_request', config: {} }),
    evaluator: evaluatorSpecSchema.nullable().default(null),
    callback_url: z
      .url({ protocol: /^https?$/ })
      .nullable()
      .default(null),
    metadata: metadataSchema.default({}),
    /** [later] Higher enters INIT first; running sessions are never preempted. */
    dispatch_priority: z.number().int().min(0).max(100).default(0),
    /** [later] Cancel stragglers once this many usable (COMPLETED) sessions exist. */
    early_stop_min_usable_sessions: z.number().int().min(1).nullable().default(null),
    /** Rollgate: agent budget, starts at RUNNING (Polar [later] reads `metadata.agent_timeout`). */
    agent_timeout_seconds: z.number().positive().nullable().default(null),
    /** Rollgate: inference route for the task's sessions. */
    upstream: taskUpstreamSchema.nullable().default(null),
    /**
     * Rollgate: `mask_noncompleted` applies Polar's training filter to non-COMPLETED sessions (reward 0,
     * loss mask zeroed; an agent-budget timeout during exec stays trainable as a zero-reward negative);
     * `none` (default) leaves the traces as built.
     */
    training_filter: z.enum(['none', 'mask_noncompleted']).default('none'),
  })
  .superRefine((task, ctx) => {
    // Checked here (submit), not in `agentSpecSchema`: a runner still parses assignments naming a harness it lacks.
    if (task.agent.harness !== null && !isHarnessName(task.agent.harness)) {
      ctx.addIssue({
        code: 'custom',
        path: ['agent', 'harness'],
        message: `unknown harness ${JSON.stringify(task.agent.harness)} (known: ${HARNESS_NAMES.join(', ')})`,
      })
    }
    if (task.early_stop_min_usable_sessions !== null && task.early_stop_min_usable_sessions > task.num_samples) {
      ctx.addIssue({
        code: 'custom',
        path: ['early_stop_min_usable_sessions'],
        message: 'early_stop_min_usable_sessions must be ≤ num_samples',
      })
    }
    const agentTimeout = task.metadata.agent_timeout
    if (
      agentTimeout !== undefined &&
      agentTimeout !== null &&
      !(typeof agentTimeout === 'number' && Number.isFinite(agentTimeout) && agentTimeout > 0)
    ) {
      ctx.addIssue({
        code: 'custom',
        path: ['metadata', 'agent_timeout'],
        message: 'metadata.agent_timeout must be a positive, finite number',
      })
    }
  })
export type TaskRequest = z.infer<typeof taskRequestSchema>
export type TaskRequestInput = z.input<typeof taskRequestSchema>

/** The agent budget in seconds: `agent_timeout_seconds`, else Polar's `metadata.agent_timeout`, else none. */
export function agentTimeoutSeconds(task: Pick<TaskRequest, 'agent_timeout_seconds' | 'metadata'>): number | null {
  if (task.agent_timeout_seconds !== null) return task.agent_timeout_seconds
  const fromMetadata = task.metadata.agent_timeout
  return typeof fromMetadata === 'number' && Number.isFinite(fromMetadata) && fromMetadata > 0 ? fromMetadata : null
}

export const taskSubmitResponseSchema = z.object({
  task_id: z.string(),
  status: z.literal('running'),
  /** Rollgate: things the trainer should know (e.g. `evaluator_not_offered`); the task is accepted anyway. */
  warnings: z.array(z.object({ code: z.string(), message: z.string() })).optional(),
})
export type TaskSubmitResponse = z.infer<typeof taskSubmitResponseSchema>

// ---------------------------------------------------------------------------------------------
// Task status (Polar TaskStatus + Rollgate extensions)
// ---------------------------------------------------------------------------------------------

export const callbackStateSchema = z.enum(['none', 'pending', 'delivered', 'failed'])
export type CallbackState = z.infer<typeof callbackStateSchema>

/** Trainer callback delivery (Rollgate extension of TaskStatus). */
export const callbackStatusSchema = z.object({
  url: z.string(),
  state: callbackStateSchema,
  attempts: z.number().int(),
  /** Epoch ms of the next attempt, null when none is due. */
  next_attempt_at: z.number().nullable(),
  last_status: z.number().int().nullable(),
  last_error: z.string().nullable(),
  delivered_at: z.string().nullable(),
  idempotency_key: z.string(),
})
export type CallbackStatus = z.infer<typeof callbackStatusSchema>

export const taskSessionSummarySchema = z.object({
  session_id: z.string(),
  index: z.number().int(),
  status: sessionStatusSchema,
  usable: z.boolean(),
  runner_id: z.string().nullable(),
  result_path: z.string().nullable(),
  /** Rollgate: the session's reward (mean of its traces' non-null rewards) once resolved; null before or when unscored. */
  reward: z.number().nullable().default(null),
})
export type TaskSessionSummary = z.infer<typeof taskSessionSummarySchema>

export const taskStatusBodySchema = z.object({
  task_id: z.string(),
  status: taskStatusSchema,
  total_sessions: z.number().int(),
  completed_sessions: z.number().int(),
  results: z.array(sessionResultSchema),
  result_paths: z.array(z.string()),
  // Rollgate extensions
  run_id: z.string(),
  submitted_at: z.string(),
  completed_at: z.string().nullable(),
  cancelled: z.boolean(),
  early_stopped: z.boolean(),
  usable_sessions: z.number().int(),
  sessions: z.array(taskSessionSummarySchema),
  callback: callbackStatusSchema.nullable(),
  /** R2 key of the TaskResult once every session resolved. */
  task_result_path: z.string().nullable(),
  /** Why sessions wait in REGISTERED (`runner_api_disabled`, `no_runner_connected`); empty once a runner takes work. */
  warnings: z.array(z.object({ code: z.string(), message: z.string() })).optional(),
})
export type TaskStatus = z.infer<typeof taskStatusBodySchema>

// ---------------------------------------------------------------------------------------------
// Runners as the rollout status lists them (Polar GatewayNodeInfo + Rollgate fields)
// ---------------------------------------------------------------------------------------------

/** Polar `NodeStageMetrics`: what a runner reports with each heartbeat. */
export const stageMetricsSchema = z.object({
  init_queue_depth: z.number().int().min(0).default(0),
  init_inflight: z.number().int().min(0).default(0),
  ready_depth: z.number().int().min(0).default(0),
  run_inflight: z.number().int().min(0).default(0),
  postrun_queue_depth: z.number().int().min(0).default(0),
  postrun_inflight: z.number().int().min(0).default(0),
})
export type StageMetrics = z.infer<typeof stageMetricsSchema>

export const runnerInfoSchema = z.object({
  node_id: z.string(),
  max_init_workers: z.number().int(),
  max_run_workers: z.number().int(),
  max_postrun_workers: z.number().int(),
  /** Rollgate: prepared sessions a runner may hold waiting for a run slot (Polar: `max_run_workers`). */
  ready_buffer: z.number().int(),
  metrics: stageMetricsSchema,
  dispatch_reservations: z.number().int(),
  healthy: z.boolean(),
  draining: z.boolean(),
  connected: z.boolean(),
  heartbeat_interval_seconds: z.number(),
  last_heartbeat: z.string().nullable(),
  upstream: z.object({ model: z.string(), kind: upstreamKindSchema, max_model_len: z.number().int().positive().optional() }).nullable(),
  /** Runner-side evaluators the runner reported at register; null when it did not say. */
  evaluators: z.array(z.string()).nullable(),
  sessions: z.number().int(),
})
export type RunnerInfo = z.infer<typeof runnerInfoSchema>

/** One stage's slots as `GET /rollout/runners` lists them: in use (and queued, where the stage queues) of the most. */
const slotsSchema = z.object({ inflight: z.number().int(), max: z.number().int() })

/**
 * `GET /rollout/runners`: one runner id the edge knows. `state`: `connected`; `disconnected` (registered, its socket
 * gone, within its grace: its sessions are held); `absent` (not registered now: it left, was declared lost, or has
 * not connected since it enrolled; listed for its credential or its admin drain). `accepting`: it takes new sessions
 * now (connected, healthy, neither draining nor cordoned). `draining`: the runner's own drain (SIGTERM);
 * `cordoned`: an admin drain, held until resumed. `credential`: `pending` until a connection presents the secret.
 */
export const runnerEntrySchema = z.object({
  runner_id: z.string(),
  state: z.enum(['connected', 'disconnected', 'absent']),
  accepting: z.boolean(),
  healthy: z.boolean(),
  draining: z.boolean(),
  cordoned: z.boolean(),
  cordoned_at: z.string().nullable(),
  credential: z.enum(['none', 'pending', 'confirmed']),
  /** Null when absent. */
  slots: z
    .object({
      init: slotsSchema.extend({ queued: z.number().int() }),
      ready: z.object({ depth: z.number().int(), max: z.number().int() }),
      run: slotsSchema,
      postrun: slotsSchema.extend({ queued: z.number().int() }),
    })
    .nullable(),
  sessions: z.number().int(),
  reservations: z.number().int(),
  connection: z.object({
    /** The link's id of the runner's socket (null: absent, or not told). */
    id: z.string().nullable(),
    last_heartbeat: z.string().nullable(),
    disconnected_at: z.string().nullable(),
  }),
  upstream: runnerInfoSchema.shape.upstream,
})
export type RunnerEntry = z.infer<typeof runnerEntrySchema>

export const runnerListSchema = z.object({ runners: z.array(runnerEntrySchema) })
export type RunnerList = z.infer<typeof runnerListSchema>

/** `GET /rollout/status`: Polar's shape (`tasks`, `pipeline`, `nodes.nodes`). */
export const rolloutStatusSchema = z.object({
  tasks: z.record(z.string(), taskStatusSchema),
  pipeline: z.object({ pending_sessions: z.number().int(), assigned_sessions: z.number().int() }),
  nodes: z.object({ nodes: z.array(runnerInfoSchema) }),
})
export type RolloutStatus = z.infer<typeof rolloutStatusSchema>

// ---------------------------------------------------------------------------------------------
// Events (`GET /v1/events`, SSE; Polar platform/events.py names)
// ---------------------------------------------------------------------------------------------

export const rolloutEventSchema = z.discriminatedUnion('type', [
  z.object({
    type: z.literal('session.state_changed'),
    session_id: z.string(),
    task_id: z.string().nullable(),
    status: sessionStatusSchema,
    previous: sessionStatusSchema.nullable(),
    runner_id: z.string().nullable(),
    reason: z.string().nullable(),
    at: z.string(),
  }),
  z.object({ type: z.literal('task.submitted'), task_id: z.string(), run_id: z.string(), num_samples: z.number().int(), at: z.string() }),
  z.object({
    type: z.literal('task.completed'),
    task_id: z.string(),
    run_id: z.string(),
    status: taskStatusSchema,
    usable_sessions: z.number().int(),
    at: z.string(),
  }),
  /**
   * A session's result reached its task (published after the task counted it, so a client that re-reads
   * the task on this event sees the session resolved; the session's own terminal state change can come first).
   */
  z.object({
    type: z.literal('task.session_resolved'),
    task_id: z.string(),
    run_id: z.string(),
    session_id: z.string(),
    status: sessionStatusSchema,
    completed_sessions: z.number().int(),
    total_sessions: z.number().int(),
    at: z.string(),
  }),
  z.object({ type: z.literal('task.cancelled'), task_id: z.string(), run_id: z.string(), reason: z.string(), at: z.string() }),
  z.object({
    type: z.literal('task.callback'),
    task_id: z.string(),
    run_id: z.string(),
    state: callbackStateSchema,
    attempts: z.number().int(),
    last_status: z.number().int().nullable(),
    at: z.string(),
  }),
  z.object({ type: z.literal('runner.registered'), runner_id: z.string(), at: z.string() }),
  z.object({ type: z.literal('runner.lost'), runner_id: z.string(), reason: z.string(), at: z.string() }),
  z.object({ type: z.literal('runner.draining'), runner_id: z.string(), at: z.string() }),
  /** An admin drain was undone (`POST /rollout/runners/:id/resume`). */
  z.object({ type: z.literal('runner.resumed'), runner_id: z.string(), at: z.string() }),
  z.object({ type: z.literal('inference.paused'), policy_version: z.union([z.string(), z.number()]).nullable(), at: z.string() }),
  z.object({ type: z.literal('inference.resumed'), policy_version: z.union([z.string(), z.number()]).nullable(), at: z.string() }),
])
export type RolloutEvent = z.infer<typeof rolloutEventSchema>
