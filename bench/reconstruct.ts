/**
 * @module
 * Reconstruction benchmark (`npm run bench:reconstruct`).
 *
 * Synthetic sessions: 50 turns, a 2,000-token first prompt growing by ~300 tokens per turn
 * (200-token responses + ~100-token tool results and template glue), records carrying a realistic
 * `prompt_delta` (parent = previous turn, shared prefix = the true common prefix).
 * - `exact`: every prompt extends the previous one (Polar-friendly);
 * - `qwen3_no_think`: Qwen3 with thinking off — each generation prompt ends with the empty-think
 *   scaffold the template drops when it replays the turn, so no prompt extends the previous one.
 *
 * For 10, 100 and 1,000 `exact` sessions it times the tolerant builder, Polar's strict algorithm
 * (line-by-line port, `strict: true`) and `per_request`, and reports completions/s, prompt
 * tokens/s (sum of prompt lengths / s), the 1,000-vs-100 time ratio (linear ⇒ ≈10) and the
 * compression against `per_request` (sequences and tokens). The no-think scenario runs at 100
 * sessions. Sessions are generated outside the timed region. The last line is one JSON object.
 */
import { performance } from 'node:perf_hooks'
import type { CompletionRecord } from '../src/contract/completion-record.ts'
import type { Trajectory } from '../src/contract/trajectory.ts'
import { reconstructTrajectory } from '../src/reconstruct/index.ts'
import { parseArgs } from '../scripts/lib/cli-args.ts'

parseArgs(
  { options: {} },
  'Trajectory reconstruction throughput on synthetic 50-turn sessions (10 / 100 / 1,000 sessions): the tolerant\n' +
    "builder, Polar's strict algorithm and per_request; completions/s, prompt tokens/s, scaling, compression.\n" +
    'In-process, about 2 minutes; last line: one JSON object.',
)

const TURNS = 50
/** Longer sessions for the per-completion cost check (context grows to ~62k tokens). */
const LONG_TURNS = 200
const FIRST_PROMPT_TOKENS = 2_000
const RESPONSE_TOKENS = 200
const INTERSTITIAL_TOKENS = 100
const SESSION_COUNTS = [10, 100, 1_000] as const
/** Python Polar's prompt-token throughput the peer target is stated against (×10 = target). */
const PEER_PROMPT_TOKENS_PER_S = 2.6e6
const EOT = 151645
const SCAFFOLD = [151667, 271, 151668, 271]
/** Stop early (and say so) if the whole run would exceed this. */
const RUN_BUDGET_MS = 110_000

type Scenario = 'exact' | 'qwen3_no_think'

function rng(seed: number) {
  let state = seed >>> 0 || 1
  return () => {
    state ^= state << 13
    state ^= state >>> 17
    state ^= state << 5
    return (state >>> 0) / 4294967296
  }
}

function record(
  sessionId: string,
  seq: number,
  prompt: number[],
  response: number[],
  logprobs: number[],
  delta: CompletionRecord['prompt_delta'],
): CompletionRecord {
  return {
    completion_id: `msg_${sessionId}_${seq}`,
    session_id: sessionId,
    seq,
    timestamp: new Date(Date.UTC(2026, 0, 1, 0, 0, seq)).toISOString(),
    api: 'openai-chat',
    agent: 'main',
    model_requested: 'qwen3',
    model_used: 'Qwen/Qwen3-8B',
    stream: true,
    status: 'ok',
    trainable: true,
    prompt_token_ids: prompt,
    prompt_delta: delta,
    response_token_ids: response,
    response_logprobs: logprobs,
    finish_reason: 'tool_calls',
    stop_reason: null,
    request: {
      model: 'qwen3',
      messages: [{ role: 'user', content: 'task' }],
      tools: [{ type: 'function' }],
    },
    response_message: { role: 'assistant', content: '' },
    original_request: null,
    usage: null,
    warnings: [],
    error: null,
    timing: { started_at: '2026-01-01T00:00:00.000Z', upstream_ms: 0, total_ms: 0 },
    provenance: {
      upstream_kind: 'vllm',
      upstream_url: 'http://engine',
      sampling_params: {},
      logprobs_mode: null,
      policy_version: 1,
      route: 'direct',
    },
    metadata: { session_id: sessionId, task_id: 'bench' },
  }
}

