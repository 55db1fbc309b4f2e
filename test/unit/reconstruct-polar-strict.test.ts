/**
 * Polar-strict in two passes (`src/reconstruct/polar-strict.ts`: a plan over the prompts, then one chain's
 * trace at a time) against the port as it was first written, whole in memory
 * (`reconstruct-support/polar-strict-reference.ts`): the same trajectory text on simulated agent sessions
 * and on random prompts full of shared prefixes, ties and retries, with the tip hash working or made to
 * collide everywhere; the plan reads no request, and a trace's build asks for each record before reading it.
 */
import fc from 'fast-check'
import { afterEach, describe, expect, it } from 'vitest'
import type { CompletionRecord } from '../../src/contract/completion-record.ts'
import { buildPrefixMergingStrict, startPrefixMergingStrict, strictTraceSteps, tipHashing } from '../../src/reconstruct/polar-strict.ts'
import { buildPrefixMergingStrictReference } from './reconstruct-support/polar-strict-reference.ts'
import { makeRecord } from './reconstruct-support/records.ts'
import { type SimOptions, simulateSession } from './reconstruct-support/simulate-tokens.ts'

const SESSION = { session_id: 'ses_strict', task_id: 'task', metadata: { group_id: 'g' } }
const realHashes = tipHashing.prefixHashes

afterEach(() => {
  tipHashing.prefixHashes = realHashes
})

const simOptions: fc.Arbitrary<SimOptions> = fc.record({
  seed: fc.integer({ min: 1, max: 2 ** 31 - 1 }),
  mainTurns: fc.integer({ min: 1, max: 10 }),
  thinking: fc.constantFrom('off', 'on-replay', 'on-strip'),
  retokenizeRate: fc.constantFrom(0, 0.3, 1),
  nonce: fc.boolean(),
  subAgents: fc.integer({ min: 0, max: 3 }),
  labelSubAgents: fc.boolean(),
  sideCalls: fc.integer({ min: 0, max: 3 }),
  retryRate: fc.constantFrom(0, 0.2, 0.5),
  abandonRate: fc.constantFrom(0, 0.2),
  truncateRate: fc.constantFrom(0, 0.2, 0.5),
  compactAt: fc.option(fc.integer({ min: 1, max: 6 }), { nil: null }),
  noLogprobRate: fc.constantFrom(0, 0.1),
  deltaMode: fc.constantFrom('true', 'best', 'previous', 'none'),
})

/**
 * Records whose prompts are drawn from a 3-token alphabet off a few shared stems: many tips are prefixes of
 * later prompts (of equal length too), prompts repeat (retries), some are empty; responses end in the EOT
 * or not, so chains break at random places.
 */
const denseRecords = fc
  .array(
    fc.record({
      stem: fc.nat(3),
      cut: fc.nat(12),
      tail: fc.array(fc.constantFrom(7, 8, 99), { maxLength: 6 }),
      response: fc.array(fc.constantFrom(7, 8, 99), { minLength: 0, maxLength: 4 }),
      finish: fc.constantFrom('stop', 'length', 'tool_calls'),
      status: fc.constantFrom('ok', 'ok', 'ok', 'failed'),
      logprobs: fc.boolean(),
    }),
    { minLength: 1, maxLength: 24 },
  )
  .map((specs) => {
    const stems = [
      [7, 8, 99, 7, 8, 8, 99, 7, 7, 8, 99, 8],
      [7, 8, 99, 8, 7, 99, 99, 7, 8, 8, 7, 99],
      [8, 8, 99, 7, 8, 8, 99, 7, 7, 8, 99, 8],
      [7, 8, 99, 7, 8, 8, 99, 7, 99, 8, 7, 7],
    ]
    return specs.map((spec, seq) =>
      makeRecord({
        seq,
        prompt: [...(stems[spec.stem] as number[]).slice(0, spec.cut), ...spec.tail],
        response: spec.response,
        finish: spec.finish,
        status: spec.status as CompletionRecord['status'],
        ...(spec.logprobs ? {} : { logprobs: null }),
        messages: Array.from({ length: 1 + (seq % 4) }, (_, i) => ({ role: i % 2 ? 'assistant' : 'user', content: `m${i}` })),
      }),
    )
  })

