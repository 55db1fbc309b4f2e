/**
 * @module
 * NeMo Gym style rows (PR #1349 `responses_api_agents/polar/app.py`): one row per trace, each
 * sampled round as a Responses-API output message carrying Gym's `TokenIDLogProbMixin` fields
 * (`NeMoGymResponseOutputMessageForTraining`): `prompt_token_ids`, `generation_token_ids`,
 * `generation_log_probs`.
 *
 * Rounds come from `metadata.turns` (every builder writes it; traces without it fall back to
 * maximal mask-1 runs). A round's `prompt_token_ids` is the trainer's context for it
 * (`prompt_ids + response_ids[0 : response_offset]`), so consecutive rounds extend each other
 * token for token — what NeMo RL's multi-turn prefix check expects. The prompt the model actually
 * saw can differ by the reported `context_drift_tokens`. `generation_log_probs` is null when the
 * trace has no aligned logprobs.
 */
import type { Trace, Trajectory } from '../../contract/trajectory.ts'

export interface NemoGymOutputMessage {
  type: 'message'
  id: string
  role: 'assistant'
  status: 'completed' | 'incomplete'
  content: { type: 'output_text'; text: string; annotations: [] }[]
  prompt_token_ids: number[]
  generation_token_ids: number[]
  generation_log_probs: number[] | null
}

export interface NemoGymRow {
  session_id: string | null
  task_id: string | null
  trace_index: number
  reward: number | null
  branch: string | null
  response: { output: NemoGymOutputMessage[] }
  metadata: { context_drift_tokens: number[]; finish_reason: string | null }
}

interface Round {
  offset: number
  length: number
  messageIndex: number
  id: string
  drift: number
}

function roundsOf(trace: Trace, traceIndex: number): Round[] {
  const turns = trace.metadata.turns
  if (Array.isArray(turns)) {
    return turns.map((turn, index) => {
      const t = turn as Record<string, unknown>
      return {
        offset: Number(t.response_offset),
        length: Number(t.response_length),
        messageIndex: typeof t.message_index === 'number' ? t.message_index : -1,
        id: typeof t.completion_id === 'string' ? t.completion_id : `trace${traceIndex}_round${index}`,
        drift: typeof t.context_drift_tokens === 'number' ? t.context_drift_tokens : 0,
      }
    })
  }
  const rounds: Round[] = []
  let start = -1
  for (let i = 0; i <= trace.loss_mask.length; i++) {
    const on = trace.loss_mask[i] === 1
    if (on && start < 0) start = i
    if (!on && start >= 0) {
      rounds.push({
        offset: start,
        length: i - start,
        messageIndex: -1,
        id: `trace${traceIndex}_round${rounds.length}`,
        drift: 0,
      })
      start = -1
    }
  }
  return rounds
}

function messageText(message: Record<string, unknown> | undefined): string {
  if (message === undefined) return ''
  const content = message.content
  return typeof content === 'string' ? content : ''
}

export function toNemoGymRows(trajectory: Trajectory): NemoGymRow[] {
  const meta = trajectory.metadata
  return trajectory.traces.map((trace, traceIndex) => {
    const rounds = roundsOf(trace, traceIndex)
    const output = rounds.map((round, index): NemoGymOutputMessage => {
      const end = round.offset + round.length
      const last = index === rounds.length - 1
      return {
        type: 'message',
        id: round.id,
        role: 'assistant',
        status: last && trace.finish_reason === 'length' ? 'incomplete' : 'completed',
        content: [
          {
            type: 'output_text',
            text: messageText(trace.response_messages[round.messageIndex]),
            annotations: [],
          },
        ],
        prompt_token_ids: [...trace.prompt_ids, ...trace.response_ids.slice(0, round.offset)],
        generation_token_ids: trace.response_ids.slice(round.offset, end),
        generation_log_probs: trace.response_logprobs?.slice(round.offset, end) ?? null,
      }
    })
    return {
      session_id: typeof meta.session_id === 'string' ? meta.session_id : null,
      task_id: typeof meta.task_id === 'string' ? meta.task_id : null,
      trace_index: traceIndex,
      reward: trace.reward,
      branch: typeof trace.metadata.branch === 'string' ? trace.metadata.branch : null,
      response: { output },
      metadata: {
        context_drift_tokens: rounds.map((round) => round.drift),
        finish_reason: trace.finish_reason,
      },
    }
  })
}