/** One synthetic session; prompts are real, independent arrays (as the edge serves them). */
function generateSession(index: number, scenario: Scenario, turns: number = TURNS): { records: CompletionRecord[]; promptTokens: number } {
  const random = rng(index * 7919 + 17)
  const token = () => 1_000 + Math.floor(random() * 140_000)
  const sessionId = `bench-${scenario}-${index}`
  const context: number[] = []
  for (let i = 0; i < FIRST_PROMPT_TOKENS - (scenario === 'exact' ? 0 : SCAFFOLD.length); i++) context.push(token())
  if (scenario === 'qwen3_no_think') context.push(...SCAFFOLD)
  const records: CompletionRecord[] = []
  let promptTokens = 0
  let previousLength = 0
  for (let turn = 0; turn < turns; turn++) {
    const prompt = context.slice()
    promptTokens += prompt.length
    const response: number[] = []
    const logprobs: number[] = []
    for (let i = 0; i < RESPONSE_TOKENS - 1; i++) {
      response.push(token())
      logprobs.push(-random() * 3)
    }
    response.push(EOT)
    logprobs.push(-0.01)
    const shared = scenario === 'exact' ? previousLength : Math.max(0, previousLength - SCAFFOLD.length)
    records.push(
      record(sessionId, turn, prompt, response, logprobs, turn === 0 ? null : { parent_seq: turn - 1, shared_prefix_len: shared }),
    )
    previousLength = prompt.length
    // Next prompt: the template replays the turn (without the scaffold when thinking is off),
    // then the tool result and the next generation prompt.
    if (scenario === 'qwen3_no_think') context.length -= SCAFFOLD.length
    context.push(...response)
    const glue = INTERSTITIAL_TOKENS - (scenario === 'qwen3_no_think' ? SCAFFOLD.length : 0)
    for (let i = 0; i < glue; i++) context.push(token())
    if (scenario === 'qwen3_no_think') context.push(...SCAFFOLD)
  }
  return { records, promptTokens }
}

interface Figures {
  sessions: number
  completions: number
  prompt_tokens: number
  time_ms: number
  completions_per_s: number
  prompt_tokens_per_s: number
  traces: number
  trace_tokens: number
  compression_sequences: number
  compression_tokens: number
}

type BuilderName = 'tolerant' | 'strict' | 'per_request'
const BUILDS: Record<BuilderName, (records: CompletionRecord[]) => Trajectory> = {
  tolerant: (records) => reconstructTrajectory(records, { builder: 'prefix_merging', config: { preset: 'tolerant' } }),
  strict: (records) => reconstructTrajectory(records, { builder: 'prefix_merging', config: { strict: true } }),
  per_request: (records) => reconstructTrajectory(records, { builder: 'per_request' }),
}

function traceTokens(trajectory: Trajectory): number {
  let total = 0
  for (const trace of trajectory.traces) total += trace.prompt_ids.length + trace.response_ids.length
  return total
}

