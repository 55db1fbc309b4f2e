/**
 * @module
 * Per-session bearer tokens: `rg_<session id b64url>.<HMAC-SHA256(key, session id) b64url>`. The Worker
 * verifies a token without a lookup; it is unguessable without the signing key, and names its session.
 */

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

function base64url(bytes: Uint8Array): string {
  let binary = ''
  for (const byte of bytes) binary += String.fromCharCode(byte)
  return btoa(binary).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '')
}

function fromBase64url(text: string): Uint8Array | null {
  if (!/^[A-Za-z0-9_-]*$/.test(text)) return null
  try {
    const binary = atob(text.replace(/-/g, '+').replace(/_/g, '/') + '='.repeat((4 - (text.length % 4)) % 4))
    const out = new Uint8Array(binary.length)
    for (let i = 0; i < binary.length; i++) out[i] = binary.charCodeAt(i)
    return out
  } catch {
    return null
  }
}

export async function createSessionToken(sessionId: string, secret: string): Promise<string> {
  const signature = await crypto.subtle.sign('HMAC', await hmacKey(secret), encoder.encode(sessionId))
  return `${TOKEN_PREFIX}${base64url(encoder.encode(sessionId))}.${base64url(new Uint8Array(signature))}`
}

/** The session id a token names, or null when it is malformed or its signature does not verify. */
export async function verifySessionToken(token: string, secret: string): Promise<string | null> {
  if (!token.startsWith(TOKEN_PREFIX)) return null
  const [idPart, signaturePart, extra] = token.slice(TOKEN_PREFIX.length).split('.')
  if (!idPart || !signaturePart || extra !== undefined) return null
  const idBytes = fromBase64url(idPart)
  const signature = fromBase64url(signaturePart)
  if (!idBytes || !signature || signature.length !== 32) return null
  const valid = await crypto.subtle.verify('HMAC', await hmacKey(secret), signature, idBytes)
  return valid ? new TextDecoder().decode(idBytes) : null
}
