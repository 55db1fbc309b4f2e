/**
 * Error answers never repeat a credential: a path that carries a token as a base-URL prefix (`/s/<token>/`,
 * `/t/<token>/`) or a session token anywhere is echoed with the credential replaced by `…`.
 */
import { SELF } from 'cloudflare:test'
import { describe, expect, it } from 'vitest'
import { createSessionToken } from '../../src/contract/session-token.ts'

const EDGE = 'https://edge.test'

describe('error answers repeat no credential', () => {
  it('404 and 405 for token-prefixed paths name the route without the token', async () => {
    const token = await createSessionToken('ses_echo', 'test-signing-key')
    for (const path of [
      `/s/test-admin-token/rollout/status`,
      `/s/${token}/rollout/status`,
      `/t/test-runner-token/nope`,
      `/v1/x/${token}`,
    ]) {
      const response = await SELF.fetch(`${EDGE}${path}`)
      const text = await response.text()
      expect(response.status, path).toBeGreaterThanOrEqual(400)
      expect(text).not.toContain('test-admin-token')
      expect(text).not.toContain('test-runner-token')
      expect(text).not.toContain(token.split('.').at(-1) as string)
    }
    const wrongMethod = await SELF.fetch(`${EDGE}/s/${token}/v1/chat/completions`, { method: 'PUT' })
    expect(await wrongMethod.text()).not.toContain(token.split('.').at(-1) as string)
  })
})