function measure(
  scenario: Scenario,
  sessions: number,
  builders: BuilderName[],
  config?: Record<string, unknown>,
  turns: number = TURNS,
  repeats = 1,
) {
  const acc = new Map<BuilderName, { time: number; traces: number; tokens: number }>()
  for (const name of builders) acc.set(name, { time: 0, traces: 0, tokens: 0 })
  let completions = 0
  let promptTokens = 0
  for (let index = 0; index < sessions; index++) {
    const { records, promptTokens: tokens } = generateSession(index, scenario, turns)
    completions += records.length
    promptTokens += tokens
    for (const name of builders) {
      const build =
        name === 'tolerant' && config !== undefined
          ? (r: CompletionRecord[]) => reconstructTrajectory(r, { builder: 'prefix_merging', config })
          : BUILDS[name]
      // One timed run; with `repeats` > 1 the best of that many (filters GC pauses caused by
      // generating the previous, large session).
      let elapsed = Number.POSITIVE_INFINITY
      let trajectory: Trajectory | undefined
      for (let run = 0; run < repeats; run++) {
        const start = performance.now()
        trajectory = build(records)
        elapsed = Math.min(elapsed, performance.now() - start)
      }
      if (trajectory === undefined) throw new Error('repeats must be ≥ 1')
      const entry = acc.get(name) as { time: number; traces: number; tokens: number }
      entry.time += elapsed
      entry.traces += trajectory.traces.length
      entry.tokens += traceTokens(trajectory)
    }
  }
  const perRequest = acc.get('per_request')
  const result: Partial<Record<BuilderName, Figures>> = {}
  for (const [name, entry] of acc) {
    const seconds = entry.time / 1000
    result[name] = {
      sessions,
      completions,
      prompt_tokens: promptTokens,
      time_ms: round(entry.time),
      completions_per_s: round(completions / seconds),
      prompt_tokens_per_s: round(promptTokens / seconds),
      traces: entry.traces,
      trace_tokens: entry.tokens,
      compression_sequences: perRequest === undefined ? Number.NaN : round(perRequest.traces / entry.traces, 2),
      compression_tokens: perRequest === undefined ? Number.NaN : round(perRequest.tokens / entry.tokens, 2),
    }
  }
  return result
}

function round(value: number, digits = 0): number {
  const scale = 10 ** digits
  return Math.round(value * scale) / scale
}

function format(n: number): string {
  if (n >= 1e9) return `${(n / 1e9).toFixed(2)} G`
  if (n >= 1e6) return `${(n / 1e6).toFixed(2)} M`
  if (n >= 1e3) return `${(n / 1e3).toFixed(1)} k`
  return String(n)
}

