/**
 * Where a harness's API key is read from (each SDK's own place) and how the admin and runner tokens are compared.
 */
import { describe, expect, it } from 'vitest'
import { presentedCredential, timingSafeEqual } from '../../../src/worker/auth/credentials.ts'

function presented(headers: Record<string, string>, query = '', pathToken?: string): string | null {
  const url = new URL(`https://edge.test/v1/chat/completions${query}`)
  return presentedCredential(new Request(url, { headers }), url, pathToken)
}

describe('presentedCredential', () => {
  it("reads each SDK's place", () => {
    expect(presented({ authorization: 'Bearer tok-a' })).toBe('tok-a')
    expect(presented({ authorization: 'bearer   tok-b' })).toBe('tok-b')
    expect(presented({ 'x-api-key': 'tok-c' })).toBe('tok-c')
    expect(presented({ 'x-goog-api-key': 'tok-d' })).toBe('tok-d')
    expect(presented({}, '?key=tok-e')).toBe('tok-e')
    expect(presented({}, '', 'tok-f')).toBe('tok-f')
    expect(presented({})).toBeNull()
  })

  it('prefers the path token, then a Bearer authorization, then x-api-key, x-goog-api-key and ?key=', () => {
    const all = { authorization: 'Bearer from-bearer', 'x-api-key': 'from-x-api-key', 'x-goog-api-key': 'from-goog' }
    expect(presented(all, '?key=from-query', 'from-path')).toBe('from-path')
    expect(presented(all, '?key=from-query')).toBe('from-bearer')
    expect(presented({ 'x-api-key': 'from-x-api-key', 'x-goog-api-key': 'from-goog' }, '?key=from-query')).toBe('from-x-api-key')
    expect(presented({ 'x-goog-api-key': 'from-goog' }, '?key=from-query')).toBe('from-goog')
  })

  it('an authorization that is not a Bearer credential is not the key (the other places still are)', () => {
    expect(presented({ authorization: 'Basic dXNlcjpwYXNz', 'x-api-key': 'tok-g' })).toBe('tok-g')
    expect(presented({ authorization: 'Token Bearer tok-h' })).toBeNull()
    expect(presented({ authorization: 'Bearer' })).toBeNull()
    expect(presented({ authorization: 'Bearertok-i' })).toBeNull()
  })
})

describe('timingSafeEqual', () => {
  it('is equal only for the same content and length', () => {
    expect(timingSafeEqual('admin-token', 'admin-token')).toBe(true)
    expect(timingSafeEqual('', '')).toBe(true)
    expect(timingSafeEqual('admin-token', 'admin-tokeN')).toBe(false)
    expect(timingSafeEqual('Admin-token', 'admin-token')).toBe(false)
    expect(timingSafeEqual('admin-token', 'admin-token2')).toBe(false)
    expect(timingSafeEqual('admin-token', 'admin-toke')).toBe(false)
    expect(timingSafeEqual('a', '')).toBe(false)
    // Same length, same XOR of lengths, different content at every position.
    expect(timingSafeEqual('ab', 'ba')).toBe(false)
  })
})
