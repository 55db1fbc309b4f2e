/**
 * @module
 * What slime's `Sample.from_dict` accepts, written from slime's documented `Sample` fields
 * (`slime/utils/types.py`: the dataclass fields, their defaults, the `Status` enum and the
 * `from_dict` contract): `status` is required and must be one of the enum's values (lower-case);
 * `spec_info` / `prefix_cache_info` are optional dicts; every other key that names a field
 * initializes it, unknown keys become attributes. Used to check that Rollgate's slime rows load as
 * they are, and that they spell out slime's defaults.
 */
import { z } from 'zod'

/** slime `Sample.Status` values. */
export const SLIME_STATUS_VALUES = ['pending', 'completed', 'truncated', 'aborted', 'failed'] as const

const ints = z.array(z.number().int())
const floats = z.array(z.number())

/** slime `Sample` dataclass fields (stable across slime releases) with their types. */
export const slimeSampleFields = {
  group_index: z.number().int().nullable(),
  index: z.number().int().nullable(),
  prompt: z.union([z.string(), z.array(z.record(z.string(), z.unknown()))]),
  tokens: ints,
  multimodal_inputs: z.record(z.string(), z.unknown()).nullable(),
  multimodal_train_inputs: z.record(z.string(), z.unknown()).nullable(),
  response: z.string(),
  response_length: z.number().int(),
  label: z.string().nullable(),
  reward: z.union([z.number(), z.record(z.string(), z.unknown())]).nullable(),
  loss_mask: ints.nullable(),
  weight_versions: z.array(z.string()),
  rollout_log_probs: floats.nullable(),
  rollout_routed_experts: z.array(ints).nullable(),
  remove_sample: z.boolean(),
  teacher_log_probs: floats.nullable(),
  status: z.enum(SLIME_STATUS_VALUES),
  metadata: z.record(z.string(), z.unknown()),
  generate_function_path: z.string().nullable(),
  train_metadata: z.record(z.string(), z.unknown()).nullable(),
  session_id: z.string().nullable(),
  non_generation_time: z.number(),
  spec_info: z.object({
    spec_accept_token_num: z.number().int(),
    spec_draft_token_num: z.number().int(),
    spec_verify_ct: z.number().int(),
    completion_token_num: z.number().int(),
  }),
  prefix_cache_info: z.object({ cached_tokens: z.number().int(), total_prompt_tokens: z.number().int() }),
}

/** `from_dict`: only `status` is required; a present field must have its type; extra keys pass. */
export const slimeFromDictSchema = z.looseObject({
  ...Object.fromEntries(Object.entries(slimeSampleFields).map(([key, schema]) => [key, schema.optional()])),
  status: slimeSampleFields.status,
})

/** A row that spells out every `Sample` field (no reliance on slime's defaults). */
export const slimeFullRowSchema = z.looseObject(slimeSampleFields)
