/**
 * @module
 * The request preparation every prompt the edge sends to the engine goes through, generation and
 * count-tokens alike, so a count is the prompt the next generation really gets:
 * `previous_response_id` resolved (Responses), replayed tool inputs put back to their sampled form
 * (Anthropic, `restore-tool-inputs.ts`), the adapter's parse, the engine body (`buildEngineRequest`), and
 * replayed turns restored to their sampled form (`restore-replayed-turns.ts`). The restores' warnings go to
 * the parsed request's `warnings`.
 */
import type { ApiId, ChatRequest, Warning } from '../../normalize/types.ts'
import { buildEngineRequest, type EngineRequestOptions } from '../../normalize/engine/engine-request.ts'
import { resolvePreviousResponseBody, sessionCompletionLookup } from './resolve-previous-response.ts'
import { restoreEngineBodyTurns, sampledTurnLookup } from './restore-replayed-turns.ts'
import { restoreReplayedToolInputs } from './restore-tool-inputs.ts'
import type { SessionAccess } from './session-access.ts'

export interface PreparedEngineBody<P extends { request: ChatRequest; warnings: Warning[] }> {
  /** The wire body after the wire-level restores (what the adapter parsed). */
  body: unknown
  parsed: P
  engineBody: ChatRequest
}

export async function prepareEngineBody<P extends { request: ChatRequest; warnings: Warning[] }>(
  adapterId: ApiId,
  wireBody: unknown,
  parse: (body: unknown) => P,
  access: Pick<SessionAccess, 'sessionId' | 'stub'>,
  engineOptions: EngineRequestOptions,
): Promise<PreparedEngineBody<P>> {
  let body = wireBody
  if (adapterId === 'openai-responses') body = await resolvePreviousResponseBody(body, sessionCompletionLookup(access.stub))
  const restored = adapterId === 'anthropic' ? await restoreReplayedToolInputs(body, access.sessionId, access.stub) : null
  if (restored) body = restored.body
  const parsed = parse(body)
  if (restored?.warning) parsed.warnings.push(restored.warning)
  const engineBody = buildEngineRequest(parsed.request, engineOptions)
  // Replayed turns the template would not re-render as sampled get their sampled form back (a lookup only then).
  await restoreEngineBodyTurns(engineBody, sampledTurnLookup(access.sessionId, access.stub), parsed.warnings)
  return { body, parsed, engineBody }
}
