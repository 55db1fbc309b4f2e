/**
 * A runner's malformed `tunnel.head` (security issue, item 7): a head no HTTP response can have (status
 * 204 with a body, 101, an invalid header name) answers the harness call at once with a provider-shaped
 * 502, instead of leaving it hanging until the upstream timeout; the runner is told to stop.
 */
import { env, SELF } from 'cloudflare:test'
import { describe, expect, it } from 'vitest'
import type { SessionRolloutRpc } from '../../src/durable/session/session-rollout.ts'
import { cancelTask, EDGE, eventually, submit, TestRunner, taskBody } from './rollout-support.ts'

function rolloutSession(sessionId: string): SessionRolloutRpc {
  return env.SESSIONS.get(env.SESSIONS.idFromName(sessionId)) as unknown as SessionRolloutRpc
}

const HEADS: { name: string; status: number; headers: Record<string, string>; body: string }[] = [
  { name: '204 with a body', status: 204, headers: {}, body: '{"x":1}' },
  { name: '101', status: 101, headers: {}, body: '' },
  { name: 'an invalid header name', status: 200, headers: { 'bad header': 'x' }, body: '{}' },
]

describe('malformed tunnel.head', () => {
  it('answers the call at once with a provider-shaped 502 and cancels the runner side', async () => {
    const runner = await TestRunner.start('bad-head-r')
    runner.serveTunnel(() => null)
    expect((await submit(taskBody('bad-head-1'))).status).toBe(200)
    const session = await runner.takeAssignment('bad-head-1')
    await eventually(async () => expect((await rolloutSession(session.session_id).lifecycle())?.status).toBe('RUNNING'))
    for (const head of HEADS) {
      const before = runner.received.filter((message) => message.type === 'tunnel.request').length
      const answer = SELF.fetch(`${EDGE}/v1/messages`, {
        method: 'POST',
        headers: { 'x-api-key': session.token, 'anthropic-version': '2023-06-01', 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'm', max_tokens: 8, messages: [{ role: 'user', content: head.name }] }),
      })
      const request = await eventually(async () => {
        const requests = runner.received.filter((message) => message.type === 'tunnel.request')
        expect(requests.length).toBe(before + 1)
        return requests[before] as { request_id: string }
      })
      runner.send({ type: 'tunnel.head', request_id: request.request_id, status: head.status, headers: head.headers, body: head.body })
      const res = await answer
      expect(res.status).toBe(502)
      const body = (await res.json()) as { type: string; error: { type: string; message: string } }
      expect(body).toMatchObject({ type: 'error', error: { type: 'api_error' } })
      expect(body.error.message).toContain('invalid response head')
      // The tunnel's named error reaches the caller in its own (Anthropic) shape.
      expect(body.error.message).toContain('runner_invalid_head: ')
      const cancel = await runner.next('tunnel.cancel', (message) => message.request_id === request.request_id)
      expect(cancel.reason).toContain('invalid tunnel.head')
    }
    await cancelTask('bad-head-1')
    runner.close()
  })
})
