import { describe, expect, it } from 'vitest'
import { base64UrlToBytes, bytesToBase64Url } from '../../../src/contract/base64url.ts'
import { checkSessionToken, createSessionToken, redactSessionTokens, verifySessionToken } from '../../../src/contract/session-token.ts'

const KEY = 'unit-signing-key'
const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'

describe('session tokens', () => {
  it('carry the session id and expiry in the signed claims', async () => {
    const token = await createSessionToken('ses_a', KEY, { expiresAt: Date.UTC(2030, 0, 1) })
    expect(token).toMatch(/^rg_[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{43}$/)
    expect(await checkSessionToken(token, KEY, Date.UTC(2029, 0, 1))).toEqual({
      ok: true,
      claims: { sid: 'ses_a', exp: Date.UTC(2030, 0, 1) / 1000 },
    })
    expect(await checkSessionToken(token, KEY, Date.UTC(2030, 0, 1))).toEqual({ ok: false, reason: 'expired' })
    expect(await verifySessionToken(token, 'other-key', Date.UTC(2029, 0, 1))).toBeNull()
  })

  it('cannot have its expiry stretched: the claims are what is signed', async () => {
    const token = await createSessionToken('ses_b', KEY, { expiresAt: Date.UTC(2030, 0, 1) })
    const [claims, signature] = token.slice(3).split('.') as [string, string]
    const stretched = bytesToBase64Url(new TextEncoder().encode(JSON.stringify({ sid: 'ses_b', exp: Date.UTC(2040, 0, 1) / 1000 })))
    expect(claims).not.toBe(stretched)
    expect(await verifySessionToken(`rg_${stretched}.${signature}`, KEY, Date.UTC(2029, 0, 1))).toBeNull()
  })

  it('accepts exactly one string per token: non-canonical base64url tails are refused', async () => {
    const token = await createSessionToken('ses_c', KEY, { expiresAt: Date.UTC(2030, 0, 1) })
    const now = Date.UTC(2029, 0, 1)
    expect(await verifySessionToken(token, KEY, now)).toBe('ses_c')
    // The 43-character signature leaves 2 unused bits in its last character: 3 other spellings decode alike.
    const last = token.at(-1) as string
    const index = ALPHABET.indexOf(last)
    const variants = [1, 2, 3].map((bits) => ALPHABET[(index & ~3) | ((index + bits) & 3)] as string)
    for (const variant of variants) {
      expect(variant).not.toBe(last)
      expect(await verifySessionToken(`${token.slice(0, -1)}${variant}`, KEY, now)).toBeNull()
    }
  })

  it('base64url decoding is canonical', () => {
    expect(base64UrlToBytes('AQ')).toEqual(new Uint8Array([1]))
    expect(base64UrlToBytes('AR')).toBeNull()
    expect(base64UrlToBytes('A')).toBeNull()
    expect(base64UrlToBytes('AQ==')).toBeNull()
  })

  it('are redacted from log text', async () => {
    const token = await createSessionToken('ses_d', KEY)
    const line = `POST /s/${token}/v1/chat/completions and /v1beta/models/m:generateContent?key=${token}`
    expect(redactSessionTokens(line)).toBe('POST /s/rg_…/v1/chat/completions and /v1beta/models/m:generateContent?key=rg_…')
  })
})
