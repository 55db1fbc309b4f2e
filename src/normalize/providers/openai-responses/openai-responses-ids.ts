/**
 * @module
 * Deterministic Responses identifiers, all derived from the recorded completion's id so a replayed item
 * or call id maps back to the sampled completion, and the opaque reasoning token.
 *
 * `encrypted_content` is self-describing (Polar's `polar:` + base64url idea with our own prefix):
 * `rgrs1.<base64url(completionId)>.<base64url(reasoning)>`. The reasoning text is recovered byte for
 * byte when Codex / opencode replay the item with `store:false`. Polar's `polar:` tokens are read too.
 */
import { base64UrlDecode, base64UrlEncode } from '../../../contract/base64url.ts'

const ENCRYPTED_PREFIX = 'rgrs1.'
const POLAR_PREFIX = 'polar:'

export const responseId = (completionId: string) => `resp_${completionId}`
export const reasoningItemId = (completionId: string) => `rs_${completionId}`
export const messageItemId = (completionId: string) => `msg_${completionId}`
export const functionCallItemId = (completionId: string, index: number) => `fc_${completionId}_${index}`
export const customToolCallItemId = (completionId: string, index: number) => `ctc_${completionId}_${index}`
export const toolCallId = (completionId: string, index: number) => `call_${completionId}_${index}`

/** The completion a gateway-issued response id names (`resp_<completionId>`); null otherwise. */
export function completionIdFromResponseId(id: string): string | null {
  return id.startsWith('resp_') && id.length > 5 ? id.slice(5) : null
}

export function encodeReasoningContent(completionId: string, reasoning: string): string {
  return `${ENCRYPTED_PREFIX}${base64UrlEncode(completionId)}.${base64UrlEncode(reasoning)}`
}

/** Reasoning text from a gateway-issued (or Polar) `encrypted_content`; null for foreign tokens. */
export function decodeReasoningContent(token: string): { completionId: string | null; reasoning: string } | null {
  if (token.startsWith(POLAR_PREFIX)) {
    const reasoning = base64UrlDecode(token.slice(POLAR_PREFIX.length).replace(/=+$/, ''))
    return reasoning === null ? null : { completionId: null, reasoning }
  }
  if (!token.startsWith(ENCRYPTED_PREFIX)) return null
  const [id, text, ...rest] = token.slice(ENCRYPTED_PREFIX.length).split('.')
  if (id === undefined || text === undefined || rest.length > 0) return null
  const completionId = base64UrlDecode(id)
  const reasoning = base64UrlDecode(text)
  return completionId === null || reasoning === null ? null : { completionId, reasoning }
}

export { base64UrlDecode, base64UrlEncode }
