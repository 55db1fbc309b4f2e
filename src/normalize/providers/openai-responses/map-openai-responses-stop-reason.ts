/**
 * @module
 * Engine finish → Responses `status` / `incomplete_details` (docs/wire-protocols.md §3): `length` is
 * `incomplete` with reason `max_output_tokens` (Polar reports it as `completed`).
 * @see https://platform.openai.com/docs/api-reference/responses/object
 */
import type { Completion } from '../../types.ts'

export interface ResponsesStatus {
  status: 'completed' | 'incomplete'
  incompleteDetails: { reason: 'max_output_tokens' | 'content_filter' } | null
}

export function mapResponsesStatus(completion: Completion): ResponsesStatus {
  switch (completion.finishReason.unified) {
    case 'length':
      return { status: 'incomplete', incompleteDetails: { reason: 'max_output_tokens' } }
    case 'content-filter':
      return { status: 'incomplete', incompleteDetails: { reason: 'content_filter' } }
    default:
      return { status: 'completed', incompleteDetails: null }
  }
}
