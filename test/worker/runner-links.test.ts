/**
 * One object per runner on the inference path (issue #10, item 3): with 8 runners connected, every
 * tunnelled model call is carried by its own runner's `RunnerLink` and no object carries calls of two
 * runners; the hub carries none (it has no tunnel route at all).
 */
import { env, SELF } from 'cloudflare:test'
import { describe, expect, it } from 'vitest'
import type { SessionRolloutRpc } from '../../src/durable/session/session-rollout.ts'
import { hubStub, linkStub } from '../../src/worker/pipeline/rollout-stubs.ts'
import { cancelTask, EDGE, engineAnswer, eventually, submit, TestRunner, taskBody } from './rollout-support.ts'

const RUNNERS = 8

function rolloutSession(sessionId: string): SessionRolloutRpc {
  return env.SESSIONS.get(env.SESSIONS.idFromName(sessionId)) as unknown as SessionRolloutRpc
}

describe('runner links', () => {
  it('with 8 runners, no object on the inference path serves more than one runner', async () => {
    const capacity = { max_init_workers: 1, max_run_workers: 1, max_postrun_workers: 1 }
    const runners = await Promise.all(Array.from({ length: RUNNERS }, (_, i) => TestRunner.start(`link-r${i}`, { capacity })))
    for (const runner of runners) {
      runner.serveTunnel(() => ({ status: 200, body: engineAnswer([1, 2, 3], [11, 151645], `from ${runner.runnerId}`), chunkChars: 200 }))
    }
    expect((await submit(taskBody('links-8', { num_samples: RUNNERS }))).status).toBe(200)
    const sessions = await Promise.all(runners.map((runner) => runner.takeAssignment('links-8')))
    for (const session of sessions) {
      await eventually(async () => expect((await rolloutSession(session.session_id).lifecycle())?.status).toBe('RUNNING'))
    }
    const calls = sessions.flatMap((session, i) =>
      [0, 1].map(async (turn) => {
        const res = await SELF.fetch(`${EDGE}/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${session.token}`, 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: `turn ${turn}` }] }),
        })
        expect(res.status).toBe(200)
        const body = (await res.json()) as { choices: { message: { content: string } }[] }
        // Each session's calls reach the runner it was assigned to.
        expect(body.choices[0]?.message.content).toBe(`from ${runners[i]?.runnerId}`)
      }),
    )
    await Promise.all(calls)

    const stats = await Promise.all(runners.map((runner) => linkStub(env, runner.runnerId).stats()))
    for (const [i, served] of stats.entries()) expect(served.tunnelled).toEqual({ [runners[i]?.runnerId as string]: 2 })
    expect(new Set(stats.map((served) => served.object_id)).size).toBe(RUNNERS)
    // The hub is off the inference path: it has no tunnel to serve.
    const viaHub = await hubStub(env).fetch(
      new Request(`https://runner-hub/tunnel/link-r0/v1/chat/completions`, { method: 'POST', body: '{}' }),
    )
    expect(viaHub.status).toBe(404)

    await cancelTask('links-8')
    for (const runner of runners) runner.close()
  }, 20_000) // eight runners' setup and sixteen calls: more work than the 5 s default, not a race
})
