/**
 * @module
 * Merge presets measured (`npm run bench:merge`): the trade-off between fewer training sequences and
 * tokens trained under a context the model did not sample them in.
 *
 * Sessions: the reconstruction tests' Qwen3 sessions (real Qwen3 chat template and tokenizer,
 * `test/unit/reconstruct-support/simulate-qwen3.ts`): a main agent (7 tool turns), an unlabelled
 * sub-agent, a labelled agent and a title side call, in six variants — thinking off (empty-think
 * scaffold), thinking on with reasoning replayed, replayed + a user follow-up (Qwen3 drops earlier
 * reasoning after a new user message), reasoning not replayed, replayed + non-canonical sampled
 * tokenization, and a per-request system nonce.
 *
 * Per preset (`strict` = Polar, `exact`, `tolerant`) and variant: traces, completions dropped,
 * trained tokens, trained tokens whose context differs from their prompt, and the largest context
 * difference. Last line: one JSON object.
 */
import { loadQwen3 } from '../engine/qwen3.ts'
import { parseArgs } from '../scripts/lib/cli-args.ts'
import type { Trajectory } from '../src/contract/trajectory.ts'
import { reconstructTrajectory } from '../src/reconstruct/index.ts'
import { type Qwen3ConversationSpec, type Qwen3SimOptions, simulateQwen3Session } from '../test/unit/reconstruct-support/simulate-qwen3.ts'

parseArgs(
  { options: {} },
  'Merge presets (strict = Polar, exact, tolerant) over simulated Qwen3 sessions in six variants: traces,\n' +
    'dropped completions, trained tokens and tokens trained under a context the model did not sample them in.\n' +
    'In-process, no servers; last line: one JSON object.',
)

const CONVERSATIONS: Qwen3ConversationSpec[] = [
  {
    name: 'main',
    agent: 'main',
    system: 'You are a careful coding agent working in a TypeScript repository. Use the bash tool to inspect files before answering.',
    task: 'Find where the retry logic lives and summarize it.',
    turns: 7,
    tools: true,
  },
  {
    name: 'searcher',
    agent: 'main',
    system: 'You are a file search specialist launched by another agent. Report matching paths only, one per line.',
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

const VARIANTS: Record<string, Omit<Qwen3SimOptions, 'conversations'>> = {
  thinking_off: { thinking: 'off', drift: false, nonce: false },
  thinking_replayed: { thinking: 'on-replay', drift: false, nonce: false },
  thinking_follow_up: { thinking: 'on-replay', drift: false, nonce: false, followUp: true },
  thinking_stripped: { thinking: 'on-strip', drift: false, nonce: false },
  retokenized: { thinking: 'on-replay', drift: true, nonce: false },
  system_nonce: { thinking: 'on-replay', drift: false, nonce: true },
}
const PRESETS = ['strict', 'exact', 'tolerant'] as const

interface Row {
  completions: number
  traces: number
  dropped: number
  trained_tokens: number
  trained_under_drift: number
  max_context_drift: number
}

function measure(trajectory: Trajectory, completions: number): Row {
  const stats = trajectory.metadata.reconstruction_stats as {
    completions_dropped?: number
    drift: { trained_tokens_total: number; trained_tokens_under_drift: number; context_drift_tokens_max: number }
  }
  return {
    completions,
    traces: trajectory.traces.length,
    dropped: stats.completions_dropped ?? 0,
    trained_tokens: stats.drift.trained_tokens_total,
    trained_under_drift: stats.drift.trained_tokens_under_drift,
    max_context_drift: stats.drift.context_drift_tokens_max,
  }
}

const qwen = await loadQwen3()
const results: Record<string, Record<string, Row>> = {}
const totals: Record<string, Row> = {}
for (const [variant, options] of Object.entries(VARIANTS)) {
  const records = simulateQwen3Session(qwen, { ...options, conversations: CONVERSATIONS }).map((turn) => turn.record)
  results[variant] = {}
  for (const preset of PRESETS) {
    const row = measure(reconstructTrajectory(records, { builder: 'prefix_merging', config: { preset } }), records.length)
    ;(results[variant] as Record<string, Row>)[preset] = row
    totals[preset] ??= { completions: 0, traces: 0, dropped: 0, trained_tokens: 0, trained_under_drift: 0, max_context_drift: 0 }
    const total = totals[preset] as Row
    total.completions += row.completions
    total.traces += row.traces
    total.dropped += row.dropped
    total.trained_tokens += row.trained_tokens
    total.trained_under_drift += row.trained_under_drift
    total.max_context_drift = Math.max(total.max_context_drift, row.max_context_drift)
  }
}

const pad = (value: string | number, width: number) => String(value).padStart(width)
console.log(
  `${'variant'.padEnd(20)}${'preset'.padEnd(10)}${pad('calls', 6)}${pad('traces', 7)}${pad('dropped', 8)}${pad('trained', 9)}${pad('under drift', 12)}${pad('max drift', 10)}`,
)
for (const [variant, rows] of Object.entries({ ...results, TOTAL: totals })) {
  for (const preset of PRESETS) {
    const row = rows[preset] as Row
    console.log(
      `${variant.padEnd(20)}${preset.padEnd(10)}${pad(row.completions, 6)}${pad(row.traces, 7)}${pad(row.dropped, 8)}${pad(row.trained_tokens, 9)}${pad(row.trained_under_drift, 12)}${pad(row.max_context_drift, 10)}`,
    )
  }
}
console.log(JSON.stringify({ bench: 'merge-presets', variants: results, totals }))
