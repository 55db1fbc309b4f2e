/**
 * The test:harnesses acceptance checks (`scripts/lib/rollout-checks.ts`) on a small real reconstruction:
 * a clean 3-turn session passes with one merged trace; each planted defect (a captured token or logprob
 * that is not the engine's, a served call never captured, a mask-1 token that was never sampled, a later
 * segment without a break reason) is reported.
 */
import { describe, expect, it } from 'vitest'
import type { CompletionRecord } from '../../../src/contract/completion-record.ts'
import type { Trajectory } from '../../../src/contract/trajectory.ts'
import { reconstructTrajectory } from '../../../src/reconstruct/index.ts'
import type { ServedCall } from '../../../scripts/lib/engine-tap.ts'
import { checkSession } from '../../../scripts/lib/rollout-checks.ts'
import { makeRecord, withPreviousDeltas } from '../reconstruct-support/records.ts'

const EOT = 151645
function session(): { records: CompletionRecord[]; served: ServedCall[] } {
  const system = [1, 2, 3, EOT, 10]
  const r1 = [20, 21, EOT]
  const r2 = [30, 31, 32, EOT]
  const r3 = [40, EOT]
  const p1 = [...system, 11, 12]
  const p2 = [...p1, ...r1, 13, 14]
  const p3 = [...p2, ...r2, 15]
  const records = withPreviousDeltas([
    makeRecord({ seq: 1, prompt: p1, response: r1 }),
    makeRecord({ seq: 2, prompt: p2, response: r2 }),
    makeRecord({ seq: 3, prompt: p3, response: r3 }),
  ])
  const served = records.map(
    (record): ServedCall => ({
      path: '/v1/chat/completions',
      at: record.seq,
      body: {},
      status: 200,
      answer: {
        prompt_token_ids: [...record.prompt_token_ids],
        choices: [
          { token_ids: [...record.response_token_ids], logprobs: { content: record.response_logprobs!.map((logprob) => ({ logprob })) } },
        ],
      },
    }),
  )
  return { records, served }
}

function check(records: CompletionRecord[], served: ServedCall[], mutate?: (trajectory: Trajectory) => void) {
  const prefixMerging = reconstructTrajectory(records, { builder: 'prefix_merging', config: { end_of_turn_token_id: EOT } })
  mutate?.(prefixMerging)
  return checkSession({ served, records, perRequest: reconstructTrajectory(records, { builder: 'per_request' }), prefixMerging })
}

describe('rollout acceptance checks', () => {
  it('passes a clean session: all calls captured, one merged trace, no mismatch', () => {
    const { records, served } = session()
    const result = check(records, served)
    expect(result).toMatchObject({ calls: 3, captured: 3, traces_per_request: 3, traces_prefix_merging: 1, mismatches: 0, problems: [] })
    expect(result.branches).toEqual({ main: 1 })
  })

  it('reports a captured token that the engine did not sample', () => {
    const { records, served } = session()
    served[1]!.answer!.choices![0]!.token_ids![1] = 99
    const result = check(records, served)
    expect(result.mismatches).toBeGreaterThan(0)
    expect(result.problems.join('\n')).toMatch(/completion 2: no engine call served/)
  })

  it('reports a logprob that differs from the engine', () => {
    const { records, served } = session()
    served[2]!.answer!.choices![0]!.logprobs!.content![0]!.logprob = -0.5
    expect(check(records, served).problems.join('\n')).toMatch(/completion 3: 1 logprobs differ/)
  })

  it('reports an engine call the edge never captured', () => {
    const { records, served } = session()
    const result = check(records.slice(0, 2), served)
    expect(result.problems.join('\n')).toMatch(/1 engine generation call\(s\) not captured/)
    expect(result.problems.join('\n')).toMatch(/engine served 3 calls, edge captured 2/)
  })

  it('reports a mask-1 token that was never sampled, and a wrong logprob in the trace', () => {
    const { records, served } = session()
    const masked = check(records, served, (trajectory) => {
      const trace = trajectory.traces[0]!
      trace.loss_mask[trace.loss_mask.indexOf(0)] = 1
    })
    expect(masked.problems.join('\n')).toMatch(/mask-1 tokens but its turns sampled/)
    const logprob = check(records, served, (trajectory) => {
      const trace = trajectory.traces[0]!
      trace.response_logprobs![trace.loss_mask.indexOf(1)] = -9
    })
    expect(logprob.problems.join('\n')).toMatch(/1 logprobs differ from the engine's sample/)
  })

  it('requires a break reason on every later segment of a chain', () => {
    const { records, served } = session()
    const result = check(records, served, (trajectory) => {
      const first = trajectory.traces[0]!
      trajectory.traces.push({
        ...first,
        metadata: { ...first.metadata, chain_segment_index: 1, break_reason: null, turns: [] },
        loss_mask: first.loss_mask.map(() => 0),
      })
    })
    expect(result.problems.join('\n')).toMatch(/continues chain .* without a break_reason/)
  })
})
