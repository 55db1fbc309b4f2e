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

  it('default to a 24 h lifetime', async () => {
    const before = Math.floor(Date.now() / 1000)
    const check = await checkSessionToken(await createSessionToken('ses_e', KEY), KEY)
    expect(check.ok).toBe(true)
    const { exp } = (check as { claims: { exp: number } }).claims
    expect(exp).toBeGreaterThanOrEqual(before + 24 * 3600)
    expect(exp).toBeLessThanOrEqual(Math.floor(Date.now() / 1000) + 24 * 3600)
  })

  it('refuse every malformed shape, even when the signature over the claims is genuine', async () => {
    const now = Date.UTC(2029, 0, 1)
    const exp = Date.UTC(2030, 0, 1) / 1000
    const good = await createSessionToken('ses_f', KEY, { expiresAt: exp * 1000 })
    const [claims, signature] = good.slice(3).split('.') as [string, string]
    expect(await verifySessionToken(`rg_${claims}.${signature}`, KEY, now)).toBe('ses_f')
    for (const token of [
      `xx_${claims}.${signature}`,
      `${claims}.${signature}`,
      `rg_.${signature}`,
      `rg_${claims}.`,
      `rg_${claims}`,
      `rg_${claims}.${signature}.${signature}`,
      `rg_${claims}.${signature}.`,
    ]) {
      expect(await checkSessionToken(token, KEY, now), token).toEqual({ ok: false, reason: 'invalid' })
    }
    const signed = async (bytes: Uint8Array<ArrayBuffer>) => `rg_${bytesToBase64Url(bytes)}.${await sign(bytes)}`
    const json = (value: unknown) => new TextEncoder().encode(JSON.stringify(value))
    const refused: [string, Uint8Array<ArrayBuffer>][] = [
      ['not JSON', new TextEncoder().encode('sid=ses_f')],
      ['JSON null', json(null)],
      ['sid not a string', json({ sid: 5, exp })],
      ['empty sid', json({ sid: '', exp })],
      ['no sid', json({ exp })],
      ['exp not a number', json({ sid: 'ses_f', exp: String(exp) })],
      ['exp not an integer', json({ sid: 'ses_f', exp: exp + 0.5 })],
      ['no exp', json({ sid: 'ses_f' })],
      // Invalid UTF-8 inside the sid (a lenient decoder would read U+FFFD and accept it).
      [
        'invalid UTF-8',
        new Uint8Array([...new TextEncoder().encode('{"sid":"ses_'), 0xff, ...new TextEncoder().encode(`","exp":${exp}}`)]),
      ],
      // A byte-order mark before the JSON (a decoder that strips it would accept it).
      ['BOM', new Uint8Array([0xef, 0xbb, 0xbf, ...json({ sid: 'ses_f', exp })])],
    ]
    for (const [why, bytes] of refused) {
      expect(await checkSessionToken(await signed(bytes), KEY, now), why).toEqual({ ok: false, reason: 'invalid' })
    }
    // The same construction with well-formed claims verifies (the refusals above are about the claims).
    expect(await checkSessionToken(await signed(json({ sid: 'ses_f', exp })), KEY, now)).toEqual({
      ok: true,
      claims: { sid: 'ses_f', exp },
    })
  })

  it('redact a claims-only token fragment too', () => {
    expect(redactSessionTokens('token rg_abcdefgh12 and rg_short')).toBe('token rg_… and rg_short')
  })
})

/** HMAC-SHA256 over `bytes` with the session-token key derivation (`rollgate-session-token:<secret>`). */
async function sign(bytes: Uint8Array<ArrayBuffer>): Promise<string> {
  const key = await crypto.subtle.importKey(
    'raw',
    new TextEncoder().encode(`rollgate-session-token:${KEY}`),
    { name: 'HMAC', hash: 'SHA-256' },
    false,
    ['sign'],
  )
  return bytesToBase64Url(new Uint8Array(await crypto.subtle.sign('HMAC', key, bytes)))
}
