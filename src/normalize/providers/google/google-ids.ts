/**
 * @module
 * Deterministic Gemini identifiers and the self-describing `thoughtSignature`.
 *
 * Gemini's `thoughtSignature` is bytes (base64 in JSON), so ours is standard base64 of
 * `rggs1\n<completionId>\n<reasoning>` (UTF-8): valid for any client that treats it as bytes, and the
 * reasoning comes back byte for byte when Gemini CLI replays it on the `functionCall` part. Gemini
 * CLI's placeholder `skip_thought_signature_validator` and real Google signatures decode to null.
 */

const MAGIC = 'rggs1\n'

/** `call_<completionId>_<index>`: distinct for parallel calls to the same function. */
export function googleFunctionCallId(completionId: string, index: number): string {
  return `call_${completionId}_${index}`
}

export function encodeThoughtSignature(completionId: string, reasoning: string): string {
  const bytes = new TextEncoder().encode(`${MAGIC}${completionId}\n${reasoning}`)
  let binary = ''
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000))
  return btoa(binary)
}

export function decodeThoughtSignature(signature: string): { completionId: string; reasoning: string } | null {
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(signature) || signature.length < 8) return null
  let text: string
  try {
    const binary = atob(signature)
    if (!binary.startsWith(MAGIC)) return null
    const bytes = new Uint8Array(binary.length)
    for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i)
    text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes)
  } catch {
    return null
  }
  const body = text.slice(MAGIC.length)
  const newline = body.indexOf('\n')
  if (newline < 0) return null
  return { completionId: body.slice(0, newline), reasoning: body.slice(newline + 1) }
}
