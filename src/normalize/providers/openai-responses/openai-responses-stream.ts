/**
 * @module
 * Synthetic Responses SSE (docs/wire-protocols.md §2) with the events Polar leaves out: `sequence_number`
 * on every event, `response.in_progress`, `output_text.done`, `item_id` on deltas. `start()` already
 * sends `response.created` + `response.in_progress`; keep-alives are SSE comments; the end is
 * `response.completed`, or `response.incomplete` for a length stop. Items are final in
 * `response.output_item.done` (Codex reads them there), and equal the non-streaming output.
 */
import type { ResponseContext, StreamEncoder } from '../../adapter.ts'
import { sseComment, sseEvent } from '../../sse.ts'
import type { Completion, NormalizedError } from '../../types.ts'
import { mapResponsesStatus } from './map-openai-responses-stop-reason.ts'
import { responsesStreamErrorCode } from './openai-responses-error.ts'
import { responsesReplyOptions } from './openai-responses-request.ts'
import { type ResponsesOutputItem, responsesOutputItems, responsesResponseObject, responsesUsage } from './openai-responses-response.ts'

export function createResponsesStreamEncoder(context: ResponseContext): StreamEncoder {
  let sequence = 0
  let started = false
  const event = (type: string, payload: Record<string, unknown>) => sseEvent(type, { type, ...payload, sequence_number: sequence++ })

  const start = () => {
    if (started) return ''
    started = true
    const response = responsesResponseObject(context, { status: 'in_progress', output: [], usage: null })
    return event('response.created', { response }) + event('response.in_progress', { response })
  }

  const itemEvents = (item: ResponsesOutputItem, outputIndex: number): string => {
    const at = { item_id: item.id, output_index: outputIndex }
    let out = ''
    switch (item.type) {
      case 'reasoning': {
        const text = item.summary[0]?.text ?? ''
        out += event('response.output_item.added', { output_index: outputIndex, item: { type: 'reasoning', id: item.id, summary: [] } })
        out += event('response.reasoning_summary_part.added', { ...at, summary_index: 0, part: { type: 'summary_text', text: '' } })
        if (text) out += event('response.reasoning_summary_text.delta', { ...at, summary_index: 0, delta: text })
        out += event('response.reasoning_summary_text.done', { ...at, summary_index: 0, text })
        out += event('response.reasoning_summary_part.done', { ...at, summary_index: 0, part: { type: 'summary_text', text } })
        break
      }
      case 'message': {
        const part = item.content[0] ?? { type: 'output_text', text: '', annotations: [], logprobs: [] }
        out += event('response.output_item.added', {
          output_index: outputIndex,
          item: { type: 'message', id: item.id, status: 'in_progress', role: 'assistant', content: [] },
        })
        out += event('response.content_part.added', { ...at, content_index: 0, part: { ...part, text: '' } })
        if (part.text) {
          out += event('response.output_text.delta', { ...at, content_index: 0, delta: part.text, logprobs: [] })
        }
        out += event('response.output_text.done', { ...at, content_index: 0, text: part.text, logprobs: [] })
        out += event('response.content_part.done', { ...at, content_index: 0, part })
        break
      }
      case 'function_call':
        out += event('response.output_item.added', {
          output_index: outputIndex,
          item: { ...item, arguments: '', status: 'in_progress' },
        })
        if (item.arguments) out += event('response.function_call_arguments.delta', { ...at, delta: item.arguments })
        out += event('response.function_call_arguments.done', { ...at, name: item.name, arguments: item.arguments })
        break
      case 'custom_tool_call':
        out += event('response.output_item.added', { output_index: outputIndex, item: { ...item, input: '' } })
        if (item.input) out += event('response.custom_tool_call_input.delta', { ...at, delta: item.input })
        out += event('response.custom_tool_call_input.done', { ...at, input: item.input })
        break
    }
    return out + event('response.output_item.done', { output_index: outputIndex, item })
  }

  return {
    start,
    heartbeat: () => sseComment('keep-alive'),
    completion(completion: Completion) {
      let out = start()
      const { customTools } = responsesReplyOptions(context.responseOptions)
      const { status, incompleteDetails } = mapResponsesStatus(completion)
      const itemStatus = status === 'incomplete' ? 'incomplete' : 'completed'
      const output = responsesOutputItems(completion.message, context.completionId, customTools, itemStatus)
      output.forEach((item, index) => {
        out += itemEvents(item, index)
      })
      const response = responsesResponseObject(context, {
        status,
        incompleteDetails,
        output,
        usage: responsesUsage(completion),
      })
      return out + event(status === 'incomplete' ? 'response.incomplete' : 'response.completed', { response })
    },
    error(error: NormalizedError) {
      const code = responsesStreamErrorCode(error)
      // `error` first (the OpenAI SDK throws on it), then the lifecycle end Codex waits for.
      let out = event('error', { code, message: error.message, param: error.param ?? null })
      if (started) {
        const response = responsesResponseObject(context, {
          status: 'failed',
          output: [],
          usage: null,
          error: { code, message: error.message },
        })
        out += event('response.failed', { response })
      }
      return out
    },
  }
}
