/**
 * @module
 * Trajectory reconstruction: `CompletionRecord[]` → Polar-compatible `Trajectory`. Pure TypeScript
 * (no Node or Workers APIs); runs in the Worker and in Node. Design notes: ./README.md.
 *
 * ```ts
 * const trajectory = reconstructTrajectory(records, { builder: 'prefix_merging' })
 * const evalResult = { outcome_reward: 1, trace_rewards: null, metadata: {} }
 * const rewarded = applyEvalResult(trajectory, evalResult)
 * await env.BLOBS.put(trajectoryObjectKey(sessionId, 'prefix_merging'), JSON.stringify(rewarded))
 * ```
 */
import type { CompletionRecord } from '../contract/completion-record.ts'
import type { BuilderName, Trajectory } from '../contract/trajectory.ts'
import { applyMergePreset, type PrefixMergingConfigInput, checkBuilderConfig, prefixMergingConfigSchema } from './config.ts'
import { buildPerRequest } from './per-request.ts'
import { buildPrefixMerging } from './prefix-merging.ts'
import type { SessionInfo } from './trajectory-metadata.ts'

export interface ReconstructOptions {
  builder: BuilderName
  /**
   * Builder config (Polar `StrategySpec.config`); validated (`checkBuilderConfig`): unknown keys throw, Polar
   * keys that do not apply are ignored and listed in `metadata.builder_warnings`.
   */
  config?: PrefixMergingConfigInput | Record<string, unknown>
  /** Session facts (Polar `CompletionSession`); derived from the records when omitted. */
  session?: SessionInfo
  /** Optional detokenizer, used only to label drift as `retokenization` exactly. */
  decode?: (ids: number[]) => string
}

/** Build the trajectory of one session from its completion records (any order). */
export function reconstructTrajectory(records: readonly CompletionRecord[], options: ReconstructOptions): Trajectory {
  if (options.builder !== 'per_request' && options.builder !== 'prefix_merging') {
    throw new Error(`unknown builder: ${String(options.builder)}`)
  }
  const { config, warnings } = checkBuilderConfig(options.builder, options.config)
  const trajectory =
    options.builder === 'per_request'
      ? buildPerRequest(records, options.session)
      : buildPrefixMerging(records, {
          config: prefixMergingConfigSchema.parse(applyMergePreset(config)),
          ...(options.session === undefined ? {} : { session: options.session }),
          ...(options.decode === undefined ? {} : { decode: options.decode }),
        })
  if (warnings.length > 0) trajectory.metadata.builder_warnings = warnings
  return trajectory
}

export type {
  BranchLabel,
  BreakReason,
  DriftReason,
  EvalResult,
  ExcludedCompletion,
  SessionResult,
  TaskResult,
  Trace,
  TraceTurn,
  Trajectory,
} from '../contract/trajectory.ts'
export type { SessionInfo } from './trajectory-metadata.ts'
export {
  BuilderConfigError,
  type CheckedBuilderConfig,
  checkBuilderConfig,
  DEFAULT_MAX_CONTEXT_DRIFT_TOKENS,
  DEFAULT_MERGE_DRIFT_BOUND,
  MERGE_PRESETS,
  type MergePreset,
  applyMergePreset,
  type PrefixMergingConfig,
  type PrefixMergingConfigInput,
  parsePrefixMergingConfig,
  prefixMergingConfigSchema,
} from './config.ts'
export { alignedLogprobs, traceFromRecord } from './extract-trace.ts'
export { applyEvalResult, type ApplyEvalOptions } from './rewards.ts'
export {
  ADVANTAGE_STD_EPSILON,
  type GroupAdvantageOptions,
  type GroupAdvantages,
  groupAdvantages,
} from './advantages.ts'
export { TRAJECTORY_KEY_PREFIX, trajectoryObjectKey, trajectoryObjectPrefix } from './object-key.ts'
export {
  type SessionResultOptions,
  taskStatusOf,
  toSessionResult,
  toTaskResult,
  UNKNOWN_TASK_ID,
} from './exports/polar-result.ts'
export {
  RolloutLogprobError,
  type SlimeOptions,
  type SlimeSample,
  toSlimeSamples,
} from './exports/slime.ts'
export { type NemoGymRow, toNemoGymRows } from './exports/nemo-gym.ts'
export {
  type SftOptions,
  type SftRow,
  type SftTokenRow,
  toSftRows,
  toSftTokenRows,
} from './exports/sft.ts'
export { toJsonl } from './exports/jsonl.ts'
export {
  fromPolarCompletionRecords,
  isPolarRecord,
  type PolarCompletionRecord,
  polarCompletionRecordSchema,
  toPolarCompletionRecord,
} from './exports/polar-records.ts'
export { applyTrainingFilter, TRAINING_FILTERS, type TrainingFilter } from './training-filter.ts'
