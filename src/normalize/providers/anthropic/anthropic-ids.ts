/**
 * @module
 * Deterministic, round-trip-safe Anthropic identifiers. Every id the harness sees derives from the
 * recorded completion's id, so a replayed `tool_use` id or thinking signature maps back to the sampled
 * completion (`docs/polar-compat.md` §11).
 *
 * Thinking signatures are self-describing (like Polar's, but carrying the text itself):
 * `rgth1.<base64url(completionId)>.<base64url(reasoning)>`. A replayed thinking block's reasoning is
 * recovered byte for byte from its signature even when the client strips or rewrites the text.
 */
import { base64UrlDecode, base64UrlEncode } from '../../../contract/base64url.ts'

const SIGNATURE_PREFIX = 'rgth1.'

export function anthropicMessageId(completionId: string): string {
  return `msg_${completionId}`
}

/** `toolu_<completionId>_<index>`, restricted to Anthropic's `^[a-zA-Z0-9_-]+$`. */
export function anthropicToolUseId(completionId: string, index: number): string {
  return `toolu_${completionId.replace(/[^A-Za-z0-9_-]/g, '-')}_${index}`
}

/** The completion and call index a gateway-issued `tool_use` id came from; null for foreign ids. */
export function parseAnthropicToolUseId(id: string): { completionId: string; index: number } | null {
  const match = /^toolu_([A-Za-z0-9_-]+)_(\d+)$/.exec(id)
  return match?.[1] && match[2] ? { completionId: match[1], index: Number(match[2]) } : null
}

export function encodeThinkingSignature(completionId: string, reasoning: string): string {
  return `${SIGNATURE_PREFIX}${base64UrlEncode(completionId)}.${base64UrlEncode(reasoning)}`
}

/** The completion and reasoning text a gateway-issued signature carries; null for anything else. */
export function decodeThinkingSignature(signature: string): { completionId: string; reasoning: string } | null {
  if (!signature.startsWith(SIGNATURE_PREFIX)) return null
  const [id, text, ...rest] = signature.slice(SIGNATURE_PREFIX.length).split('.')
  if (id === undefined || text === undefined || rest.length > 0) return null
  const completionId = base64UrlDecode(id)
  const reasoning = base64UrlDecode(text)
  return completionId === null || reasoning === null ? null : { completionId, reasoning }
}

export { base64UrlDecode, base64UrlEncode }
