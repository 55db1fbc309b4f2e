/**
 * @module
 * Engine finish → Anthropic `stop_reason` / `stop_sequence` (docs/wire-protocols.md §3). A matched stop string
 * (vLLM `stop_reason`) becomes `stop_sequence` with the string, which every peer including Polar loses.
 * @see https://docs.anthropic.com/en/api/handling-stop-reasons
 */
import type { Completion } from '../../types.ts'

export type AnthropicStopReason = 'end_turn' | 'max_tokens' | 'stop_sequence' | 'tool_use' | 'refusal'

export function mapAnthropicStopReason(completion: Completion): {
  stopReason: AnthropicStopReason
  stopSequence: string | null
} {
  const { unified } = completion.finishReason
  if (unified === 'length') return { stopReason: 'max_tokens', stopSequence: null }
  // Tool calls decide over the raw reason: engines say `stop` next to parsed calls, and `tool_use`
  // without a tool_use block would leave a harness waiting for a call that never comes.
  if (completion.message.tool_calls?.length) return { stopReason: 'tool_use', stopSequence: null }
  if (unified === 'content-filter') return { stopReason: 'refusal', stopSequence: null }
  if (unified === 'stop' && typeof completion.stopReason === 'string') {
    return { stopReason: 'stop_sequence', stopSequence: completion.stopReason }
  }
  return { stopReason: 'end_turn', stopSequence: null }
}
