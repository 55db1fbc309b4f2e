/**
 * @module
 * slime / Miles `Sample` rows (Polar `slime_bridge/adapter.py::session_result_to_samples`, §18):
 * one sample per trace.
 * - `tokens = prompt_ids + response_ids`, `response_length = len(response_ids)`;
 * - `status` (slime's `Sample.Status` values, lower-case): trajectory/session `TIMEOUT` → `aborted`;
 *   `ERROR` or any error → `failed`; `finish_reason == "length"` → `truncated`; else `completed`;
 * - `loss_mask` from the trace (length validated), zeroed for `aborted`/`failed`;
 * - `rollout_log_probs` must exist and align for trainable samples, else `RolloutLogprobError`;
 * - `reward = {reward_key: trace.reward or 0}`; `group_id = index = trajectory index`;
 * - traces with empty tokens or longer than `max_tokens` are dropped; if none remain, one fully
 *   masked placeholder (`tokens [0, 0]`, `remove_sample: true`) is emitted.
 * Optional `advantages` (from `groupAdvantages`) are attached per sample as `advantage`.
 *
 * Rows carry every field of slime's `Sample` dataclass with its default (`remove_sample: false`,
 * `weight_versions: []`, `spec_info`, `prefix_cache_info`, …), so `Sample.from_dict(row)` loads a
 * row as it is; `group_id` and `advantage` are extra keys, which `from_dict` keeps as attributes.
 */
import type { SessionResult, Trace } from '../../contract/trajectory.ts'

/** A trainable trace lacks aligned rollout logprobs or a valid loss mask (Polar's error name). */
export class RolloutLogprobError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'RolloutLogprobError'
  }
}

/** slime `Sample.Status` values (`pending` is never emitted: every row is a finished sample). */
export type SlimeStatus = 'completed' | 'truncated' | 'aborted' | 'failed'

export interface SlimeSample {
  group_index: number
  index: number
  prompt: Record<string, unknown>[] | string
  tokens: number[]
  multimodal_inputs: null
  multimodal_train_inputs: null
  response: string
  response_length: number
  label: null
  reward: Record<string, number>
  loss_mask: number[]
  weight_versions: string[]
  rollout_log_probs: number[]
  rollout_routed_experts: null
  remove_sample: boolean
  teacher_log_probs: null
  status: SlimeStatus
  metadata: { polar: Record<string, unknown> }
  generate_function_path: null
  train_metadata: null
  session_id: string
  non_generation_time: number
  spec_info: { spec_accept_token_num: 0; spec_draft_token_num: 0; spec_verify_ct: 0; completion_token_num: 0 }
  prefix_cache_info: { cached_tokens: 0; total_prompt_tokens: 0 }
  /** Extra key (a `Sample` attribute after `from_dict`): the trajectory index, as Polar's bridge sets it. */
  group_id: number
  advantage?: number
}

/** The fields Rollgate fills; the rest take slime's defaults. */
type SampleFields = Pick<
  SlimeSample,
  | 'group_index'
  | 'index'
  | 'prompt'
  | 'tokens'
  | 'response'
  | 'response_length'
  | 'reward'
  | 'loss_mask'
  | 'rollout_log_probs'
  | 'status'
  | 'metadata'
  | 'session_id'
  | 'group_id'
  | 'advantage'
> & { remove_sample?: boolean }

/** A row with slime's defaults for every `Sample` field Rollgate does not fill. */
function sampleRow(fields: SampleFields): SlimeSample {
  return {
    group_index: fields.group_index,
    index: fields.index,
    prompt: fields.prompt,
    tokens: fields.tokens,
    multimodal_inputs: null,
    multimodal_train_inputs: null,
    response: fields.response,
    response_length: fields.response_length,
    label: null,
    reward: fields.reward,
    loss_mask: fields.loss_mask,
    weight_versions: [],
    rollout_log_probs: fields.rollout_log_probs,
    rollout_routed_experts: null,
    remove_sample: fields.remove_sample ?? false,
    teacher_log_probs: null,
    status: fields.status,
    metadata: fields.metadata,
    generate_function_path: null,
    train_metadata: null,
    session_id: fields.session_id,
    non_generation_time: 0,
    spec_info: { spec_accept_token_num: 0, spec_draft_token_num: 0, spec_verify_ct: 0, completion_token_num: 0 },
    prefix_cache_info: { cached_tokens: 0, total_prompt_tokens: 0 },
    group_id: fields.group_id,
    ...(fields.advantage === undefined ? {} : { advantage: fields.advantage }),
  }
}

export interface SlimeOptions {
  group_index: number
  /** Index of this trajectory in its group (`Sample.index` and `Sample.group_id`). */
  trajectory_index: number
  reward_key?: string
  max_tokens?: number | null
  /** Per-trace advantages for this trajectory (same order as its traces). */
  advantages?: readonly number[]
}

const SCHEDULER_KEYS = ['group_id', 'policy_version', 'rollout_step'] as const

function schedulerMetadata(result: SessionResult, trace: Trace | null): Record<string, unknown> {
  const merged: Record<string, unknown> = {}
  for (const source of [result.metadata, result.trajectory.metadata, trace?.metadata]) {
    if (source === undefined) continue
    for (const key of SCHEDULER_KEYS) if (key in source) merged[key] = source[key]
  }
  return merged
}