function main() {
  const started = performance.now()
  measure('exact', 10, ['tolerant', 'strict', 'per_request']) // warm-up (JIT)

  const scaling: Record<string, Partial<Record<BuilderName, Figures>>> = {}
  let truncated = false
  for (const sessions of SESSION_COUNTS) {
    const elapsed = performance.now() - started
    const expectedStrict = sessions === 1_000 ? (scaling['100']?.strict?.time_ms ?? 0) * 12 : 0
    if (elapsed + expectedStrict > RUN_BUDGET_MS) {
      truncated = true
      break
    }
    const figures = measure('exact', sessions, ['tolerant', 'strict', 'per_request'])
    scaling[String(sessions)] = figures
    for (const name of ['tolerant', 'strict', 'per_request'] as const) {
      const f = figures[name]
      if (f === undefined) continue
      console.log(
        `exact ${String(sessions).padStart(5)} sessions  ${name.padEnd(11)} ` +
          `${String(f.time_ms).padStart(7)} ms  ` +
          `${format(f.completions_per_s).padStart(9)} completions/s  ` +
          `${format(f.prompt_tokens_per_s).padStart(9)} prompt tokens/s  traces ${f.traces}  ` +
          `compression ${f.compression_sequences}× sequences, ${f.compression_tokens}× tokens`,
      )
    }
  }

  const ratio = (name: BuilderName) => {
    const big = scaling['1000']?.[name]?.time_ms
    const small = scaling['100']?.[name]?.time_ms
    return big === undefined || small === undefined || small === 0 ? null : round(big / small, 2)
  }

  const noThink = measure('qwen3_no_think', 100, ['tolerant', 'strict', 'per_request'])
  const noThinkWide = measure('qwen3_no_think', 100, ['tolerant', 'per_request'], {
    max_context_drift_tokens: 512,
  })
  for (const [label, figures] of [
    ['bound 64', noThink],
    ['bound 512', noThinkWide],
  ] as const) {
    for (const name of ['tolerant', 'strict'] as const) {
      const f = figures[name]
      if (f === undefined) continue
      console.log(
        `qwen3_no_think 100 sessions (${label}) ${name.padEnd(8)} ` +
          `${String(f.time_ms).padStart(6)} ms  ` +
          `${format(f.prompt_tokens_per_s).padStart(9)} prompt tokens/s  traces ${f.traces}  ` +
          `compression ${f.compression_sequences}× sequences, ${f.compression_tokens}× tokens`,
      )
    }
  }

  // Linear in new tokens: the cost per completion must not grow with the context length.
  const long = measure('exact', 10, ['tolerant', 'strict'], undefined, LONG_TURNS, 3)
  const perCompletionUs = (f: Figures | undefined) => (f === undefined ? null : round((f.time_ms * 1000) / f.completions, 2))
  const lengthScaling = {
    turns: LONG_TURNS,
    timing: 'best of 3 per session (50-turn figure: single runs of the 100-session set)',
    sessions: 10,
    final_prompt_tokens: FIRST_PROMPT_TOKENS + (LONG_TURNS - 1) * (RESPONSE_TOKENS + INTERSTITIAL_TOKENS),
    tolerant_us_per_completion: {
      turns_50: perCompletionUs(scaling['100']?.tolerant),
      [`turns_${LONG_TURNS}`]: perCompletionUs(long.tolerant),
    },
    strict_us_per_completion: {
      turns_50: perCompletionUs(scaling['100']?.strict),
      [`turns_${LONG_TURNS}`]: perCompletionUs(long.strict),
    },
  }
  console.log(
    `per completion: tolerant ${lengthScaling.tolerant_us_per_completion.turns_50} µs ` +
      `(50 turns) vs ${perCompletionUs(long.tolerant)} µs (${LONG_TURNS} turns, context up to ` +
      `${lengthScaling.final_prompt_tokens}); strict ` +
      `${lengthScaling.strict_us_per_completion.turns_50} µs vs ${perCompletionUs(long.strict)} µs`,
  )

  const tolerant1000 = scaling['1000']?.tolerant ?? scaling['100']?.tolerant
  const strict1000 = scaling['1000']?.strict ?? scaling['100']?.strict
  const speedup = tolerant1000 && strict1000 ? round(tolerant1000.prompt_tokens_per_s / strict1000.prompt_tokens_per_s, 1) : null
  const peerFactor = tolerant1000 ? round(tolerant1000.prompt_tokens_per_s / PEER_PROMPT_TOKENS_PER_S, 1) : null
  console.log(
    `time ratio 1000/100: tolerant ${ratio('tolerant')} (target ≤ 11), ` +
      `strict ${ratio('strict')}; tolerant vs strict ${speedup}×; ` +
      `tolerant vs peer 2.6 M prompt tokens/s: ${peerFactor}× (target ≥ 10)` +
      (truncated ? ' [run truncated by the time budget]' : ''),
  )
  console.log(
    JSON.stringify({
      bench: 'reconstruct',
      turns_per_session: TURNS,
      first_prompt_tokens: FIRST_PROMPT_TOKENS,
      tokens_per_turn: RESPONSE_TOKENS + INTERSTITIAL_TOKENS,
      response_tokens: RESPONSE_TOKENS,
      exact: scaling,
      time_ratio_1000_vs_100: {
        tolerant: ratio('tolerant'),
        strict: ratio('strict'),
        per_request: ratio('per_request'),
      },
      tolerant_vs_strict_speedup: speedup,
      peer_prompt_tokens_per_s: PEER_PROMPT_TOKENS_PER_S,
      tolerant_vs_peer: peerFactor,
      qwen3_no_think_100: { bound_64: noThink, bound_512: noThinkWide },
      session_length_scaling: lengthScaling,
      truncated,
      total_ms: round(performance.now() - started),
    }),
  )
}

main()
