/**
 * @module
 * Put a harness's replayed tool calls back to the arguments the model sampled when the harness only filled
 * in schema defaults (Claude Code's `Edit … "replace_all": false`): the rule is the Anthropic adapter's
 * `restoreSampledToolInputs`; this step reads the sampled calls from the session log, one slim indexed RPC
 * (`responseMessages`) and only when a replayed call carries a schema-default value. The harness's bytes
 * stay the recorded `original_request`; the completion gets the warning `tool_input_defaults_dropped`.
 *
 * Wiring (in `handle-proxy-request.ts`, before `adapter.parseRequest`):
 * `if (adapter.id === 'anthropic') restored = await restoreReplayedToolInputs(body, access.stub)`
 */
import {
  restoredToolInputWarning,
  restoreSampledToolInputs,
  toolInputRestoreCandidates,
} from '../../normalize/providers/anthropic/index.ts'
import type { ResponseMessage, Warning } from '../../normalize/types.ts'
import { MAX_RESPONSE_MESSAGE_LOOKUPS } from '../../durable/session/completion-log.ts'

/** The part of the session object's RPC this step reads. */
export interface ResponseMessagesById {
  responseMessages(completionIds: string[]): Promise<Record<string, ResponseMessage>>
}

export async function restoreReplayedToolInputs(
  body: unknown,
  session: ResponseMessagesById,
): Promise<{ body: unknown; warning: Warning | null }> {
  const ids = toolInputRestoreCandidates(body)
  if (ids.length === 0) return { body, warning: null }
  // The most recent calls matter most for merging; a history with more candidates keeps its oldest as sent.
  const found = await session.responseMessages(ids.slice(-MAX_RESPONSE_MESSAGE_LOOKUPS))
  const restore = restoreSampledToolInputs(body, new Map(Object.entries(found)))
  return { body: restore.body, warning: restoredToolInputWarning(restore) }
}