/** Text of the response messages (content strings and tool-call arguments, in order). */
export function messagesToText(messages: readonly Record<string, unknown>[]): string {
  const parts: string[] = []
  for (const message of messages) {
    const content = message.content
    if (typeof content === 'string' && content.length > 0) parts.push(content)
    else if (Array.isArray(content)) {
      for (const part of content) {
        const text = (part as { text?: unknown }).text
        if (typeof text === 'string') parts.push(text)
      }
    }
    const calls = message.tool_calls
    if (Array.isArray(calls)) {
      for (const call of calls) {
        const fn = (call as { function?: { name?: unknown; arguments?: unknown } }).function
        if (fn !== undefined) parts.push(`${String(fn.name)}(${String(fn.arguments)})`)
      }
    }
  }
  return parts.join('\n')
}

export function slimeStatus(result: SessionResult, trace: Trace): SlimeStatus {
  const trajectory = result.trajectory
  if (trajectory.status === 'TIMEOUT' || result.status === 'TIMEOUT') return 'aborted'
  if (trajectory.status === 'ERROR' || result.status === 'ERROR' || result.error !== null || trajectory.error !== null) {
    return 'failed'
  }
  if (trace.finish_reason === 'length') return 'truncated'
  return 'completed'
}

function polarMetadata(result: SessionResult, traceIndex: number, trace: Trace | null) {
  return {
    node_id: result.node_id,
    result_metadata: result.metadata,
    result_error: result.error,
    session_id: result.session_id,
    session_status: result.status,
    task_id: result.task_id,
    timing: result.timing,
    trace_index: traceIndex,
    ...(trace === null ? { placeholder: true } : { trace_metadata: trace.metadata }),
    trajectory_error: result.trajectory.error,
    trajectory_metadata: result.trajectory.metadata,
    trajectory_status: result.trajectory.status,
    ...schedulerMetadata(result, trace),
  }
}

export function toSlimeSamples(result: SessionResult, options: SlimeOptions): SlimeSample[] {
  const rewardKey = options.reward_key ?? 'score'
  const samples: SlimeSample[] = []
  result.trajectory.traces.forEach((trace, traceIndex) => {
    const responseLength = trace.response_ids.length
    if (trace.prompt_ids.length === 0 || responseLength === 0) return
    const total = trace.prompt_ids.length + responseLength
    if (options.max_tokens != null && total > options.max_tokens) return
    const status = slimeStatus(result, trace)
    const trainable = status !== 'aborted' && status !== 'failed'
    const where = `Session ${result.session_id} trace ${traceIndex}`
    let lossMask: number[]
    if (trace.loss_mask.length === 0) {
      if (trainable) throw new RolloutLogprobError(`${where}: missing loss_mask`)
      lossMask = new Array<number>(responseLength).fill(0)
    } else if (trace.loss_mask.length !== responseLength) {
      throw new RolloutLogprobError(`${where}: loss_mask length ${trace.loss_mask.length} != response length ${responseLength}`)
    } else {
      lossMask = trace.loss_mask.map((value) => (value ? 1 : 0))
    }
    if (!trainable) lossMask = new Array<number>(responseLength).fill(0)
    let logprobs: number[]
    const recorded = trace.response_logprobs
    if (recorded === null || recorded.length === 0) {
      if (trainable && lossMask.some((value) => value === 1)) {
        throw new RolloutLogprobError(`${where}: missing rollout_log_probs for trainable response tokens`)
      }
      logprobs = new Array<number>(responseLength).fill(0)
    } else if (recorded.length !== responseLength) {
      throw new RolloutLogprobError(`${where}: rollout_log_probs length ${recorded.length} != ` + `response length ${responseLength}`)
    } else {
      logprobs = [...recorded]
    }
    const advantage = options.advantages?.[traceIndex]
    const sample = sampleRow({
      group_index: options.group_index,
      index: options.trajectory_index,
      prompt: trace.prompt_messages.length > 0 ? trace.prompt_messages : '',
      tokens: [...trace.prompt_ids, ...trace.response_ids],
      response: messagesToText(trace.response_messages),
      response_length: responseLength,
      group_id: options.trajectory_index,
      reward: { [rewardKey]: trace.reward ?? 0 },
      loss_mask: lossMask,
      rollout_log_probs: logprobs,
      status,
      session_id: result.session_id,
      metadata: { polar: polarMetadata(result, traceIndex, trace) },
      ...(advantage === undefined ? {} : { advantage }),
    })
    samples.push(sample)
  })
  if (samples.length > 0) return samples
  return [
    sampleRow({
      group_index: options.group_index,
      index: options.trajectory_index,
      prompt: '',
      tokens: [0, 0],
      response: '',
      response_length: 1,
      group_id: options.trajectory_index,
      reward: { [rewardKey]: 0 },
      loss_mask: [0],
      rollout_log_probs: [0],
      status: 'aborted',
      session_id: result.session_id,
      remove_sample: true,
      metadata: { polar: polarMetadata(result, -1, null) },
    }),
  ]
}
