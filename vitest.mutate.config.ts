import { defineConfig } from 'vitest/config'

/**
 * The unit tests that guard the promises `npm run mutate` mutates (auth, proxy pipeline, completion log,
 * stream encoders, builders and advantages, hub and gate), in Node. Stryker drives this config; the
 * workers pool (workerd) cannot be driven by Stryker, so the logic under it is tested on its plain classes here.
 * `ROLLGATE_MUTATE_TESTS` (comma-separated globs, so no `{a,b}` braces) narrows the tests for a run scoped to one module.
 */
const DEFAULT_TESTS = [
  'test/unit/edge/{proxy-promises,session-access,query,event-bus,runner-warnings,zod-issues,call-upstream,completion-log,completion-log-reads,completion-log-work,completion-log-edit-coding,engine-request,credentials,text-delta,request-messages,forward-rows}.test.ts',
  'test/unit/contract/{adapters,session-token}.test.ts',
  'test/unit/providers/*.test.ts',
  'test/unit/reconstruct-{builder-config,rewards,golden,branches,segment,polar-strict}.test.ts',
  'src/durable/**/*.test.ts',
]

export default defineConfig({
  test: {
    environment: 'node',
    // Each mutant's run is bounded by Stryker's own timeout; a loaded machine must not fail the dry run.
    testTimeout: 30_000,
    include: process.env.ROLLGATE_MUTATE_TESTS ? process.env.ROLLGATE_MUTATE_TESTS.split(',') : DEFAULT_TESTS,
  },
})
