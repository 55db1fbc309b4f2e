/**
 * @module
 * Synthetic Gemini SSE (`:streamGenerateContent?alt=sse`, wire-protocols.md §4.4): `data:` frames of
 * `GenerateContentResponse`, no `event:` names and no `[DONE]`. The thought part comes in its own
 * frame; the last frame carries the text and every whole `functionCall`, `finishReason` and
 * `usageMetadata` (Gemini CLI requires a finish reason on a frame with content). Keep-alives are SSE
 * comments, which `@google/genai` skips; a failure is a `data: {"error": …}` frame, which it throws.
 */
import type { ResponseContext, StreamEncoder } from '../../adapter.ts'
import { sseComment, sseData } from '../../sse.ts'
import type { Completion, NormalizedError } from '../../types.ts'
import { googleErrorBody } from './google-error.ts'
import { googleResponseFrame, googleResponseParts } from './google-response.ts'

export function createGoogleStreamEncoder(context: ResponseContext): StreamEncoder {
  return {
    start: () => '',
    heartbeat: () => sseComment('keep-alive'),
    completion(completion: Completion) {
      const { thought, rest } = googleResponseParts(completion, context)
      let out = ''
      if (thought && rest.length > 0) out += sseData(googleResponseFrame(context, [thought], null))
      const last = thought && rest.length === 0 ? [thought] : rest
      return out + sseData(googleResponseFrame(context, last, { completion }))
    },
    error(error: NormalizedError) {
      return sseData(googleErrorBody(error))
    },
  }
}
