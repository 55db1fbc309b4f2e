/**
 * @module
 * Trajectory wire contract: Polar-compatible `Trace`, `Trajectory`, `EvalResult`, `SessionResult`,
 * `SessionTiming`, `TaskResult` and `SessionStatus` with Polar's exact field names
 * (`docs/polar-compat.md` §1), plus Rollgate's reconstruction extensions, which live only
 * inside `metadata` objects so Polar readers ignore them.
 *
 * Schemas parse like Polar's pydantic models: omitted fields take Polar's defaults; the Trace
 * validators match Polar's (`loss_mask` values 0/1, `loss_mask` and `response_logprobs` aligned
 * with `response_ids`). Runtime-neutral: zod only.
 */
import { z } from 'zod'

const metadataSchema = z.record(z.string(), z.unknown())

// ---------------------------------------------------------------------------------------------
// Polar models (src/polar/trajectory/models.py, src/polar/rollout/models.py)
// ---------------------------------------------------------------------------------------------

/** One training sequence: `prompt_ids + response_ids`, trainable where `loss_mask` is 1. */
export const traceSchema = z
  .object({
    prompt_ids: z.array(z.number().int()).default([]),
    response_ids: z.array(z.number().int()).default([]),
    loss_mask: z.array(z.number().int()).default([]),
    prompt_messages: z.array(z.record(z.string(), z.unknown())).default([]),
    response_messages: z.array(z.record(z.string(), z.unknown())).default([]),
    tools: z.array(z.record(z.string(), z.unknown())).nullable().default(null),
    finish_reason: z.string().nullable().default(null),
    response_logprobs: z.array(z.number()).nullable().default(null),
    reward: z.number().nullable().default(null),
    /**
     * Newer Polar: the named parts of `reward` (e.g. `{tests: 1, format: 0.5}`) when the evaluator
     * scores by components; `{}` otherwise.
     */
    reward_components: z.record(z.string(), z.number()).default({}),
    metadata: metadataSchema.default({}),
  })
  .superRefine((trace, ctx) => {
    if (trace.loss_mask.some((value) => value !== 0 && value !== 1)) {
      ctx.addIssue({
        code: 'custom',
        path: ['loss_mask'],
        message: 'loss_mask values must be 0 or 1',
      })
    }
    // Polar checks the mask length only when the mask is non-empty.
    if (trace.loss_mask.length > 0 && trace.loss_mask.length !== trace.response_ids.length) {
      ctx.addIssue({
        code: 'custom',
        path: ['loss_mask'],
        message: 'loss_mask length must match response_ids length',
      })
    }
    if (trace.response_logprobs !== null && trace.response_logprobs.length !== trace.response_ids.length) {
      ctx.addIssue({
        code: 'custom',
        path: ['response_logprobs'],
        message: 'response_logprobs length must match response_ids length',
      })
    }
  })
export type Trace = z.infer<typeof traceSchema>

export const trajectoryStatusSchema = z.enum(['COMPLETED', 'TIMEOUT', 'ERROR'])
export type TrajectoryStatus = z.infer<typeof trajectoryStatusSchema>

/** Everything a builder reconstructed from one session's completions. */
export const trajectorySchema = z.object({
  status: trajectoryStatusSchema,
  metadata: metadataSchema.default({}),
  traces: z.array(traceSchema).default([]),
  error: z.string().nullable().default(null),
})
export type Trajectory = z.infer<typeof trajectorySchema>

/** Evaluator output; the gateway merges rewards into the trajectory (§17). */
export const evalResultSchema = z.object({
  outcome_reward: z.number().nullable().default(null),
  trace_rewards: z.array(z.number().nullable()).nullable().default(null),
  /**
   * Rollgate: the named parts of the outcome reward, copied to every trace's `reward_components`
   * (an evaluator that scores by components). Null/omitted: traces keep `{}`.
   */
  reward_components: z.record(z.string(), z.number()).nullable().optional(),
  metadata: metadataSchema.default({}),
})
export type EvalResult = z.infer<typeof evalResultSchema>

/** Polar's session lifecycle; the last three are terminal. */
export const sessionStatusSchema = z.enum([
  'REGISTERED',
  'INITIALIZING',
  'READY',
  'RUNNING',
  'POST_RUN',
  'BUILDING',
  'EVALUATING',
  'COMPLETED',
  'ERROR',
  'TIMEOUT',
])
export type SessionStatus = z.infer<typeof sessionStatusSchema>

export const TERMINAL_SESSION_STATUSES: readonly SessionStatus[] = ['COMPLETED', 'ERROR', 'TIMEOUT']

/** Per-session durations in milliseconds; Polar forbids extra keys (`extra="forbid"`). */
export const sessionTimingSchema = z.strictObject({
  register_to_init_queue_ms: z.number().default(0),
  init_ms: z.number().default(0),
  run_ms: z.number().default(0),
  postrun_ms: z.number().default(0),
})
export type SessionTiming = z.infer<typeof sessionTimingSchema>

