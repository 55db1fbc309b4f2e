/**
 * @module
 * Builder configuration: the `config` object of Polar's `StrategySpec` (`{"strategy": …,
 * "config": {…}}`), validated with zod. Unknown keys are rejected (Polar builds the builder with
 * `cls(**spec.config)`, which also fails on unknown keys).
 */
import { z } from 'zod'

/** Qwen3 `<think>` / `</think>` ids; only used to label drift (never to decide a merge). */
export const QWEN3_THINK_TOKEN_IDS: readonly [number, number] = [151667, 151668]

/** The `tolerant` preset's bound on the tokens of a turn's training context that may differ from its prompt. */
export const DEFAULT_MAX_CONTEXT_DRIFT_TOKENS = 64
/**
 * The default bound: 0, i.e. the `exact` preset. Measured on the Qwen3 template sessions
 * (`npm run bench:merge`): `exact` trains no token under a changed context with 67 traces for 84
 * calls; `tolerant` gives 28 traces but 45% of trained tokens under a changed context (≤ 54 tokens
 * differing); Polar's rule gives 47 traces with 26% (≤ 478 tokens differing) — see README.
 */
export const DEFAULT_MERGE_DRIFT_BOUND = 0

/**
 * Named merge trade-offs (`config.preset`); explicit keys override a preset's values.
 * - `strict`: Polar's algorithm exactly (its traces, its drops after a break);
 * - `exact`: never trains a token under a context that differs from the prompt it was sampled under
 *   (`max_context_drift_tokens: 0`), still merging every exactly extendable turn and keeping the rest
 *   as further segments;
 * - `tolerant`: merges across bounded template rewrites (`max_context_drift_tokens: 64`), drift reported.
 */
export const MERGE_PRESETS = {
  strict: { strict: true },
  exact: { strict: false, max_context_drift_tokens: 0 },
  tolerant: { strict: false, max_context_drift_tokens: DEFAULT_MAX_CONTEXT_DRIFT_TOKENS },
} as const
export type MergePreset = keyof typeof MERGE_PRESETS

export const prefixMergingConfigSchema = z.strictObject({
  /** End-of-turn token (`<|im_end|>` = 151645 on Qwen/ChatML); null = auto-detect. */
  end_of_turn_token_id: z.number().int().nullable().default(null),
  /** Reproduce Polar's reference algorithm exactly (drops completions after a break). */
  strict: z.boolean().default(false),
  /**
   * Merge a turn only if at most this many tokens of the context the trainer conditions it on
   * differ from the prompt the model actually saw (cumulative over the segment; see README).
   */
  max_context_drift_tokens: z.number().int().nonnegative().default(DEFAULT_MERGE_DRIFT_BOUND),
  /**
   * A rewrite of the previous prompt's last tokens (generation-prompt scaffold) is handled at the
   * boundary when it starts at most this many tokens before the previous prompt's end.
   */
  boundary_window_tokens: z.number().int().nonnegative().default(32),
  /**
   * Largest edit earlier in the prompt (tokens, each side) after which the prompts must
   * re-synchronize, e.g. a billing-header nonce (`cch=…`, a few tokens). A different system prompt
   * differs by more and starts a new chain.
   */
  resync_window_tokens: z.number().int().positive().default(16),
  /** Tokens that must match to re-synchronize after an edit. */
  resync_anchor_tokens: z.number().int().positive().default(8),
  /** Maximum separate edits before the boundary (e.g. nonces) per turn. */
  max_edits_per_turn: z.number().int().nonnegative().default(4),
  /** Same prompt re-sent: which attempt stays in the chain; the others get branch `retry`. */
  retry_policy: z.enum(['keep_last', 'keep_first']).default('keep_last'),
  /** `[<think>, </think>]` ids used to label drift as `thinking_rewrite`; null = never. */
  think_token_ids: z.tuple([z.number().int(), z.number().int()]).nullable().default([QWEN3_THINK_TOKEN_IDS[0], QWEN3_THINK_TOKEN_IDS[1]]),
  /** Named trade-off (`MERGE_PRESETS`); resolved by `applyMergePreset` before parsing. Default: `exact`. */
  preset: z.enum(['strict', 'exact', 'tolerant']).optional(),
})
export type PrefixMergingConfigInput = z.input<typeof prefixMergingConfigSchema>
export type PrefixMergingConfig = z.infer<typeof prefixMergingConfigSchema>

