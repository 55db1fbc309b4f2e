/**
 * @module
 * Synthetic Anthropic Messages SSE (docs/wire-protocols.md §2), built whole once the engine has answered:
 * `message_start` (real `input_tokens`), `ping`, per block `content_block_start` / delta /
 * `content_block_stop` (thinking + `signature_delta`, text, one `tool_use` per parallel call with
 * `input_json_delta`), `message_delta` (stop reason, cumulative usage), `message_stop`.
 *
 * Keep-alives are `ping` events, also before `message_start`: the Anthropic SDK drops `ping` frames
 * before parsing (`core/streaming.js`), so they are legal anywhere (checked in the SDK tests).
 */
import type { ResponseContext, StreamEncoder } from '../../adapter.ts'
import { sseEvent } from '../../sse.ts'
import type { Completion, NormalizedError } from '../../types.ts'
import { anthropicErrorBody } from './anthropic-error.ts'
import { anthropicMessageId } from './anthropic-ids.ts'
import { anthropicBlockPlan, anthropicUsage } from './anthropic-response.ts'
import { mapAnthropicStopReason } from './map-anthropic-stop-reason.ts'

const PING = { type: 'ping' }

function event(data: { type: string } & Record<string, unknown>): string {
  return sseEvent(data.type, data)
}

export function createAnthropicStreamEncoder(context: ResponseContext): StreamEncoder {
  return {
    start: () => '',
    heartbeat: () => event(PING),
    completion(completion: Completion) {
      const usage = anthropicUsage(completion)
      let out = event({
        type: 'message_start',
        message: {
          id: anthropicMessageId(context.completionId),
          type: 'message',
          role: 'assistant',
          model: context.modelRequested,
          content: [],
          stop_reason: null,
          stop_sequence: null,
          usage: { ...usage, output_tokens: 0 },
        },
      })
      out += event(PING)
      anthropicBlockPlan(completion, context.completionId).forEach(({ block, json }, index) => {
        if (block.type === 'thinking') {
          out += event({ type: 'content_block_start', index, content_block: { type: 'thinking', thinking: '', signature: '' } })
          if (block.thinking) {
            out += event({ type: 'content_block_delta', index, delta: { type: 'thinking_delta', thinking: block.thinking } })
          }
          out += event({ type: 'content_block_delta', index, delta: { type: 'signature_delta', signature: block.signature } })
        } else if (block.type === 'text') {
          out += event({ type: 'content_block_start', index, content_block: { type: 'text', text: '' } })
          if (block.text) out += event({ type: 'content_block_delta', index, delta: { type: 'text_delta', text: block.text } })
        } else {
          out += event({
            type: 'content_block_start',
            index,
            content_block: { type: 'tool_use', id: block.id, name: block.name, input: {} },
          })
          out += event({ type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json: json ?? '{}' } })
        }
        out += event({ type: 'content_block_stop', index })
      })
      const { stopReason, stopSequence } = mapAnthropicStopReason(completion)
      out += event({
        type: 'message_delta',
        delta: { stop_reason: stopReason, stop_sequence: stopSequence },
        usage,
      })
      return out + event({ type: 'message_stop' })
    },
    error(error: NormalizedError) {
      return event(anthropicErrorBody(error))
    },
  }
}
