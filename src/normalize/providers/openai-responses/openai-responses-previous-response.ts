/**
 * @module
 * `previous_response_id` without server-side state: the worker looks the earlier turn(s) up in the
 * session log and this pure function splices them into the request, producing the full-history body a
 * `store:false` client (Codex, opencode) would have sent. The result is then parsed as usual.
 *
 * OpenAI semantics: the new input is appended to the previous response's input and output; the previous
 * request's `instructions` are not carried over (the new request's own apply). Output items are rebuilt
 * from the recorded `response_message` with the same deterministic ids the client saw.
 * @see https://platform.openai.com/docs/guides/conversation-state
 */
import { RequestValidationError } from '../../adapter.ts'
import type { ResponseMessage } from '../../types.ts'
import { completionIdFromResponseId } from './openai-responses-ids.ts'
import { responsesOutputItems } from './openai-responses-response.ts'

/** One earlier turn, as the session log has it. */
export interface PriorResponseTurn {
  /** `completion_id` of the record (`resp_<completionId>` is the id the client saw). */
  completionId: string
  /** The record's `original_request`: the harness's raw Responses body for that turn. */
  originalRequest: unknown
  /** The record's `response_message`: what was sampled. */
  responseMessage: ResponseMessage
  /** The turn that one continued, when its request had a `previous_response_id` itself. */
  previous: PriorResponseTurn | null
}

type Json = Record<string, unknown>

const isObject = (value: unknown): value is Json => value !== null && typeof value === 'object' && !Array.isArray(value)

/** The completion ids to look up, newest first, for a body's `previous_response_id`; null if none. */
export function previousResponseCompletionId(body: unknown): string | null {
  if (!isObject(body) || typeof body.previous_response_id !== 'string' || !body.previous_response_id) return null
  const completionId = completionIdFromResponseId(body.previous_response_id)
  if (!completionId) {
    throw new RequestValidationError(
      `previous_response_id: Previous response with id '${body.previous_response_id}' not found.`,
      'previous_response_id',
    )
  }
  return completionId
}

/**
 * The body with `previous_response_id` resolved: `input` = every earlier turn's input and output (oldest
 * first) followed by this request's input; `previous_response_id` removed; everything else kept.
 */
export function resolvePreviousResponse(body: unknown, prior: PriorResponseTurn): Json {
  if (!isObject(body)) throw new RequestValidationError('request body must be a JSON object')
  const { previous_response_id: _previous, ...rest } = body
  return { ...rest, input: [...turnItems(prior), ...inputItems(body.input)] }
}

function turnItems(turn: PriorResponseTurn): unknown[] {
  const chain: PriorResponseTurn[] = []
  for (let at: PriorResponseTurn | null = turn; at; at = at.previous) chain.unshift(at)
  const items: unknown[] = []
  for (const step of chain) {
    const request = isObject(step.originalRequest) ? step.originalRequest : {}
    items.push(...inputItems(request.input))
    items.push(...responsesOutputItems(step.responseMessage, step.completionId, customToolNames(request.tools)))
  }
  return items
}

function inputItems(input: unknown): unknown[] {
  if (typeof input === 'string') return [{ type: 'message', role: 'user', content: input }]
  return Array.isArray(input) ? input : []
}

function customToolNames(tools: unknown): string[] {
  if (!Array.isArray(tools)) return []
  return tools.flatMap((tool) => (isObject(tool) && tool.type === 'custom' && typeof tool.name === 'string' ? [tool.name] : []))
}
