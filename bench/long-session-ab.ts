/**
 * @module
 * `npm run bench:long-session-ab -- --bundle before=/tmp/a/index.js --bundle after=current --turns 1000
 * --result-tokens 150`: the per-call figures of `bench:long-session` (issue #15's session, `--calls-only`)
 * for two or more edge bundles in one run. Each bundle runs in a Miniflare (workerd) of its own against one
 * stand-in engine; every turn sends the same body to each bundle's session, in rotated order, so the
 * variants are measured seconds apart on the same (shared, loaded) machine. Per variant: Server-Timing
 * `capture` p50 over the first / last 10 and last 100 turns, and workerd CPU per call (that variant's
 * process only, from /proc), the median over turns of each variant's CPU minus the first's on the same
 * turn (the session's growth cancels out), and `capture_retries` (summed from Server-Timing, for builds that
 * send one). Flags: `--bundle NAME=PATH` (`current` bundles this tree), `--turns` (1000), `--result-tokens` (150),
 * `--persist-dir` (where the sessions' SQLite lives: the temp dir, or `/dev/shm` to take the disk out; given once per
 * bundle, in order, it differs per variant: `--bundle a=X --bundle b=X --persist-dir /tmp --persist-dir /dev/shm`).
 *
 * Last line: one JSON object with the figures per variant and each variant's ratio to the first.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from '../scripts/lib/cli-args.ts'
import { startEngine } from '../engine/server.ts'
import { bundleWorker, type MiniflareEdge, startMiniflareEdge } from '../scripts/lib/miniflare-edge.ts'
import { cpuMs, workerdPids } from './lib/proc-stats.ts'
import { type AgentAnswer, agentScript, appendTurn, firstMessages, TOOLS } from './lib/long-session-agent.ts'
import { upperMedian as median } from './lib/stats.ts'

const { values } = parseArgs({
  options: {
    bundle: { type: 'string', multiple: true, default: [] },
    turns: { type: 'string', default: '1000' },
    'result-tokens': { type: 'string', default: '150' },
    /** Where Miniflare keeps the sessions' SQLite (default the temp dir, on disk here; `/dev/shm` takes fsync out). */
    'persist-dir': { type: 'string', multiple: true, default: [] },
  },
})
const TURNS = Number(values.turns)
const RESULT_TOKENS = Number(values['result-tokens'])
const ADMIN = 'bench-admin-token'
const specs = (values.bundle ?? []).map((entry) => {
  const at = entry.indexOf('=')
  if (at <= 0) throw new Error(`--bundle wants NAME=PATH (or NAME=current), got ${entry}`)
  return { name: entry.slice(0, at), path: entry.slice(at + 1) }
})
if (specs.length < 2) throw new Error('give at least two --bundle NAME=PATH')

const round = (value: number, digits = 2) => Math.round(value * 10 ** digits) / 10 ** digits

function parseTiming(header: string | null): Record<string, number> {
  const out: Record<string, number> = {}
  for (const part of (header ?? '').split(',')) {
    const match = /^\s*(\w+);dur=([\d.]+)/.exec(part)
    if (match) out[match[1] as string] = Number(match[2])
  }
  return out
}

interface Variant {
  name: string
  edge: MiniflareEdge
  pids: number[]
  token: string
  persistTo: string
  capture: number[]
  cpu: number[]
  retries: number
}

