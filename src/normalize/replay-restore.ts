/**
 * @module
 * Restore replayed assistant turns to the form that re-renders to what was sampled (issue #9).
 *
 * vLLM's hermes tool parser cuts a Qwen3 turn `…</think>\n\nRunning the tests.\n<tool_call>…` into
 * `content: "\n\nRunning the tests.\n"` plus the tool calls: the model's own newline before `<tool_call>`
 * stays in `content`. Harnesses send that message back verbatim, and the Qwen3 chat template (like every
 * hermes-style template) inserts its own `\n` between content and the first tool call, so the next prompt
 * reads `…tests.\n\n<tool_call>` where the model sampled `…tests.\n<tool_call>`: one token of context that
 * the model never produced, and under the default `exact` merge preset a `retokenization` break.
 *
 * A replayed turn is identified by the gateway's self-describing tool-call ids (`call_<completionId>_<i>`,
 * `toolu_…`, `fc_…`, `ctc_…`; docs/polar-compat.md §11). Only a turn that can differ is looked up (tool
 * calls and content ending in `\n`), and it is restored only when it is the sampled turn: the same tool
 * names in order, JSON-equal arguments and the same content (modulo leading newlines, which the template
 * strips itself). The restored message carries the sampled content minus the separator the template adds
 * back, and the sampled argument strings. Anything else is left exactly as the harness sent it. What the
 * client sees never changes; the completion records a `replay_restored` warning naming every restored turn.
 */
import type { ChatMessage, ResponseMessage } from './types.ts'

/** The sampled turns of the `ok` completions among `completionIds` (unknown, failed or foreign ids are absent). */
export type SampledTurnLookup = (completionIds: string[]) => Promise<Record<string, ResponseMessage>>

export interface RestoredTurn {
  /** Index in the request's messages. */
  messageIndex: number
  completionId: string
  /** What was put back: `content_separator` and/or `arguments`. */
  restored: string[]
}

export interface ReplayRestore {
  /** The messages to send; the same array when nothing was restored. */
  messages: ChatMessage[]
  turns: RestoredTurn[]
}

const GATEWAY_CALL_ID = /^(?:call|toolu|fc|ctc)_(.+)_(\d+)$/

/** The completion a gateway-issued tool-call id came from; null for any other id. */
export function completionIdOfToolCall(id: unknown): string | null {
  if (typeof id !== 'string') return null
  const match = GATEWAY_CALL_ID.exec(id)
  return match?.[1] ?? null
}

interface ReplayedCall {
  id?: unknown
  function?: { name?: unknown; arguments?: unknown }
}

function replayedCalls(message: ChatMessage): ReplayedCall[] | null {
  const calls = message.tool_calls
  return Array.isArray(calls) && calls.length > 0 ? (calls as ReplayedCall[]) : null
}

/** The single completion every tool call of the turn names; null when none or several. */
function sourceCompletion(calls: readonly ReplayedCall[]): string | null {
  let source: string | null = null
  for (const call of calls) {
    const id = completionIdOfToolCall(call.id)
    if (id === null || (source !== null && id !== source)) return null
    source = id
  }
  return source
}

/** Whether the turn can render differently from its sample: the only known case is the content separator. */
function needsRestore(message: ChatMessage): boolean {
  return message.role === 'assistant' && typeof message.content === 'string' && message.content.endsWith('\n')
}

function parseJson(text: unknown): { ok: true; value: unknown } | { ok: false } {
  if (typeof text !== 'string') return { ok: false }
  try {
    return { ok: true, value: JSON.parse(text) }
  } catch {
    return { ok: false }
  }
}

/** Structural JSON equality, key order ignored. */
export function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false
  if (Array.isArray(a) !== Array.isArray(b)) return false
  if (Array.isArray(a)) {
    const other = b as unknown[]
    return a.length === other.length && a.every((item, i) => jsonEqual(item, other[i]))
  }
  const left = a as Record<string, unknown>
  const right = b as Record<string, unknown>
  const keys = Object.keys(left)
  if (keys.length !== Object.keys(right).length) return false
  return keys.every((key) => Object.hasOwn(right, key) && jsonEqual(left[key], right[key]))
}

