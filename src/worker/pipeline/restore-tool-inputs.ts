/**
 * @module
 * Put a harness's replayed tool calls back to the arguments the model sampled when the harness only filled
 * in schema defaults (Claude Code's `Edit … "replace_all": false`): the rule is the Anthropic adapter's
 * `restoreSampledToolInputs`; this step supplies the sampled calls from the session log — only when a
 * replayed call carries a schema-default value, through one slim indexed RPC (`responseMessages`, no token
 * ids decoded) for the completions this isolate has not read yet. The harness's bytes stay the recorded
 * `original_request`; the completion gets the warning `tool_input_defaults_dropped`.
 *
 * Wiring (in `handle-proxy-request.ts`, before `adapter.parseRequest`):
 * `if (adapter.id === 'anthropic') restored = await restoreReplayedToolInputs(body, access.sessionId, access.stub)`
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

/**
 * Sampled messages already read, per isolate (a committed record never changes), so a long session reads
 * each replayed call's completion once, not on every call. Bounded by total characters.
 */
const CACHE_MAX_CHARS = 8 * 1024 * 1024
const cache = new Map<string, { message: ResponseMessage; chars: number }>()
let cachedChars = 0

function remember(key: string, message: ResponseMessage) {
  const chars = JSON.stringify(message).length
  if (chars > CACHE_MAX_CHARS / 16) return
  while (cachedChars + chars > CACHE_MAX_CHARS && cache.size > 0) {
    const [oldest, entry] = cache.entries().next().value as [string, { chars: number }]
    cache.delete(oldest)
    cachedChars -= entry.chars
  }
  cache.set(key, { message, chars })
  cachedChars += chars
}

/** Forget every cached message (tests). */
export function clearRestoreCache() {
  cache.clear()
  cachedChars = 0
}

export async function restoreReplayedToolInputs(
  body: unknown,
  sessionId: string,
  session: ResponseMessagesById,
): Promise<{ body: unknown; warning: Warning | null }> {
  const ids = toolInputRestoreCandidates(body)
  if (ids.length === 0) return { body, warning: null }
  const restore = restoreSampledToolInputs(body, await sampledMessages(sessionId, session, ids))
  return { body: restore.body, warning: restoredToolInputWarning(restore) }
}

/**
 * The sampled messages of `ids` (`ok` completions only; others absent): cached ones from this isolate, the
 * rest in one `responseMessages` RPC (none when all are cached). Shared by every replay-restore step.
 */
export async function sampledMessages(
  sessionId: string,
  session: ResponseMessagesById,
  ids: readonly string[],
): Promise<Map<string, ResponseMessage>> {
  const sampled = new Map<string, ResponseMessage>()
  const missing: string[] = []
  for (const id of ids) {
    const hit = cache.get(`${sessionId}\u0000${id}`)
    if (hit) sampled.set(id, hit.message)
    else missing.push(id)
  }
  if (missing.length > 0) {
    // The most recent calls matter most for merging; beyond the bound the oldest stay as sent.
    const found = await session.responseMessages(missing.slice(-MAX_RESPONSE_MESSAGE_LOOKUPS))
    for (const [id, message] of Object.entries(found)) {
      sampled.set(id, message)
      remember(`${sessionId}\u0000${id}`, message)
    }
  }
  return sampled
}