const made: string[] = []
const variants: Variant[] = []
const engine = await startEngine({ seed: 3, policy: 'script', script: agentScript(TURNS), maxModelLen: 1_048_576 })
try {
  const persistDirs = values['persist-dir'] ?? []
  for (const [index, spec] of specs.entries()) {
    const path = spec.path === 'current' ? bundleWorker() : spec.path
    if (spec.path === 'current') made.push(path)
    const persistTo = mkdtempSync(join(persistDirs[index] ?? persistDirs[0] ?? tmpdir(), 'rollgate-bench-long-ab-'))
    const before = new Set(workerdPids())
    const edge = await startMiniflareEdge({
      persistTo,
      scriptPath: path,
      vars: { ROLLGATE_ADMIN_TOKEN: ADMIN, ROLLGATE_SIGNING_KEY: 'k', ROLLGATE_UPSTREAM_URL: engine.url },
      onLog: () => {},
    })
    const pids = workerdPids().filter((pid) => !before.has(pid))
    const created = await fetch(`${edge.url}/v1/sessions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
      body: '{}',
    })
    const { token } = (await created.json()) as { token: string }
    variants.push({ name: spec.name, edge, pids, token, persistTo, capture: [], cpu: [], retries: 0 })
  }
  const messages = firstMessages()
  const started = performance.now()
  for (let turn = 0; turn < TURNS; turn++) {
    const body = JSON.stringify({ model: 'bench', messages, tools: TOOLS })
    let answer: AgentAnswer | null = null
    for (let k = 0; k < variants.length; k++) {
      const variant = variants[(turn + k) % variants.length] as Variant
      const cpuBefore = cpuMs(variant.pids)
      const response = await fetch(`${variant.edge.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${variant.token}`, 'content-type': 'application/json' },
        body,
      })
      const text = await response.text()
      variant.cpu.push(cpuMs(variant.pids) - cpuBefore)
      if (response.status !== 200) throw new Error(`${variant.name} turn ${turn}: ${response.status} ${text.slice(0, 500)}`)
      const timing = parseTiming(response.headers.get('server-timing'))
      variant.capture.push(timing.capture ?? 0)
      variant.retries += timing.capture_retries ?? 0
      answer ??= JSON.parse(text) as AgentAnswer
    }
    appendTurn(messages, answer as AgentAnswer, turn, RESULT_TOKENS)
    if ((turn + 1) % 100 === 0) {
      const parts = variants.map((v) => `${v.name} capture p50 last10 ${median(v.capture.slice(-10)).toFixed(2)} ms`)
      console.log(`turn ${turn + 1} (body ${Buffer.byteLength(body)} B): ${parts.join(', ')}`)
    }
  }
  const figures = variants.map((v) => ({
    name: v.name,
    capture_ms_first10_p50: round(median(v.capture.slice(0, 10))),
    capture_ms_last10_p50: round(median(v.capture.slice(-10))),
    capture_ms_last100_p50: round(median(v.capture.slice(-100))),
    workerd_cpu_ms_per_call_first10_p50: round(median(v.cpu.slice(0, 10))),
    workerd_cpu_ms_per_call_last10_p50: round(median(v.cpu.slice(-10))),
    workerd_cpu_ms_per_call_last100_p50: round(median(v.cpu.slice(-100))),
    workerd_cpu_ms_per_call_last100_mean: round(v.cpu.slice(-100).reduce((a, b) => a + b, 0) / Math.min(100, v.cpu.length)),
    capture_retries: v.retries,
  }))
  const first = figures[0] as (typeof figures)[number]
  // Turn by turn, each variant's CPU minus the first's on the same body: the session's growth cancels out.
  const base = variants[0] as Variant
  const paired = (v: Variant, from: number) =>
    round(median(v.cpu.slice(from).map((ms, i) => ms - (base.cpu[from < 0 ? base.cpu.length + from + i : from + i] as number))), 3)
  const pairedRange = (v: Variant, from: number, to: number) =>
    round(median(v.cpu.slice(from, to).map((ms, i) => ms - (base.cpu[from + i] as number))), 3)
  const pairedDelta = Object.fromEntries(
    variants.slice(1).map((v) => [v.name, { first100: pairedRange(v, 0, 100), last300: paired(v, -300), last100: paired(v, -100) }]),
  )
  const ratio = (key: keyof typeof first) =>
    Object.fromEntries(figures.slice(1).map((f) => [f.name, round((f[key] as number) / ((first[key] as number) || 1), 3)]))
  console.log(
    JSON.stringify({
      summary: {
        capture_ms_last10_p50: Object.fromEntries(figures.map((f) => [f.name, f.capture_ms_last10_p50])),
        workerd_cpu_ms_per_call_last100_mean: Object.fromEntries(figures.map((f) => [f.name, f.workerd_cpu_ms_per_call_last100_mean])),
        ratio_capture_last100_p50: ratio('capture_ms_last100_p50'),
        ratio_cpu_last100_mean: ratio('workerd_cpu_ms_per_call_last100_mean'),
        cpu_ms_per_call_minus_first_same_turn_median: pairedDelta,
      },
      turns: TURNS,
      result_tokens: RESULT_TOKENS,
      seconds: round((performance.now() - started) / 1000, 1),
      load_average_1m: round(loadavg()[0] ?? 0),
      persist_dirs: specs.map((_, index) => persistDirs[index] ?? persistDirs[0] ?? tmpdir()),
      variants: figures,
    }),
  )
} finally {
  for (const variant of variants) {
    await variant.edge.stop().catch(() => {})
    rmSync(variant.persistTo, { recursive: true, force: true })
  }
  await engine.close()
  for (const path of made) rmSync(join(path, '..'), { recursive: true, force: true })
}
