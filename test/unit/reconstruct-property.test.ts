/**
 * Property tests: random simulated sessions (drift, branches, retries, excluded records, four
 * prompt_delta styles) against independent invariants (`reconstruct-support/invariants.ts`).
 */
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { reconstructTrajectory } from '../../src/reconstruct/index.ts'
import { checkInvariants } from './reconstruct-support/invariants.ts'
import { type SimOptions, simulateSession, TOKENS } from './reconstruct-support/simulate-tokens.ts'

/** `RECONSTRUCT_PROPERTY_RUNS=5000 npx vitest …` for a longer soak. */
const SCALE = Number(process.env.RECONSTRUCT_PROPERTY_RUNS ?? 0) / 300 || 1
const runs = (n: number) => Math.max(1, Math.round(n * SCALE))

const simOptions: fc.Arbitrary<SimOptions> = fc.record({
  seed: fc.integer({ min: 1, max: 2 ** 31 - 1 }),
  mainTurns: fc.integer({ min: 1, max: 9 }),
  thinking: fc.constantFrom('off', 'on-replay', 'on-strip'),
  retokenizeRate: fc.constantFrom(0, 0.3, 1),
  nonce: fc.boolean(),
  subAgents: fc.integer({ min: 0, max: 2 }),
  labelSubAgents: fc.boolean(),
  sideCalls: fc.integer({ min: 0, max: 2 }),
  retryRate: fc.constantFrom(0, 0.2),
  abandonRate: fc.constantFrom(0, 0.2),
  truncateRate: fc.constantFrom(0, 0.2),
  compactAt: fc.option(fc.integer({ min: 1, max: 6 }), { nil: null }),
  noLogprobRate: fc.constantFrom(0, 0.1),
  deltaMode: fc.constantFrom('true', 'best', 'previous', 'none'),
})

const tolerantConfig = fc.record({
  max_context_drift_tokens: fc.constantFrom(0, 4, 16, 64, 1_000_000),
  retry_policy: fc.constantFrom('keep_last', 'keep_first'),
  boundary_window_tokens: fc.constantFrom(4, 32),
  end_of_turn_token_id: fc.constantFrom(null, TOKENS.eot),
})

describe('prefix_merging properties', () => {
  it(
    'tolerant: mask-1 tokens are sampled tokens, each completion once, nothing lost',
    () => {
      fc.assert(
        fc.property(simOptions, tolerantConfig, (sim, config) => {
          const session = simulateSession(sim)
          const trajectory = reconstructTrajectory(session.records, {
            builder: 'prefix_merging',
            config: { ...config, think_token_ids: [TOKENS.thinkOpen, TOKENS.thinkClose] },
          })
          expect(trajectory.status).toBe('COMPLETED')
          checkInvariants(session.records, trajectory, {
            maxContextDrift: config.max_context_drift_tokens,
          })
        }),
        { numRuns: runs(300) },
      )
    },
    60_000 * SCALE,
  )

  it(
    'wrong prompt_delta hints change merge decisions at most, never trainable tokens',
    () => {
      fc.assert(
        fc.property(
          simOptions,
          fc.array(fc.tuple(fc.nat(), fc.nat({ max: 5_000 })), { minLength: 1, maxLength: 40 }),
          (sim, corruption) => {
            const session = simulateSession(sim)
            const records = session.records.map((record, index) => {
              const [parent, shared] = corruption[index % corruption.length] ?? [0, 0]
              const parentSeq = parent % session.records.length
              return {
                ...record,
                prompt_delta: { parent_seq: parentSeq, shared_prefix_len: shared },
              }
            })
            const trajectory = reconstructTrajectory(records, { builder: 'prefix_merging' })
            checkInvariants(records, trajectory, { untrustedDeltas: true })
          },
        ),
        { numRuns: runs(150) },
      )
    },
    60_000 * SCALE,
  )

  it(
    'strict (Polar): same token invariants; drops only with an explicit entry',
    () => {
      fc.assert(
        fc.property(simOptions, (sim) => {
          const session = simulateSession(sim)
          const trajectory = reconstructTrajectory(session.records, {
            builder: 'prefix_merging',
            config: { strict: true },
          })
          checkInvariants(session.records, trajectory, { strict: true })
        }),
        { numRuns: runs(150) },
      )
    },
    60_000 * SCALE,
  )

  it(
    'per_request: one trace per trainable completion, the rest listed',
    () => {
      fc.assert(
        fc.property(simOptions, (sim) => {
          const session = simulateSession(sim)
          const trajectory = reconstructTrajectory(session.records, { builder: 'per_request' })
          const trainable = session.records.filter((r) => r.status === 'ok' && r.trainable)
          expect(trajectory.traces).toHaveLength(trainable.length)
          trajectory.traces.forEach((trace, i) => {
            const record = trainable[i]
            expect(trace.prompt_ids).toEqual(record?.prompt_token_ids)
            expect(trace.response_ids).toEqual(record?.response_token_ids)
            expect(trace.loss_mask.every((v) => v === 1)).toBe(true)
          })
          const excluded = trajectory.metadata.excluded_completions as unknown[]
          expect(excluded.length + trainable.length).toBe(session.records.length)
        }),
        { numRuns: runs(100) },
      )
    },
    60_000 * SCALE,
  )

  it(
    'with an unbounded drift budget, one trace per conversation (plus compaction and retries)',
    () => {
      fc.assert(
        fc.property(simOptions, (sim) => {
          const session = simulateSession(sim)
          const trajectory = reconstructTrajectory(session.records, {
            builder: 'prefix_merging',
            // Configured EOT: auto-detection needs one natural stop, and a session may have none.
            config: { max_context_drift_tokens: 1_000_000_000, end_of_turn_token_id: TOKENS.eot },
          })
          const nonRetry = trajectory.traces.filter((t) => t.metadata.branch !== 'retry')
          expect(nonRetry).toHaveLength(session.conversations.length + (session.compacted ? 1 : 0))
          const branches = nonRetry.map((t) => t.metadata.branch).sort()
          const expected = session.conversations
            .map((c): string => (c.kind === 'sub_agent' && c.agent !== 'main' ? 'main' : c.kind))
            .concat(session.compacted ? ['compaction'] : [])
            .sort()
          expect(branches).toEqual(expected)
        }),
        { numRuns: runs(200) },
      )
    },
    60_000 * SCALE,
  )

  it(
    'clean sessions: tolerant output equals Polar strict output token for token',
    () => {
      fc.assert(
        fc.property(
          simOptions.map((sim) => ({
            ...sim,
            thinking: 'on-replay' as const,
            retokenizeRate: 0,
            nonce: false,
            retryRate: 0,
            abandonRate: 0,
            compactAt: null,
            // Polar detects the EOT per chain: a chain of only truncated turns has none there.
            truncateRate: 0,
          })),
          (sim) => {
            const session = simulateSession(sim)
            const tolerant = reconstructTrajectory(session.records, { builder: 'prefix_merging' })
            const strict = reconstructTrajectory(session.records, {
              builder: 'prefix_merging',
              config: { strict: true },
            })
            const shape = (t: typeof tolerant) =>
              t.traces
                .map((x) => ({
                  p: x.prompt_ids,
                  r: x.response_ids,
                  m: x.loss_mask,
                  l: x.response_logprobs,
                }))
                .sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)))
            expect(shape(tolerant)).toEqual(shape(strict))
            expect(tolerant.metadata.reconstruction_stats).toMatchObject({ breaks: {} })
          },
        ),
        { numRuns: runs(100) },
      )
    },
    60_000 * SCALE,
  )
})
