/**
 * @module
 * Per-session bearer tokens: `rg_<claims b64url>.<HMAC-SHA256(key, claims) b64url>`, where the claims
 * are the JSON `{"sid": <session id>, "exp": <epoch seconds>}`. The Worker verifies a token without a
 * lookup: it is unguessable without the signing key, names its session, and stops working at `exp`
 * (the expiry is in the signed part, so it cannot be stretched). Both parts must be canonical
 * base64url, so one session and expiry have exactly one valid token string.
 */

import { base64UrlToBytes, bytesToBase64Url } from './base64url.ts'

const TOKEN_PREFIX = 'rg_'
/** Default lifetime of a session token (`ROLLGATE_SESSION_TOKEN_TTL_SECONDS` overrides it at the edge). */
export const DEFAULT_SESSION_TOKEN_TTL_SECONDS = 24 * 60 * 60
const encoder = new TextEncoder()
const keys = new Map<string, Promise<CryptoKey>>()

// Stryker disable all: the key cache and the key's extractability change speed, never a token or a verdict
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
// Stryker restore all

export interface SessionTokenClaims {
  /** The session id. */
  sid: string
  /** Expiry, epoch seconds. */
  exp: number
}

/** Mint a token for `sessionId`, valid until `expiresAt` (epoch ms; default: now + 24 h). */
export async function createSessionToken(sessionId: string, secret: string, options: { expiresAt?: number } = {}): Promise<string> {
  const exp = Math.floor((options.expiresAt ?? Date.now() + DEFAULT_SESSION_TOKEN_TTL_SECONDS * 1000) / 1000)
  const claims = encoder.encode(JSON.stringify({ sid: sessionId, exp } satisfies SessionTokenClaims))
  const signature = await crypto.subtle.sign('HMAC', await hmacKey(secret), claims)
  return `${TOKEN_PREFIX}${bytesToBase64Url(claims)}.${bytesToBase64Url(new Uint8Array(signature))}`
}

export type SessionTokenCheck = { ok: true; claims: SessionTokenClaims } | { ok: false; reason: 'invalid' | 'expired' }

/** Verify a token's signature and expiry (`now`: epoch ms). */
export async function checkSessionToken(token: string, secret: string, now = Date.now()): Promise<SessionTokenCheck> {
  const invalid = { ok: false, reason: 'invalid' } as const
  if (!token.startsWith(TOKEN_PREFIX)) return invalid
  const [claimsPart, signaturePart, extra] = token.slice(TOKEN_PREFIX.length).split('.')
  if (!claimsPart || !signaturePart || extra !== undefined) return invalid
  const claimBytes = base64UrlToBytes(claimsPart)
  const signature = base64UrlToBytes(signaturePart)
  // Stryker disable next-line ConditionalExpression: an HMAC-SHA256 of another length never verifies either; the check only skips the work
  if (!claimBytes || !signature || signature.length !== 32) return invalid
  if (!(await crypto.subtle.verify('HMAC', await hmacKey(secret), signature, claimBytes))) return invalid
  let claims: unknown
  try {
    claims = JSON.parse(new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(claimBytes))
  } catch {
    return invalid
  }
  const { sid, exp } = (claims ?? {}) as Partial<SessionTokenClaims>
  if (typeof sid !== 'string' || !sid || typeof exp !== 'number' || !Number.isInteger(exp)) return invalid
  if (now >= exp * 1000) return { ok: false, reason: 'expired' }
  return { ok: true, claims: { sid, exp } }
}

/** The session id a token names, or null when it is malformed, forged or expired. */
export async function verifySessionToken(token: string, secret: string, now = Date.now()): Promise<string | null> {
  const check = await checkSessionToken(token, secret, now)
  return check.ok ? check.claims.sid : null
}

/** Session tokens in `text` (URLs, messages) replaced by `rg_…` (for logs). */
export function redactSessionTokens(text: string): string {
  return text.replace(/rg_[A-Za-z0-9_-]{8,}(?:\.[A-Za-z0-9_-]+)?/g, 'rg_…')
}
