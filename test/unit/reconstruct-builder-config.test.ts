/**
 * @module
 * Builder configs (Polar `StrategySpec.config`): unknown or mistyped keys fail naming the key; Polar keys that
 * do not apply are ignored with a warning recorded in the trajectory; per_request ignores any key, as Polar's does.
 */
import { describe, expect, it } from 'vitest'
import { BuilderConfigError, checkBuilderConfig, reconstructTrajectory } from '../../src/reconstruct/index.ts'
import { makeRecord } from './reconstruct-support/records.ts'

function failure(run: () => unknown): BuilderConfigError {
  try {
    run()
  } catch (error) {
    if (error instanceof BuilderConfigError) return error
    throw error
  }
  throw new Error('expected a BuilderConfigError')
}

describe('checkBuilderConfig', () => {
  it('accepts absent and empty configs', () => {
    for (const builder of ['per_request', 'prefix_merging'] as const) {
      expect(checkBuilderConfig(builder, undefined)).toEqual({ config: {}, warnings: [] })
      expect(checkBuilderConfig(builder, null)).toEqual({ config: {}, warnings: [] })
      expect(checkBuilderConfig(builder, {})).toEqual({ config: {}, warnings: [] })
    }
  })

  it('per_request ignores every key, one warning each', () => {
    expect(checkBuilderConfig('per_request', { bogus: 1, tokenizer_name_or_path: 'x' })).toEqual({
      config: {},
      warnings: [
        { code: 'builder_config_ignored', message: 'per_request ignores config.bogus (it does not apply to Rollgate)' },
        { code: 'builder_config_ignored', message: 'per_request ignores config.tokenizer_name_or_path (it does not apply to Rollgate)' },
      ],
    })
  })

  it('prefix_merging keeps its own keys, drops tokenizer_name_or_path with a warning', () => {
    expect(checkBuilderConfig('prefix_merging', { strict: true, tokenizer_name_or_path: 'Qwen/Qwen3-8B' })).toEqual({
      config: { strict: true },
      warnings: [
        { code: 'builder_config_ignored', message: 'prefix_merging ignores config.tokenizer_name_or_path (it does not apply to Rollgate)' },
      ],
    })
  })

  it('names the unknown or mistyped key', () => {
    const unknown = failure(() => checkBuilderConfig('prefix_merging', { strict: false, bogus: 1 }))
    expect(unknown.key).toBe('bogus')
    expect(unknown.message).toMatch(/^config\.bogus: unknown prefix_merging option \(known: end_of_turn_token_id, strict, /)
    const mistyped = failure(() => checkBuilderConfig('prefix_merging', { max_context_drift_tokens: 'lots' }))
    expect(mistyped.key).toBe('max_context_drift_tokens')
    expect(mistyped.message).toMatch(/^config\.max_context_drift_tokens: .*number/)
    const nested = failure(() => checkBuilderConfig('prefix_merging', { think_token_ids: [1, 'x'] }))
    expect(nested.key).toBe('think_token_ids.1')
    for (const [input, got] of [
      [[1], 'an array'],
      ['x', 'string'],
      [3, 'number'],
    ] as const) {
      const error = failure(() => checkBuilderConfig('per_request', input))
      expect(error.key).toBeNull()
      expect(error.message).toBe(`config must be a JSON object (got ${got})`)
    }
  })

  it('reconstructTrajectory records the ignored keys in metadata.builder_warnings, and none when there are none', () => {
    const input = [0, 1, 2].map((seq) =>
      makeRecord({ seq, prompt: Array.from({ length: 4 + seq * 4 }, (_, i) => i + 1), response: [100 + seq, 151645] }),
    )
    const withPolarKey = reconstructTrajectory(input, { builder: 'prefix_merging', config: { tokenizer_name_or_path: 'x' } })
    expect(withPolarKey.metadata.builder_warnings).toEqual([
      { code: 'builder_config_ignored', message: 'prefix_merging ignores config.tokenizer_name_or_path (it does not apply to Rollgate)' },
    ])
    expect(reconstructTrajectory(input, { builder: 'prefix_merging' }).metadata).not.toHaveProperty('builder_warnings')
    expect(() => reconstructTrajectory(input, { builder: 'prefix_merging', config: { bogus: 1 } })).toThrow(BuilderConfigError)
    expect(() => reconstructTrajectory(input, { builder: 'magic' as 'per_request' })).toThrow('unknown builder: magic')
  })
})
