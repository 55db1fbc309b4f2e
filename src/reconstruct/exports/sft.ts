/**
 * @module
 * SFT rows. `toSftRows`: OpenAI chat shape `{messages, tools}` (prompt messages, then the
 * assistant turns and the tool results between them), one row per trace. `toSftTokenRows`: the
 * token variant `{input_ids, loss_mask}` over the whole sequence (prompt positions 0), which keeps
 * exactly the sampled tokens trainable instead of re-rendering the text.
 */
import type { Trajectory } from '../../contract/trajectory.ts'

export interface SftFilter {
  /** Keep only traces whose `metadata.branch` is listed (default: all). */
  branches?: readonly string[]
  /** Keep only traces with `reward >= min_reward` (default: no filter). */
  min_reward?: number
}

export interface SftRow {
  messages: Record<string, unknown>[]
  tools: Record<string, unknown>[] | null
}

export interface SftTokenRow {
  input_ids: number[]
  loss_mask: number[]
  prompt_length: number
  metadata: { session_id: unknown; trace_index: number; branch: unknown; reward: number | null }
}

function selected(trajectory: Trajectory, filter: SftFilter) {
  return trajectory.traces
    .map((trace, index) => ({ trace, index }))
    .filter(({ trace }) => {
      if (filter.branches !== undefined && !filter.branches.includes(String(trace.metadata.branch))) {
        return false
      }
      if (filter.min_reward !== undefined && (trace.reward === null || trace.reward < filter.min_reward)) {
        return false
      }
      return true
    })
}

export interface SftOptions extends SftFilter {
  /** Keep `reasoning_content` on assistant messages (default true). */
  include_reasoning?: boolean
}

export function toSftRows(trajectory: Trajectory, options: SftOptions = {}): SftRow[] {
  const includeReasoning = options.include_reasoning ?? true
  return selected(trajectory, options).map(({ trace }) => ({
    messages: [...trace.prompt_messages, ...trace.response_messages].map((message) => {
      if (includeReasoning || !('reasoning_content' in message)) return message
      const { reasoning_content: _dropped, ...rest } = message
      return rest
    }),
    tools: trace.tools,
  }))
}

export function toSftTokenRows(trajectory: Trajectory, filter: SftFilter = {}): SftTokenRow[] {
  return selected(trajectory, filter).map(({ trace, index }) => ({
    input_ids: [...trace.prompt_ids, ...trace.response_ids],
    loss_mask: [...new Array<number>(trace.prompt_ids.length).fill(0), ...trace.loss_mask],
    prompt_length: trace.prompt_ids.length,
    metadata: {
      session_id: trajectory.metadata.session_id,
      trace_index: index,
      branch: trace.metadata.branch,
      reward: trace.reward,
    },
  }))
}
