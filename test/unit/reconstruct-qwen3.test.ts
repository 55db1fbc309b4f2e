/**
 * Real Qwen3 chat template + tokenizer (`engine/qwen3.ts`): multi-turn tool-using sessions with a
 * main agent, an unlabelled sub-agent (own system prompt), a labelled agent and a side call.
 * Tolerant prefix merging must give one segment per agent branch where Polar's strict rule gives
 * one trace per turn; both numbers are printed.
 */
import { beforeAll, describe, expect, it } from 'vitest'
import { loadQwen3, type Qwen3 } from '../../engine/qwen3.ts'
import type { Trajectory } from '../../src/contract/trajectory.ts'
import { reconstructTrajectory } from '../../src/reconstruct/index.ts'
import { checkInvariants } from './reconstruct-support/invariants.ts'
import {
  type Qwen3ConversationSpec,
  type Qwen3SimOptions,
  type SimulatedTurn,
  simulateQwen3Session,
} from './reconstruct-support/simulate-qwen3.ts'

const CONVERSATIONS: Qwen3ConversationSpec[] = [
  {
    name: 'main',
    agent: 'main',
    system: 'You are a careful coding agent working in a TypeScript repository. ' + 'Use the bash tool to inspect files before answering.',
    task: 'Find where the retry logic lives and summarize it.',
    turns: 5,
    tools: true,
  },
  {
    name: 'searcher',
    agent: 'main',
    system: 'You are a file search specialist launched by another agent. ' + 'Report matching paths only, one per line.',
    task: 'List the test directories of the repository.',
    turns: 3,
    tools: true,
  },
  {
    name: 'explore',
    agent: 'explore',
    system: 'You explore code bases for the lead agent and answer in one paragraph.',
    task: 'Find the configuration loader.',
    turns: 3,
    tools: true,
  },
  {
    name: 'title',
    agent: 'main',
    system: 'Write a five-word title for the conversation. Reply with the title only.',
    task: 'Find where the retry logic lives and summarize it.',
    turns: 1,
    tools: false,
  },
]
const EXPECTED_BRANCHES = [
  ['main', 'main'],
  ['main', 'sub_agent'],
  ['explore', 'main'],
  ['main', 'side_call'],
]

let qwen: Qwen3
beforeAll(async () => {
  qwen = await loadQwen3()
}, 60_000)

interface Run {
  turns: SimulatedTurn[]
  tolerant: Trajectory
  strict: Trajectory
}

function run(label: string, options: Omit<Qwen3SimOptions, 'conversations'>, maxDrift?: number): Run {
  const turns = simulateQwen3Session(qwen, { ...options, conversations: CONVERSATIONS })
  const records = turns.map((turn) => turn.record)
  const tolerant = reconstructTrajectory(records, {
    builder: 'prefix_merging',
    config: maxDrift === undefined ? { preset: 'tolerant' } : { max_context_drift_tokens: maxDrift },
    decode: (ids) => qwen.decode(ids),
  })
  const strict = reconstructTrajectory(records, {
    builder: 'prefix_merging',
    config: { strict: true },
  })
  checkInvariants(records, tolerant, { maxContextDrift: maxDrift ?? 64 })
  checkInvariants(records, strict, { strict: true })
  console.log(
    `[qwen3 ${label}] completions=${records.length} tolerant_traces=${tolerant.traces.length} ` +
      `strict_traces=${strict.traces.length} strict_dropped=${
        (strict.metadata.reconstruction_stats as { completions_dropped: number }).completions_dropped
      }`,
  )
  return { turns, tolerant, strict }
}

const branches = (trajectory: Trajectory) => trajectory.traces.map((trace) => [trace.metadata.agent, trace.metadata.branch])

interface Turn {
  completion_id: string
  context_drift_tokens: number
  boundary_drift_tokens: number
  drift_reason: string | null
  drift_by_reason: Record<string, number>
}
const continuedTurns = (trajectory: Trajectory): Turn[] => trajectory.traces.flatMap((trace) => (trace.metadata.turns as Turn[]).slice(1))

