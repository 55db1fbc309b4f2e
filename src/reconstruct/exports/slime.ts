/**
 * @module
 * slime / Miles `Sample` rows (Polar `slime_bridge/adapter.py::session_result_to_samples`, §18):
 * one sample per trace.
 * - `tokens = prompt_ids + response_ids`, `response_length = len(response_ids)`;
 * - `status`: trajectory/session `TIMEOUT` → `ABORTED`; `ERROR` or any error → `FAILED`;
 *   `finish_reason == "length"` → `TRUNCATED`; else `COMPLETED`;
 * - `loss_mask` from the trace (length validated), zeroed for `ABORTED`/`FAILED`;
 * - `rollout_log_probs` must exist and align for trainable samples, else `RolloutLogprobError`;
 * - `reward = {reward_key: trace.reward or 0}`; `group_id = index = trajectory index`;
 * - traces with empty tokens or longer than `max_tokens` are dropped; if none remain, one fully
 *   masked placeholder (`tokens [0, 0]`, `remove_sample: true`) is emitted.
 * Optional `advantages` (from `groupAdvantages`) are attached per sample as `advantage`.
 */
import type { SessionResult, Trace } from '../../contract/trajectory.ts'

/** A trainable trace lacks aligned rollout logprobs or a valid loss mask (Polar's error name). */
export class RolloutLogprobError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'RolloutLogprobError'
  }
}

export type SlimeStatus = 'COMPLETED' | 'TRUNCATED' | 'ABORTED' | 'FAILED'

export interface SlimeSample {
  group_index: number
  index: number
  prompt: Record<string, unknown>[] | string
  tokens: number[]
  response: string
  response_length: number
  group_id: number
  reward: Record<string, number>
  loss_mask: number[]
  rollout_log_probs: number[]
  status: SlimeStatus
  session_id: string
  remove_sample?: boolean
  advantage?: number
  metadata: { polar: Record<string, unknown> }
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
  if (trajectory.status === 'TIMEOUT' || result.status === 'TIMEOUT') return 'ABORTED'
  if (trajectory.status === 'ERROR' || result.status === 'ERROR' || result.error !== null || trajectory.error !== null) {
    return 'FAILED'
  }
  if (trace.finish_reason === 'length') return 'TRUNCATED'
  return 'COMPLETED'
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
    const trainable = status !== 'ABORTED' && status !== 'FAILED'
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
    const sample: SlimeSample = {
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
    }
    const advantage = options.advantages?.[traceIndex]
    if (advantage !== undefined) sample.advantage = advantage
    samples.push(sample)
  })
  if (samples.length > 0) return samples
  return [
    {
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
      status: 'ABORTED',
      session_id: result.session_id,
      remove_sample: true,
      metadata: { polar: polarMetadata(result, -1, null) },
    },
  ]
}