/** Terminal result of one session, as a gateway node reports it to the rollout server. */
export const sessionResultSchema = z.object({
  session_id: z.string(),
  task_id: z.string(),
  status: sessionStatusSchema,
  trajectory: trajectorySchema,
  timing: sessionTimingSchema.default({
    register_to_init_queue_ms: 0,
    init_ms: 0,
    run_ms: 0,
    postrun_ms: 0,
  }),
  node_id: z.string().nullable().default(null),
  error: z.string().nullable().default(null),
  metadata: metadataSchema.default({}),
})
export type SessionResult = z.infer<typeof sessionResultSchema>

/** Polar's task-level vocabulary (a plain string in Polar). */
export const taskStatusSchema = z.enum(['running', 'completed', 'failed'])
export type TaskStatusValue = z.infer<typeof taskStatusSchema>

/** What the rollout server returns / POSTs once every sample of a task has resolved. */
export const taskResultSchema = z.object({
  task_id: z.string(),
  status: taskStatusSchema,
  results: z.array(sessionResultSchema),
  result_paths: z.array(z.string()).default([]),
})
export type TaskResult = z.infer<typeof taskResultSchema>

// ---------------------------------------------------------------------------------------------
// Rollgate reconstruction extensions (inside trajectory / trace metadata; see
// src/reconstruct/README.md for the semantics)
// ---------------------------------------------------------------------------------------------

export const builderNameSchema = z.enum(['per_request', 'prefix_merging'])
export type BuilderName = z.infer<typeof builderNameSchema>

/** Branch label of a trace within its agent (`metadata.branch`). */
export const branchLabelSchema = z.enum(['main', 'sub_agent', 'compaction', 'side_call', 'retry'])
export type BranchLabel = z.infer<typeof branchLabelSchema>

/** Why a segment does not continue the previous one of its chain (`metadata.break_reason`). */
export const breakReasonSchema = z.enum([
  'prefix_mismatch',
  'compaction',
  'thinking_rewrite',
  'retokenization',
  'template_rewrite',
  'system_edit',
  'history_edit',
  'eot_unavailable',
  'interstitial_split_failed',
])
export type BreakReason = z.infer<typeof breakReasonSchema>

/** Why the trainer's context for a turn differs from the prompt the model saw. */
export const driftReasonSchema = z.enum(['thinking_rewrite', 'retokenization', 'template_rewrite', 'system_edit', 'history_edit'])
export type DriftReason = z.infer<typeof driftReasonSchema>

/** One merged completion inside a trace (`metadata.turns[]`). */
export const traceTurnSchema = z.object({
  completion_id: z.string(),
  seq: z.number().int(),
  /** Index in `response_ids` of this completion's first sampled token. */
  response_offset: z.number().int().nonnegative(),
  /** Number of sampled tokens (all mask 1, starting at `response_offset`). */
  response_length: z.number().int().nonnegative(),
  /** Context tokens (mask 0) inserted right before this turn, taken from its real prompt. */
  interstitial_length: z.number().int().nonnegative(),
  /** Index in `response_messages` of this completion's assistant message (-1 when none). */
  message_index: z.number().int(),
  /** Tokens of the trainer's context for this turn that differ from the prompt the model saw. */
  context_drift_tokens: z.number().int().nonnegative(),
  /** Drift introduced at this turn's boundary alone. */
  boundary_drift_tokens: z.number().int().nonnegative(),
  /** Largest contributor to `context_drift_tokens`; null when it is 0. */
  drift_reason: driftReasonSchema.nullable(),
  /** `context_drift_tokens` split by reason. */
  drift_by_reason: z.record(z.string(), z.number()),
  /** Whether Polar's strict rule would also have merged this turn into the previous one. */
  strict_rule_merge: z.boolean(),
})
export type TraceTurn = z.infer<typeof traceTurnSchema>

/** A record that is not in any trace, with the reason (`metadata.excluded_completions[]`). */
export const excludedCompletionSchema = z.object({
  completion_id: z.string(),
  seq: z.number().int(),
  agent: z.string(),
  status: z.string(),
  /** `abandoned`, `failed`, `not_trainable`, or (strict mode only) `dropped_after_break`. */
  reason: z.string(),
})
export type ExcludedCompletion = z.infer<typeof excludedCompletionSchema>

/** `metadata.reconstruction_stats`: Polar's counters first, then Rollgate's. */
export const reconstructionStatsSchema = z.looseObject({
  chains_total: z.number().int(),
  chains_reconstructed_full: z.number().int(),
  chains_reconstructed_truncated: z.number().int(),
  completions_total: z.number().int(),
  completions_merged: z.number().int(),
})
export type ReconstructionStats = z.infer<typeof reconstructionStatsSchema>
