/**
 * @module
 * Resolve a Responses `previous_response_id` from the session log before parsing: walk the chain of
 * earlier turns (`resp_<completionId>` → record → its own `previous_response_id` …) and splice their
 * inputs and outputs into the body with the pure `resolvePreviousResponse`. The result is what a
 * `store:false` client would have sent, so parsing, capture and prefix merging work unchanged.
 *
 * Wiring (in `handle-proxy-request.ts`, before `adapter.parseRequest`):
 * `if (adapter.id === 'openai-responses') body = await resolvePreviousResponseBody(body, sessionCompletionLookup(access.stub))`
 */
import type { CompletionRecord } from '../../contract/completion-record.ts'
import {
  type PriorResponseTurn,
  previousResponseCompletionId,
  resolvePreviousResponse,
} from '../../normalize/providers/openai-responses/index.ts'
import { GatewayError } from '../errors.ts'

/** A chain longer than this is refused (each step is a lookup). */
const MAX_CHAIN_TURNS = 2_000

export type CompletionLookup = (completionId: string) => Promise<CompletionRecord | null>

/** The part of the session object's RPC this step reads. */
export interface CompletionById {
  completionById(completionId: string): Promise<CompletionRecord | null>
}

export async function resolvePreviousResponseBody(body: unknown, lookup: CompletionLookup): Promise<unknown> {
  let completionId = previousResponseCompletionId(body)
  if (!completionId) return body
  const chain: CompletionRecord[] = []
  while (completionId) {
    if (chain.length >= MAX_CHAIN_TURNS) {
      throw new GatewayError(
        400,
        'invalid_request',
        `previous_response_id chain longer than ${MAX_CHAIN_TURNS} turns`,
        'previous_response_id',
      )
    }
    const record = await lookup(completionId)
    if (record?.api !== 'openai-responses' || record.status !== 'ok' || !record.response_message) {
      throw new GatewayError(400, 'invalid_request', `Previous response with id 'resp_${completionId}' not found.`, 'previous_response_id')
    }
    chain.push(record)
    completionId = previousResponseCompletionId(record.original_request)
  }
  let prior: PriorResponseTurn | null = null
  for (const record of chain.reverse()) {
    prior = {
      completionId: record.completion_id,
      originalRequest: record.original_request,
      responseMessage: record.response_message as NonNullable<CompletionRecord['response_message']>,
      previous: prior,
    }
  }
  return prior ? resolvePreviousResponse(body, prior) : body
}

/** A lookup through the session Durable Object's indexed `completionById` RPC (O(1) per step). */
export function sessionCompletionLookup(stub: CompletionById): CompletionLookup {
  return (completionId) => stub.completionById(completionId)
}
