/**
 * @module
 * Per-session bearer tokens: `rg_<session id b64url>.<HMAC-SHA256(key, session id) b64url>`. The Worker
 * verifies a token without a lookup; it is unguessable without the signing key, and names its session.
 */

import { base64UrlToBytes, bytesToBase64Url } from './base64url.ts'

const TOKEN_PREFIX = 'rg_'
const encoder = new TextEncoder()
const keys = new Map<string, Promise<CryptoKey>>()

function hmacKey(secret: string): Promise<CryptoKey> {
  let key = keys.get(secret)
  if (!key) {
    key = crypto.subtle.importKey('raw', encoder.encode(`rollgate-session-token:${secret}`), { name: 'HMAC', hash: 'SHA-256' }, false, [
      'sign',
      'verify',
    ])
    keys.set(secret, key)
  }
  return key
}

export async function createSessionToken(sessionId: string, secret: string): Promise<string> {
  const signature = await crypto.subtle.sign('HMAC', await hmacKey(secret), encoder.encode(sessionId))
  return `${TOKEN_PREFIX}${bytesToBase64Url(encoder.encode(sessionId))}.${bytesToBase64Url(new Uint8Array(signature))}`
}

/** The session id a token names, or null when it is malformed or its signature does not verify. */
export async function verifySessionToken(token: string, secret: string): Promise<string | null> {
  if (!token.startsWith(TOKEN_PREFIX)) return null
  const [idPart, signaturePart, extra] = token.slice(TOKEN_PREFIX.length).split('.')
  if (!idPart || !signaturePart || extra !== undefined) return null
  const idBytes = base64UrlToBytes(idPart)
  const signature = base64UrlToBytes(signaturePart)
  if (!idBytes || !signature || signature.length !== 32) return null
  const valid = await crypto.subtle.verify('HMAC', await hmacKey(secret), signature, idBytes)
  return valid ? new TextDecoder().decode(idBytes) : null
}