const stripLeadingNewlines = (text: string) => text.replace(/^\n+/, '')

/**
 * The restored message when `message` is the sampled turn `sampled`, else null. Pure.
 */
export function restoreTurn(message: ChatMessage, sampled: ResponseMessage): { message: ChatMessage; restored: string[] } | null {
  const calls = replayedCalls(message)
  const sampledCalls = sampled.tool_calls ?? []
  if (calls === null || calls.length !== sampledCalls.length) return null
  if (typeof message.content !== 'string' || typeof sampled.content !== 'string') return null
  if (stripLeadingNewlines(message.content) !== stripLeadingNewlines(sampled.content)) return null
  const restored: string[] = []
  const arguments_: string[] = []
  for (let i = 0; i < calls.length; i++) {
    const call = calls[i]!
    const sample = sampledCalls[i]!
    if (call.function?.name !== sample.function.name) return null
    const replayedArgs = parseJson(call.function.arguments)
    const sampledArgs = parseJson(sample.function.arguments)
    if (!replayedArgs.ok || !sampledArgs.ok || !jsonEqual(replayedArgs.value, sampledArgs.value)) return null
    arguments_.push(sample.function.arguments)
    if (call.function.arguments !== sample.function.arguments && !restored.includes('arguments')) restored.push('arguments')
  }
  let content = message.content
  // The template writes `content + "\n" + "<tool_call>"`: the sampled separator goes, the template adds it back.
  if (sampled.content.endsWith('\n') && content.endsWith('\n')) {
    content = content.slice(0, -1)
    restored.push('content_separator')
  }
  if (restored.length === 0) return null
  const toolCalls = (message.tool_calls as ReplayedCall[]).map((call, i) => ({
    ...call,
    function: { ...call.function, arguments: arguments_[i] },
  }))
  return { message: { ...message, content, tool_calls: toolCalls }, restored }
}

/**
 * Restore every replayed turn of `messages` that came from a gateway completion and would not re-render to
 * its sample. One batched lookup of the candidate turns; a no-op (same array, no lookup) when no turn is a
 * candidate.
 */
export async function restoreReplayedTurns(messages: ChatMessage[], lookup: SampledTurnLookup): Promise<ReplayRestore> {
  const candidates: { index: number; completionId: string }[] = []
  messages.forEach((message, index) => {
    if (!needsRestore(message)) return
    const calls = replayedCalls(message)
    const completionId = calls === null ? null : sourceCompletion(calls)
    if (completionId !== null) candidates.push({ index, completionId })
  })
  if (candidates.length === 0) return { messages, turns: [] }
  const sampled = await lookup([...new Set(candidates.map((candidate) => candidate.completionId))])
  let out = messages
  const turns: RestoredTurn[] = []
  candidates.forEach((candidate) => {
    const sample = Object.hasOwn(sampled, candidate.completionId) ? sampled[candidate.completionId] : undefined
    if (!sample) return
    const result = restoreTurn(messages[candidate.index]!, sample)
    if (result === null) return
    if (out === messages) out = [...messages]
    out[candidate.index] = result.message
    turns.push({ messageIndex: candidate.index, completionId: candidate.completionId, restored: result.restored })
  })
  return { messages: out, turns }
}

/** The `replay_restored` warning for a request whose replayed turns were restored; null when none was. */
export function replayRestoredWarning(turns: readonly RestoredTurn[]): { code: 'replay_restored'; message: string } | null {
  if (turns.length === 0) return null
  const parts = turns.map((turn) => `message ${turn.messageIndex} (${turn.completionId}): ${turn.restored.join(', ')}`)
  return {
    code: 'replay_restored',
    message: `restored ${turns.length} replayed assistant turn(s) to their sampled form: ${parts.join('; ')}`,
  }
}
