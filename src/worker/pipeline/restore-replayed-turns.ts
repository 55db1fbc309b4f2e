/**
 * @module
 * Wires `restoreReplayedTurns` (src/normalize/replay-restore.ts) into the proxy: the sampled turns that replayed
 * assistant messages name are read from the session's log in one slim indexed RPC (`responseMessages`) and kept
 * in a small per-isolate cache (records never change once committed), so a long session does not read the same
 * turns on every call. No RPC at all when no replayed turn is a candidate or all are cached.
 */
import type { SampledTurnLookup } from '../../normalize/replay-restore.ts'
import { replayRestoredWarning, restoreReplayedTurns } from '../../normalize/replay-restore.ts'
import type { ChatRequest, ResponseMessage, Warning } from '../../normalize/types.ts'
import { MAX_RESPONSE_MESSAGE_LOOKUPS } from '../../durable/session/completion-log.ts'
import type { ResponseMessagesById } from './restore-tool-inputs.ts'

/** Sampled turns kept per isolate (a turn is a few hundred bytes). */
const CACHE_LIMIT = 2_048
const sampledTurns = new Map<string, ResponseMessage>()

function remember(key: string, turn: ResponseMessage) {
  if (sampledTurns.size >= CACHE_LIMIT) sampledTurns.delete(sampledTurns.keys().next().value as string)
  sampledTurns.set(key, turn)
}

/** A cached lookup of `sessionId`'s sampled turns; ids not found are not cached (asked again next time). */
export function sampledTurnLookup(sessionId: string, session: ResponseMessagesById): SampledTurnLookup {
  return async (completionIds) => {
    const found: Record<string, ResponseMessage> = {}
    const missing: string[] = []
    for (const id of completionIds) {
      const cached = sampledTurns.get(`${sessionId}\u0000${id}`)
      if (cached) found[id] = cached
      else missing.push(id)
    }
    if (missing.length === 0) return found
    // The most recent turns matter most for merging; a longer history keeps its oldest candidates as sent.
    const read = await session.responseMessages(missing.slice(-MAX_RESPONSE_MESSAGE_LOOKUPS))
    for (const [id, message] of Object.entries(read)) {
      found[id] = message
      remember(`${sessionId}\u0000${id}`, message)
    }
    return found
  }
}

/** Restores the engine body's replayed turns in place; the warning goes to `warnings`. */
export async function restoreEngineBodyTurns(engineBody: ChatRequest, lookup: SampledTurnLookup, warnings: Warning[]) {
  const { messages, turns } = await restoreReplayedTurns(engineBody.messages, lookup)
  if (turns.length === 0) return
  engineBody.messages = messages
  const warning = replayRestoredWarning(turns)
  if (warning) warnings.push(warning)
}