function bothTexts(records: readonly CompletionRecord[], eot: number | null): [string, string] {
  return [
    JSON.stringify(buildPrefixMergingStrict(records, SESSION, eot)),
    JSON.stringify(buildPrefixMergingStrictReference(records, SESSION, eot)),
  ]
}

describe('Polar-strict in two passes', () => {
  it('equals the port built whole in memory on simulated agent sessions', () => {
    fc.assert(
      fc.property(simOptions, fc.constantFrom(null, 99, 4), (options, eot) => {
        const [twoPass, reference] = bothTexts(simulateSession(options).records, eot)
        expect(twoPass === reference, `${twoPass}\n!==\n${reference}`).toBe(true)
      }),
      { numRuns: 400 },
    )
  })

  it('equals it on prompts full of shared prefixes, ties, retries and empty prompts', () => {
    fc.assert(
      fc.property(denseRecords, fc.constantFrom(null, 99, 8), (records, eot) => {
        const [twoPass, reference] = bothTexts(records, eot)
        expect(twoPass === reference, `${twoPass}\n!==\n${reference}`).toBe(true)
      }),
      { numRuns: 400 },
    )
  })

  it('equals it when every prefix hash collides (tips are confirmed token by token)', () => {
    tipHashing.prefixHashes = (tokens, out) => out.fill(0, 0, tokens.length)
    fc.assert(
      fc.property(denseRecords, fc.constantFrom(null, 99), (records, eot) => {
        const [twoPass, reference] = bothTexts(records, eot)
        expect(twoPass === reference, `${twoPass}\n!==\n${reference}`).toBe(true)
      }),
      { numRuns: 300 },
    )
    const [twoPass, reference] = bothTexts(simulateSession({ ...FIXED, subAgents: 2, retryRate: 0.5 }).records, null)
    expect(twoPass).toBe(reference)
  })

  it('plans from prompts and small fields only; a trace asks for each of its records before reading its request', () => {
    const { records } = simulateSession({ ...FIXED, subAgents: 2, sideCalls: 2, truncateRate: 0.3 })
    const requested: string[] = []
    const guarded = records.map((record) => {
      let loaded = false
      const copy = { ...record } as CompletionRecord & { loaded: boolean }
      Object.defineProperty(copy, 'request', {
        get() {
          if (!loaded) throw new Error(`request of ${record.completion_id} read before it was asked for`)
          return record.request
        },
      })
      Object.defineProperty(copy, 'loaded', {
        set(value: boolean) {
          loaded = value
          if (value) requested.push(record.completion_id)
        },
      })
      return copy
    })
    const planning = startPrefixMergingStrict(guarded, SESSION, null)
    for (const record of planning.trainable) planning.place(record)
    const plan = planning.finish()
    expect(plan.chains.length).toBeGreaterThan(1)
    const traces = plan.chains.map((chain) => {
      const steps = strictTraceSteps(chain)
      for (let step = steps.next(); ; step = steps.next()) {
        if (step.done) return step.value
        ;(step.value as CompletionRecord & { loaded: boolean }).loaded = true
      }
    })
    const merged = plan.chains.flatMap((chain) => chain.records.slice(0, chain.kept).map((record) => record.completion_id))
    expect(requested).toEqual(merged)
    const reference = buildPrefixMergingStrictReference(records, SESSION, null)
    expect(JSON.stringify({ status: plan.status, metadata: plan.metadata, traces, error: plan.error })).toBe(JSON.stringify(reference))
  })
})

/** Both builders on hand-made records: the texts must be equal; returns the two-pass trajectory. */
function strictOf(records: readonly CompletionRecord[], eot: number | null = 99) {
  const [twoPass, reference] = bothTexts(records, eot)
  expect(twoPass).toBe(reference)
  return buildPrefixMergingStrict(records, SESSION, eot)
}

