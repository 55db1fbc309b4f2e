/**
 * @module
 * Completion → Responses `response` object. Output order: `reasoning` (summary text + self-describing
 * `encrypted_content`), `message` (when there is text, or nothing else), one `function_call` or
 * `custom_tool_call` per call. Every id derives from the completion id (`openai-responses-ids.ts`).
 */
import type { ResponseContext } from '../../adapter.ts'
import type { Completion, ResponseMessage } from '../../types.ts'
import {
  customToolCallItemId,
  encodeReasoningContent,
  functionCallItemId,
  messageItemId,
  reasoningItemId,
  responseId,
  toolCallId,
} from './openai-responses-ids.ts'
import { responsesReplyOptions } from './openai-responses-request.ts'
import { type ResponsesStatus, mapResponsesStatus } from './map-openai-responses-stop-reason.ts'

export interface ReasoningItem {
  type: 'reasoning'
  id: string
  summary: { type: 'summary_text'; text: string }[]
  encrypted_content: string
}

export interface OutputText {
  type: 'output_text'
  text: string
  annotations: never[]
  logprobs: never[]
}

export interface MessageItem {
  type: 'message'
  id: string
  status: 'completed' | 'incomplete' | 'in_progress'
  role: 'assistant'
  content: OutputText[]
}

export interface FunctionCallItem {
  type: 'function_call'
  id: string
  call_id: string
  name: string
  arguments: string
  status: 'completed' | 'incomplete' | 'in_progress'
}

export interface CustomToolCallItem {
  type: 'custom_tool_call'
  id: string
  call_id: string
  name: string
  input: string
}

export type ResponsesOutputItem = ReasoningItem | MessageItem | FunctionCallItem | CustomToolCallItem

/** A custom tool's freeform input from the `{"input": "…"}` arguments the engine produced. */
export function customToolInput(argumentsText: string): string {
  try {
    const parsed: unknown = JSON.parse(argumentsText)
    if (parsed && typeof parsed === 'object' && typeof (parsed as { input?: unknown }).input === 'string') {
      return (parsed as { input: string }).input
    }
  } catch {
    // Not the expected wrapper: hand the sampled text over as is.
  }
  return argumentsText
}

export function responsesOutputItems(
  message: ResponseMessage,
  completionId: string,
  customTools: readonly string[],
  itemStatus: 'completed' | 'incomplete' = 'completed',
): ResponsesOutputItem[] {
  const items: ResponsesOutputItem[] = []
  if (message.reasoning_content) {
    items.push({
      type: 'reasoning',
      id: reasoningItemId(completionId),
      summary: [{ type: 'summary_text', text: message.reasoning_content }],
      encrypted_content: encodeReasoningContent(completionId, message.reasoning_content),
    })
  }
  const calls = message.tool_calls ?? []
  if (message.content || calls.length === 0) {
    items.push({
      type: 'message',
      id: messageItemId(completionId),
      status: itemStatus,
      role: 'assistant',
      content: [{ type: 'output_text', text: message.content ?? '', annotations: [], logprobs: [] }],
    })
  }
  calls.forEach((call, index) => {
    const { name, arguments: argumentsText } = call.function
    if (customTools.includes(name)) {
      items.push({
        type: 'custom_tool_call',
        id: customToolCallItemId(completionId, index),
        call_id: toolCallId(completionId, index),
        name,
        input: customToolInput(argumentsText),
      })
    } else {
      items.push({
        type: 'function_call',
        id: functionCallItemId(completionId, index),
        call_id: toolCallId(completionId, index),
        name,
        arguments: argumentsText,
        status: itemStatus,
      })
    }
  })
  return items
}

export function responsesUsage(completion: Completion) {
  const { usage } = completion
  return {
    input_tokens: usage.inputTokens,
    input_tokens_details: { cached_tokens: usage.cachedInputTokens },
    output_tokens: usage.outputTokens,
    output_tokens_details: { reasoning_tokens: usage.reasoningTokens ?? 0 },
    total_tokens: usage.inputTokens + usage.outputTokens,
  }
}

export interface ResponseObjectState {
  status: 'in_progress' | ResponsesStatus['status'] | 'failed'
  output: ResponsesOutputItem[]
  usage: ReturnType<typeof responsesUsage> | null
  incompleteDetails?: ResponsesStatus['incompleteDetails']
  error?: { code: string; message: string } | null
}

/** The `response` object for lifecycle events and the non-streaming body (request fields echoed). */
export function responsesResponseObject(context: ResponseContext, state: ResponseObjectState) {
  const { echo } = responsesReplyOptions(context.responseOptions)
  return {
    id: responseId(context.completionId),
    object: 'response' as const,
    created_at: context.created,
    status: state.status,
    background: false,
    error: state.error ?? null,
    incomplete_details: state.incompleteDetails ?? null,
    instructions: echo.instructions ?? null,
    max_output_tokens: echo.max_output_tokens ?? null,
    model: context.modelRequested,
    output: state.output,
    parallel_tool_calls: echo.parallel_tool_calls ?? true,
    previous_response_id: null,
    reasoning: echo.reasoning ?? { effort: null, summary: null },
    store: echo.store ?? false,
    temperature: echo.temperature ?? null,
    text: echo.text ?? { format: { type: 'text' } },
    tool_choice: echo.tool_choice ?? 'auto',
    tools: echo.tools ?? [],
    top_p: echo.top_p ?? null,
    truncation: echo.truncation ?? 'disabled',
    usage: state.usage,
    metadata: echo.metadata ?? {},
  }
}

export function buildResponsesResponse(completion: Completion, context: ResponseContext) {
  const { customTools } = responsesReplyOptions(context.responseOptions)
  const { status, incompleteDetails } = mapResponsesStatus(completion)
  const itemStatus = status === 'incomplete' ? 'incomplete' : 'completed'
  return responsesResponseObject(context, {
    status,
    incompleteDetails,
    output: responsesOutputItems(completion.message, context.completionId, customTools, itemStatus),
    usage: responsesUsage(completion),
  })
}
