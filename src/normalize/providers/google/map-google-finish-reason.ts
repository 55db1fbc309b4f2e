/**
 * @module
 * Engine finish → Gemini `finishReason` (docs/wire-protocols.md §3). Gemini has no tool-call reason: calls
 * end with `STOP`, as do matched stop sequences.
 * @see https://ai.google.dev/api/generate-content#FinishReason
 */
import type { Completion } from '../../types.ts'

export type GoogleFinishReason = 'STOP' | 'MAX_TOKENS' | 'SAFETY' | 'OTHER'

export function mapGoogleFinishReason(completion: Completion): GoogleFinishReason {
  switch (completion.finishReason.unified) {
    case 'length':
      return 'MAX_TOKENS'
    case 'content-filter':
      return 'SAFETY'
    case 'error':
      return 'OTHER'
    default:
      return 'STOP'
  }
}
