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
import { type PrefixMergingConfigInput, parsePrefixMergingConfig, perRequestConfigSchema } from './config.ts'
import { buildPerRequest } from './per-request.ts'
import { buildPrefixMerging } from './prefix-merging.ts'
import type { SessionInfo } from './trajectory-metadata.ts'

export interface ReconstructOptions {
  builder: BuilderName
  /** Builder config (Polar `StrategySpec.config`); validated, unknown keys rejected. */
  config?: PrefixMergingConfigInput | Record<string, unknown>
  /** Session facts (Polar `CompletionSession`); derived from the records when omitted. */
  session?: SessionInfo
  /** Optional detokenizer, used only to label drift as `retokenization` exactly. */
  decode?: (ids: number[]) => string
}

/** Build the trajectory of one session from its completion records (any order). */
export function reconstructTrajectory(records: readonly CompletionRecord[], options: ReconstructOptions): Trajectory {
  if (options.builder === 'per_request') {
    perRequestConfigSchema.parse(options.config ?? {})
    return buildPerRequest(records, options.session)
  }
  if (options.builder === 'prefix_merging') {
    return buildPrefixMerging(records, {
      config: parsePrefixMergingConfig(options.config),
      ...(options.session === undefined ? {} : { session: options.session }),
      ...(options.decode === undefined ? {} : { decode: options.decode }),
    })
  }
  throw new Error(`unknown builder: ${String(options.builder)}`)
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
  DEFAULT_MAX_CONTEXT_DRIFT_TOKENS,
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
