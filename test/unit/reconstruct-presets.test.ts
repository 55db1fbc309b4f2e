/**
 * Merge presets and the per-trace drift counts: `exact` (the default) never trains a token under a
 * context that differs from its prompt; `tolerant` does within its bound and says how much; `strict`
 * (Polar) does whenever the template re-renders an earlier turn, and the counts show it.
 */
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import type { Trajectory } from '../../src/contract/trajectory.ts'
import { reconstructTrajectory } from '../../src/reconstruct/index.ts'
import { type SimOptions, simulateSession, TOKENS } from './reconstruct-support/simulate-tokens.ts'

const THINK = { think_token_ids: [TOKENS.thinkOpen, TOKENS.thinkClose] as [number, number] }

const sim = (overrides: Partial<SimOptions>): SimOptions => ({
  seed: 11,
  mainTurns: 6,
  thinking: 'off',
  retokenizeRate: 0,
  nonce: false,
  subAgents: 0,
  labelSubAgents: false,
  sideCalls: 0,
  retryRate: 0,
  abandonRate: 0,
  truncateRate: 0,
  compactAt: null,
  noLogprobRate: 0,
  deltaMode: 'true',
  ...overrides,
})

interface Turn {
  context_drift_tokens: number
  response_length: number
}
const turns = (trajectory: Trajectory) => trajectory.traces.flatMap((trace) => trace.metadata.turns as Turn[])
const underDrift = (trajectory: Trajectory) => trajectory.traces.map((trace) => trace.metadata.trained_tokens_under_drift as number)
const stats = (trajectory: Trajectory) =>
  (trajectory.metadata.reconstruction_stats as { drift: { trained_tokens_total: number; trained_tokens_under_drift: number } }).drift

describe('merge presets', () => {
  it('default is exact: Qwen3 thinking-off scaffold drift splits turns, nothing trained under drift', () => {
    const { records } = simulateSession(sim({ thinking: 'off' }))
    const byDefault = reconstructTrajectory(records, { builder: 'prefix_merging', config: THINK })
    const exact = reconstructTrajectory(records, { builder: 'prefix_merging', config: { ...THINK, preset: 'exact' } })
    expect(byDefault.traces).toEqual(exact.traces)
    expect(byDefault.metadata.reconstruction).toMatchObject({ max_context_drift_tokens: 0 })
    expect(byDefault.traces).toHaveLength(records.length)
    expect(underDrift(byDefault).every((n) => n === 0)).toBe(true)

    const tolerant = reconstructTrajectory(records, { builder: 'prefix_merging', config: { ...THINK, preset: 'tolerant' } })
    expect(tolerant.traces).toHaveLength(1)
    const continued = turns(tolerant).slice(1)
    expect(continued.every((turn) => turn.context_drift_tokens > 0)).toBe(true)
    const expected = continued.reduce((sum, turn) => sum + turn.response_length, 0)
    expect(underDrift(tolerant)).toEqual([expected])
    expect(stats(tolerant)).toMatchObject({ trained_tokens_under_drift: expected })
    expect(stats(tolerant).trained_tokens_total).toBe(stats(byDefault).trained_tokens_total)
  })

  it('strict reproduces Polar and counts the tokens Polar trains under a re-rendered context', () => {
    // Reasoning sampled but not replayed: Polar's prefix guard passes and it merges; the context differs.
    const { records } = simulateSession(sim({ thinking: 'on-strip' }))
    const strict = reconstructTrajectory(records, { builder: 'prefix_merging', config: { preset: 'strict' } })
    expect(strict.metadata.reconstruction).toMatchObject({ mode: 'strict' })
    expect(strict.traces).toEqual(reconstructTrajectory(records, { builder: 'prefix_merging', config: { strict: true } }).traces)
    expect(strict.traces).toHaveLength(1)
    const continued = (strict.traces[0]!.metadata.turns as Turn[]).slice(1)
    expect(continued.every((turn) => turn.context_drift_tokens > 0)).toBe(true)
    expect(underDrift(strict)[0]).toBe(continued.reduce((sum, turn) => sum + turn.response_length, 0))
    // Thinking replayed exactly: Polar merges with no drift.
    const replayed = simulateSession(sim({ thinking: 'on-replay' })).records
    expect(underDrift(reconstructTrajectory(replayed, { builder: 'prefix_merging', config: { preset: 'strict' } }))).toEqual([0])
  })

  it('explicit keys override the preset; an unknown preset is a config error', () => {
    const { records } = simulateSession(sim({ thinking: 'off' }))
    const trajectory = reconstructTrajectory(records, {
      builder: 'prefix_merging',
      config: { preset: 'exact', max_context_drift_tokens: 8 },
    })
    expect(trajectory.metadata.reconstruction).toMatchObject({ preset: 'exact', max_context_drift_tokens: 8 })
    expect(() => reconstructTrajectory(records, { builder: 'prefix_merging', config: { preset: 'loose' } })).toThrow(/config\.preset/)
  })

  it('exact: on random sessions every merged turn has an identical context; counts add up', () => {
    fc.assert(
      fc.property(
        fc.record({
          seed: fc.integer({ min: 1, max: 2 ** 31 - 1 }),
          thinking: fc.constantFrom('off', 'on-replay', 'on-strip'),
          retokenizeRate: fc.constantFrom(0, 0.3),
          nonce: fc.boolean(),
          subAgents: fc.integer({ min: 0, max: 2 }),
          retryRate: fc.constantFrom(0, 0.2),
          compactAt: fc.option(fc.integer({ min: 1, max: 5 }), { nil: null }),
        }),
        (options) => {
          const { records } = simulateSession(sim(options))
          for (const preset of ['exact', 'tolerant'] as const) {
            const trajectory = reconstructTrajectory(records, { builder: 'prefix_merging', config: { ...THINK, preset } })
            const all = turns(trajectory)
            if (preset === 'exact') expect(all.every((turn) => turn.context_drift_tokens === 0)).toBe(true)
            const sum = underDrift(trajectory).reduce((a, b) => a + b, 0)
            expect(stats(trajectory).trained_tokens_under_drift).toBe(sum)
            expect(sum).toBe(all.filter((turn) => turn.context_drift_tokens > 0).reduce((a, turn) => a + turn.response_length, 0))
          }
        },
      ),
      { numRuns: 100 },
    )
  })
})