/** `per_request` takes no options (Polar's `PerRequestBuilder` accepts any and ignores them; so does Rollgate). */
export const perRequestConfigSchema = z.strictObject({})

/**
 * Polar builder keys that do not apply here: accepted, ignored, and reported as a `builder_config_ignored`
 * warning. `tokenizer_name_or_path` (newer Polar's `PrefixMergingBuilder`) names a tokenizer for backends that
 * return no token ids; Rollgate always captures the engine's ids.
 */
export const IGNORED_POLAR_KEYS = { per_request: null, prefix_merging: ['tokenizer_name_or_path'] } as const

export type BuilderId = keyof typeof IGNORED_POLAR_KEYS

/** A builder config that cannot be used; `key` is the offending key (`config.<key>`), when there is one. */
export class BuilderConfigError extends Error {
  readonly key: string | null

  constructor(message: string, key: string | null) {
    super(message)
    this.name = 'BuilderConfigError'
    this.key = key
  }
}

export interface CheckedBuilderConfig {
  /** The keys the builder uses, validated (defaults not applied). */
  config: Record<string, unknown>
  /** One per ignored key. */
  warnings: { code: 'builder_config_ignored'; message: string }[]
}

/**
 * Check a builder config once, where it enters (route, task submit): unknown or mistyped keys throw a
 * `BuilderConfigError` naming the key and what was expected; Polar keys that do not apply are dropped with a
 * warning. `per_request` ignores every key, as Polar's does.
 */
export function checkBuilderConfig(builder: BuilderId, input: unknown): CheckedBuilderConfig {
  if (input === undefined || input === null) return { config: {}, warnings: [] }
  if (typeof input !== 'object' || Array.isArray(input)) {
    throw new BuilderConfigError(`config must be a JSON object (got ${Array.isArray(input) ? 'an array' : typeof input})`, null)
  }
  const config: Record<string, unknown> = {}
  const warnings: CheckedBuilderConfig['warnings'] = []
  const ignored: readonly string[] | null = IGNORED_POLAR_KEYS[builder]
  for (const [key, value] of Object.entries(input)) {
    if (ignored === null || ignored.includes(key)) {
      warnings.push({ code: 'builder_config_ignored', message: `${builder} ignores config.${key} (it does not apply to Rollgate)` })
    } else config[key] = value
  }
  if (builder === 'prefix_merging') {
    const result = prefixMergingConfigSchema.safeParse(config)
    if (!result.success) throw configError(builder, result.error.issues)
  }
  return { config, warnings }
}

function configError(builder: BuilderId, issues: readonly z.core.$ZodIssue[]): BuilderConfigError {
  const issue = issues[0]
  if (!issue) return new BuilderConfigError(`invalid ${builder} config`, null)
  if (issue.code === 'unrecognized_keys') {
    const key = issue.keys[0] ?? ''
    const known = Object.keys(prefixMergingConfigSchema.shape).join(', ')
    return new BuilderConfigError(`config.${key}: unknown ${builder} option (known: ${known})`, key)
  }
  const key = issue.path.map(String).join('.')
  return new BuilderConfigError(`config.${key}: ${issue.message}`, key || null)
}

/** Fill in a preset's values under the explicitly given keys (an unknown preset is left to the schema). */
export function applyMergePreset(config: Record<string, unknown>): Record<string, unknown> {
  const preset = config.preset
  if (typeof preset !== 'string' || !Object.hasOwn(MERGE_PRESETS, preset)) return config
  return { ...MERGE_PRESETS[preset as MergePreset], ...config }
}

/** Parse a prefix_merging config (throws a `BuilderConfigError` naming the offending key). */
export function parsePrefixMergingConfig(input: unknown): PrefixMergingConfig {
  const { config } = checkBuilderConfig('prefix_merging', input)
  return prefixMergingConfigSchema.parse(applyMergePreset(config))
}