type Turn = { context_drift_tokens: number; message_index: number }

/**
 * Fixed sessions for what random ones reach rarely or never (each was a planted bug the properties missed or
 * caught in few runs). EOT 99 throughout; a prompt extends the last one by the re-rendered response up to
 * its EOT, then the interstitial.
 */
describe('Polar-strict on fixed sessions', () => {
  it('counts a turn whose context differs from its prompt by exactly one token as drifted', () => {
    // Turn 1 sampled [10, 11, 99]; the template re-renders it as [10, 12, 99]: one token of drift.
    const records = [
      makeRecord({ seq: 0, prompt: [1, 2, 3], response: [10, 11, 99] }),
      makeRecord({ seq: 1, prompt: [1, 2, 3, 10, 12, 99, 5, 6], response: [20, 21, 99] }),
    ]
    const trajectory = strictOf(records)
    expect(trajectory.traces).toHaveLength(1)
    const { metadata } = trajectory.traces[0]!
    expect((metadata.turns as Turn[]).map((turn) => turn.context_drift_tokens)).toEqual([0, 1])
    expect(metadata.context_drift_tokens_max).toBe(1)
    expect(metadata.trained_tokens_under_drift).toBe(3)
    expect((trajectory.metadata.reconstruction_stats as { drift: unknown }).drift).toEqual({
      turns_with_drift: 1,
      context_drift_tokens_max: 1,
      trained_tokens_total: 6,
      trained_tokens_under_drift: 3,
    })
  })

  it('joins the longest tip when a shorter one (a later chain) is a prefix of the prompt too', () => {
    // [1, 2] starts a second chain (the first tip [1, 2, 3, 99] is no prefix of it); [1, 2, 3, 99, 5] extends
    // both tips and joins the longer, the first chain's; then [1, 2, 7] extends only the second.
    const records = [
      makeRecord({ seq: 0, prompt: [1, 2, 3, 99], response: [4, 99] }),
      makeRecord({ seq: 1, prompt: [1, 2], response: [6, 99] }),
      makeRecord({ seq: 2, prompt: [1, 2, 3, 99, 4, 99, 5], response: [8, 99] }),
      makeRecord({ seq: 3, prompt: [1, 2, 6, 99, 7], response: [9, 99] }),
    ]
    const trajectory = strictOf(records)
    expect(trajectory.traces.map((trace) => trace.metadata.source_completion_ids)).toEqual([
      [records[0]!.completion_id, records[2]!.completion_id],
      [records[1]!.completion_id, records[3]!.completion_id],
    ])
  })

  it('marks a turn with no response message with message index -1', () => {
    const records = [
      makeRecord({ seq: 0, prompt: [1, 2], response: [3, 99], responseMessage: null }),
      makeRecord({ seq: 1, prompt: [1, 2, 3, 99, 4], response: [5, 99] }),
    ]
    const trajectory = strictOf(records)
    expect((trajectory.traces[0]!.metadata.turns as Turn[]).map((turn) => turn.message_index)).toEqual([-1, 0])
  })

  it('names an empty session and one with nothing trainable apart', () => {
    expect(strictOf([]).error).toBe('no completions')
    const failed = strictOf([makeRecord({ seq: 0, prompt: [1], response: [2], status: 'failed' })])
    expect([failed.status, failed.error]).toEqual(['ERROR', 'no trainable completions'])
  })
})

const FIXED: SimOptions = {
  seed: 11,
  mainTurns: 8,
  thinking: 'on-strip',
  retokenizeRate: 0.3,
  nonce: false,
  subAgents: 0,
  labelSubAgents: false,
  sideCalls: 1,
  retryRate: 0.2,
  abandonRate: 0.1,
  truncateRate: 0.2,
  compactAt: null,
  noLogprobRate: 0,
  deltaMode: 'best',
}
