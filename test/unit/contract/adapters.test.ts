/**
 * @module
 * Runs the shared adapter contract against every adapter in the registry.
 */
import { describe, expect, it } from 'vitest'
import { adapters } from '../../../src/normalize/registry.ts'
import { loadRequestFixtures, runAdapterContract } from './adapter.case.ts'
import { CODECS } from './codecs.ts'

describe('registry', () => {
  it('has a client codec for every adapter', () => {
    for (const adapter of adapters) expect(CODECS[adapter.id], adapter.id).toBeDefined()
  })
})

for (const adapter of adapters) {
  const codec = CODECS[adapter.id]
  if (codec) runAdapterContract(adapter, { requests: loadRequestFixtures(adapter.id), codec })
}
