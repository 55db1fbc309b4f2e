/** `npm run dev` hands every ROLLGATE_* variable of its environment to the edge, over the local defaults. */
import { describe, expect, it } from 'vitest'
import { DEV_DEFAULTS, edgeVarsFromEnv } from '../../../scripts/dev.ts'

describe('npm run dev variables', () => {
  it('passes every ROLLGATE_* variable (runner token, heartbeat, anything new) and nothing else', () => {
    const vars = edgeVarsFromEnv({
      ROLLGATE_RUNNER_TOKEN: 'from-env',
      ROLLGATE_RUNNER_HEARTBEAT_MS: '500',
      ROLLGATE_SOMETHING_NEW: 'x',
      HOME: '/root',
      PATH: '/bin',
    })
    expect(vars).toEqual({
      ...DEV_DEFAULTS,
      ROLLGATE_RUNNER_TOKEN: 'from-env',
      ROLLGATE_RUNNER_HEARTBEAT_MS: '500',
      ROLLGATE_SOMETHING_NEW: 'x',
    })
  })

  it('has a runner token by default so a local runner can connect', () => {
    expect(edgeVarsFromEnv({}).ROLLGATE_RUNNER_TOKEN).toBe('dev-runner-token')
  })
})
