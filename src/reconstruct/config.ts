/**
 * @module
 * Builder configuration: the `config` object of Polar's `StrategySpec` (`{"strategy": …,
 * "config": {…}}`), validated with zod. Unknown keys are rejected (Polar builds the builder with
 * `cls(**spec.config)`, which also fails on unknown keys).
 */
import { z } from 'zod'

/** Qwen3 `<think>` / `</think>` ids; only used to label drift (never to decide a merge). */
export const QWEN3_THINK_TOKEN_IDS: readonly [number, number] = [151667, 151668]

/** Default bound on the tokens of a turn's training context that may differ from its prompt. */
export const DEFAULT_MAX_CONTEXT_DRIFT_TOKENS = 64

export const prefixMergingConfigSchema = z.strictObject({
  /** End-of-turn token (`<|im_end|>` = 151645 on Qwen/ChatML); null = auto-detect. */
  end_of_turn_token_id: z.number().int().nullable().default(null),
  /** Reproduce Polar's reference algorithm exactly (drops completions after a break). */
  strict: z.boolean().default(false),
  /**
   * Merge a turn only if at most this many tokens of the context the trainer conditions it on
   * differ from the prompt the model actually saw (cumulative over the segment; see README).
   */
  max_context_drift_tokens: z.number().int().nonnegative().default(DEFAULT_MAX_CONTEXT_DRIFT_TOKENS),
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
})
export type PrefixMergingConfigInput = z.input<typeof prefixMergingConfigSchema>
export type PrefixMergingConfig = z.infer<typeof prefixMergingConfigSchema>

/** `per_request` takes no options. */
export const perRequestConfigSchema = z.strictObject({})

/** Parse a builder config (throws a ZodError naming the offending key). */
export function parsePrefixMergingConfig(input: unknown): PrefixMergingConfig {
  return prefixMergingConfigSchema.parse(input ?? {})
}
