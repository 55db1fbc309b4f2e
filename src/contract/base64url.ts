/**
 * @module
 * base64url (RFC 4648 §5, unpadded) for bytes and UTF-8 text: the self-describing ids and signatures
 * adapters issue, and session tokens (`session-token.ts`).
 */

export function bytesToBase64Url(bytes: Uint8Array): string {
  let binary = ''
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000))
  return btoa(binary).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '')
}

/**
 * Strict: null unless the input is canonical unpadded base64url — the one encoding `bytesToBase64Url`
 * gives. Non-zero unused bits in the last character (`…IN`, `…IO`, `…IP` for `…IM`) are refused, so one
 * byte string has exactly one accepted text (tokens, signatures).
 */
export function base64UrlToBytes(encoded: string): Uint8Array<ArrayBuffer> | null {
  if (!/^[A-Za-z0-9_-]*$/.test(encoded) || encoded.length % 4 === 1) return null
  let binary: string
  try {
    binary = atob(encoded.replace(/-/g, '+').replace(/_/g, '/'))
  } catch {
    return null
  }
  const bytes = new Uint8Array(binary.length)
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i)
  return bytesToBase64Url(bytes) === encoded ? bytes : null
}

export function base64UrlEncode(text: string): string {
  return bytesToBase64Url(new TextEncoder().encode(text))
}

/** Strict: null unless the input is valid base64url of valid UTF-8. */
export function base64UrlDecode(encoded: string): string | null {
  const bytes = base64UrlToBytes(encoded)
  if (!bytes) return null
  try {
    return new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes)
  } catch {
    return null
  }
}
