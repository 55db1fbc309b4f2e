// @ts-check
/**
 * Mutation testing of the modules that carry Rollgate's promises: `npm run mutate` (all of them) or one module
 * with its tests: `ROLLGATE_MUTATE_TESTS=test/unit/reconstruct-rewards.test.ts npm run mutate -- --mutate
 * src/reconstruct/advantages.ts`. Reports go to
 * reports/mutation/ (not in git); incremental results in reports/stryker-incremental.json make re-runs cheap.
 * CPU-heavy: concurrency 1 by default (`--concurrency N` to change). Not in CI.
 * @type {import('@stryker-mutator/api/core').PartialStrykerOptions}
 */
export default {
  testRunner: 'vitest',
  vitest: { configFile: 'vitest.mutate.config.ts', related: false },
  coverageAnalysis: 'perTest',
  mutate: [
    'src/worker/auth/credentials.ts',
    'src/contract/session-token.ts',
    'src/worker/pipeline/session-access.ts',
    'src/worker/pipeline/handle-proxy-request.ts',
    'src/worker/query.ts',
    'src/durable/session/completion-log.ts',
    'src/durable/session/text-delta.ts',
    'src/durable/session/request-messages.ts',
    'src/durable/session/forward-rows.ts',
    'src/normalize/providers/anthropic/anthropic-stream.ts',
    'src/normalize/providers/openai-chat/openai-chat-stream.ts',
    'src/normalize/providers/openai-responses/openai-responses-stream.ts',
    'src/normalize/providers/google/google-stream.ts',
    'src/normalize/providers/openai-chat/openai-chat-shape.ts',
    'src/reconstruct/config.ts',
    'src/reconstruct/advantages.ts',
    'src/reconstruct/per-request.ts',
    'src/reconstruct/prefix-merging.ts',
    'src/reconstruct/segment.ts',
    'src/reconstruct/polar-strict.ts',
    'src/durable/runner/event-bus.ts',
    'src/durable/runner/hub-coordinator.ts',
    'src/durable/gate/generation-gate.ts',
    'src/durable/session/session-gate.ts',
  ],
  // TypeScript 7's JS API has no parseConfigFileTextToJson, which Stryker's tsconfig rewriting calls; the
  // project's tsconfigs need no rewriting (no references, relative extends), so point it at no file.
  tsconfigFile: 'stryker.no-tsconfig.json',
  concurrency: 1,
  // Static mutants (module-level constants) re-run every test; on a shared 2-core machine they dominate the run.
  ignoreStatic: true,
  timeoutMS: 20_000,
  incremental: true,
  incrementalFile: 'reports/stryker-incremental.json',
  reporters: ['clear-text', 'progress-append-only', 'html', 'json'],
  htmlReporter: { fileName: 'reports/mutation/index.html' },
  jsonReporter: { fileName: 'reports/mutation/mutation.json' },
  tempDirName: '.stryker-tmp',
  cleanTempDir: 'always',
  thresholds: { high: 80, low: 60, break: null },
}