describe('Qwen3 template sessions', () => {
  it('(a) thinking off, tools: one segment per branch; scaffold drift 4 per turn', () => {
    const { tolerant, strict, turns } = run('a thinking-off', {
      thinking: 'off',
      drift: false,
      nonce: false,
    })
    expect(branches(tolerant)).toEqual(EXPECTED_BRANCHES)
    expect(strict.traces).toHaveLength(turns.length)
    const scaffold = qwen.encode('<think>\n\n</think>\n\n').length
    expect(scaffold).toBe(4)
    for (const turn of continuedTurns(tolerant)) {
      expect(turn.boundary_drift_tokens).toBe(scaffold)
      expect(turn.drift_reason).toBe('thinking_rewrite')
    }
    expect(tolerant.metadata.reconstruction_stats).toMatchObject({
      strict_rule_merges: 0,
      breaks: {},
    })
  })

  it('(b) non-canonical sampled tokenization: merged, drift labelled retokenization', () => {
    const off = run('b thinking-off+drift', { thinking: 'off', drift: true, nonce: false })
    expect(off.turns.every((turn) => turn.nonCanonical)).toBe(true)
    expect(branches(off.tolerant)).toEqual(EXPECTED_BRANCHES)
    expect(off.strict.traces).toHaveLength(off.turns.length)
    for (const turn of continuedTurns(off.tolerant)) {
      expect(turn.boundary_drift_tokens).toBeGreaterThan(4)
      expect(turn.drift_by_reason.retokenization).toBeGreaterThan(0)
    }

    // Thinking on with reasoning replayed: Polar's prefix guard passes and it merges silently;
    // the tolerant builder merges too and reports the re-tokenized tokens.
    const on = run('b thinking-on+drift', { thinking: 'on-replay', drift: true, nonce: false })
    expect(branches(on.tolerant)).toEqual(EXPECTED_BRANCHES)
    expect(on.strict.traces).toHaveLength(4)
    for (const turn of continuedTurns(on.tolerant)) {
      expect(turn.drift_reason).toBe('retokenization')
      expect(turn.boundary_drift_tokens).toBeGreaterThan(0)
    }
  })

  it('(c) system nonce per request: merged, drift labelled system_edit and not accumulated', () => {
    const on = run('c nonce', { thinking: 'on-replay', drift: false, nonce: true })
    expect(branches(on.tolerant)).toEqual(EXPECTED_BRANCHES)
    expect(on.strict.traces).toHaveLength(on.turns.length)
    const drifts = continuedTurns(on.tolerant).map((turn) => turn.context_drift_tokens)
    for (const turn of continuedTurns(on.tolerant)) expect(turn.drift_reason).toBe('system_edit')
    expect(Math.max(...drifts)).toBeLessThanOrEqual(8)

    const off = run('c nonce+thinking-off', { thinking: 'off', drift: false, nonce: true })
    expect(branches(off.tolerant)).toEqual(EXPECTED_BRANCHES)
    expect(off.strict.traces).toHaveLength(off.turns.length)
  })

  it('(d) reasoning not replayed: drift = stripped reasoning; the bound decides', () => {
    const generous = run('d strip, bound 10000', { thinking: 'on-strip', drift: false, nonce: false }, 10_000)
    expect(branches(generous.tolerant)).toEqual(EXPECTED_BRANCHES)
    // Polar's guard passes (the new prompt extends the old one): it merges without noticing.
    expect(generous.strict.traces).toHaveLength(4)
    const byId = new Map(generous.turns.map((turn) => [turn.record.completion_id, turn]))
    for (const trace of generous.tolerant.traces) {
      const turns = trace.metadata.turns as Turn[]
      let expected = 0
      turns.forEach((turn, index) => {
        if (index === 0) return
        const previous = byId.get(turns[index - 1]?.completion_id ?? '')
        // Independent count: the tokens of the `<think>…</think>\n\n` block the model sampled.
        expect(turn.boundary_drift_tokens).toBe(previous?.reasoningBlockTokens)
        expected += previous?.reasoningBlockTokens ?? 0
        expect(turn.context_drift_tokens).toBe(expected)
        expect(turn.drift_reason).toBe('thinking_rewrite')
      })
    }

    const tight = run('d strip, bound 0', { thinking: 'on-strip', drift: false, nonce: false }, 0)
    expect(tight.tolerant.traces).toHaveLength(tight.turns.length)
    const reasons = tight.tolerant.traces.map((trace) => trace.metadata.break_reason).filter((r) => r !== null)
    expect(new Set(reasons)).toEqual(new Set(['thinking_rewrite']))

    const defaults = run('d strip, default bound 64', {
      thinking: 'on-strip',
      drift: false,
      nonce: false,
    })
    const main = defaults.tolerant.traces.filter((t) => t.metadata.agent === 'main' && t.metadata.branch === 'main')
    expect(main.length).toBeGreaterThan(1)
    for (const turn of continuedTurns(defaults.tolerant)) expect(turn.context_drift_tokens).toBeLessThanOrEqual(64)
  })
})
