import { cloudflareTest } from '@cloudflare/vitest-plugin'
import { defineConfig } from 'vitest/config'

/**
 * Three projects:
 * - `unit`: pure logic in Node (normalize, reconstruct, engine internals).
 * - `workers`: the real Worker, Durable Object, SQLite and R2 inside workerd.
 * - `integration`: real processes (stand-in engine, `wrangler dev`) driven by the official SDKs.
 */
export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: 'unit',
          environment: 'node',
          include: ['src/**/*.test.ts', 'engine/**/*.test.ts', 'test/unit/**/*.test.ts'],
        },
      },
      {
        plugins: [
          cloudflareTest({
            wrangler: { configPath: './wrangler.toml' },
            miniflare: {
              bindings: {
                ROLLGATE_ADMIN_TOKEN: 'test-admin-token',
                ROLLGATE_SIGNING_KEY: 'test-signing-key',
                ROLLGATE_UPSTREAM_URL: 'http://127.0.0.1:9',
                ROLLGATE_SERVED_MODEL: 'Qwen/Qwen3-8B',
                ROLLGATE_RUNNER_TOKEN: 'test-runner-token',
                // Callback retries are driven by runDurableObjectAlarm in tests, never by the clock.
                ROLLGATE_CALLBACK_BASE_DELAY_MS: '60000',
              },
            },
          }),
        ],
        test: {
          name: 'workers',
          include: ['test/worker/**/*.test.ts'],
        },
      },
      {
        test: {
          name: 'integration',
          environment: 'node',
          include: ['test/integration/**/*.test.ts'],
          testTimeout: 120_000,
          hookTimeout: 120_000,
          fileParallelism: false,
        },
      },
    ],
  },
})
