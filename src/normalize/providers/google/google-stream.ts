/**
 * @module
 * Synthetic Gemini SSE (`:streamGenerateContent?alt=sse`, docs/wire-protocols.md §2): `data:` frames of
 * `GenerateContentResponse`, no `event:` names and no `[DONE]`. The thought part comes in its own
 * frame; the last frame carries the text and every whole `functionCall`, `finishReason` and
 * `usageMetadata` (Gemini CLI requires a finish reason on a frame with content). A keep-alive is an empty
 * line, not an SSE comment: the `@google/genai` 1.x that Gemini CLI 0.61 bundles only skips whitespace
 * before `data:` (a `: keep-alive` comment stays in its buffer and the stream ends in "Incomplete JSON
 * segment at the end"), and an empty line is no event for any SSE parser. A failure is a
 * `data: {"error": …}` frame, which it throws.
 */
import type { ResponseContext, StreamEncoder } from '../../adapter.ts'
import { sseData } from '../../sse.ts'
import type { Completion, NormalizedError } from '../../types.ts'
import { googleErrorBody } from './google-error.ts'
import { googleResponseFrame, googleResponseParts } from './google-response.ts'

export function createGoogleStreamEncoder(context: ResponseContext): StreamEncoder {
  return {
    start: () => '',
    heartbeat: () => '\n',
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
