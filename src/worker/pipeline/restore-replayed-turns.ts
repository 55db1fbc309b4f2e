/**
 * @module
 * Wires `restoreReplayedTurns` (src/normalize/replay-restore.ts) into the proxy, after the engine body is built:
 * the sampled turns that replayed assistant messages name come from `sampledMessages` (the per-isolate cache
 * shared with the tool-input restore, else one slim `responseMessages` RPC). No RPC when no replayed turn is a
 * candidate or all are cached.
 */
import type { SampledTurnLookup } from '../../normalize/replay-restore.ts'
import { replayRestoredWarning, restoreReplayedTurns } from '../../normalize/replay-restore.ts'
import type { ChatRequest, Warning } from '../../normalize/types.ts'
import { type ResponseMessagesById, sampledMessages } from './restore-tool-inputs.ts'

export function sampledTurnLookup(sessionId: string, session: ResponseMessagesById): SampledTurnLookup {
  return async (completionIds) => Object.fromEntries(await sampledMessages(sessionId, session, completionIds))
}

/** Restores the engine body's replayed turns in place; the warning goes to `warnings`. */
export async function restoreEngineBodyTurns(engineBody: ChatRequest, lookup: SampledTurnLookup, warnings: Warning[]) {
  const { messages, turns } = await restoreReplayedTurns(engineBody.messages, lookup)
  if (turns.length === 0) return
  engineBody.messages = messages
  const warning = replayRestoredWarning(turns)
  if (warning) warnings.push(warning)
}
