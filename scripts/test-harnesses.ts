/**
 * @module
 * `npm run test:harnesses`: every harness × API variant runs a real rollout of the multi-step task
 * (`tasks/fix-stats`) through runner → edge → engine, and each run is checked (issue #9.3).
 *
 * ```sh
 * npm run test:harnesses                                  # all 16 variants, one rollout each
 * npm run test:harnesses -- --only pi,qwen-code,codex     # variant ids or harness names
 * ```
 * Flags: `--timeout-s` (per rollout, default 600), `--keep` (keep the runner's session dirs, the edge state
 * and per variant `<variant>.json` with the records, served calls and both trajectories; path printed at the
 * end), `--verbose` (wrangler and runner output).
 *
 * Once: the pinned CLIs the variants need are installed into the per-host cache (`runner/harness/install.ts`,
 * timed); the stand-in engine with the `solver` policy behind an engine tap (records every generation it
 * serves), each answer 400 ms late so that every streamed answer carries the edge's keep-alives (250 ms); the edge under `wrangler dev`; the real runner (`rollgate runner --runtime local`: bubblewrap
 * sandboxes that reach only the edge; inference tunnelled edge → runner → tap → engine). Then per variant,
 * one after the other (so the engine's calls belong to one session): a `TaskRequest` (the fix-stats task,
 * `agent: {harness, settings: {variant}}`, 1 sample, `test_on_output`) submitted to the edge, waited for,
 * and checked (`scripts/lib/rollout-checks.ts`):
 * - solved: the session's reward is 1;
 * - the generation calls the engine served for it equal the completions captured, each with the engine's
 *   exact prompt ids, sampled ids and logprobs; every capture `ok` (the streamed answers were accepted);
 * - `prefix_merging` (the default `exact` preset, and again under `tolerant`): later segments of a chain carry
 *   a named break reason, branches are labelled; under `exact` only break reasons the harness is known to force
 *   (`ALLOWED_EXACT_BREAKS`: none today);
 * - every mask-1 token and logprob is exactly what the engine sampled.
 * Prints a matrix and the totals (both merge ratios: continued ÷ completions and continued ÷ mergeable turns,
 * docs/harness-matrix.md); exit 1 when any variant fails or, for the whole matrix, the totals miss ≥ 5.4× fewer
 * sequences or ≥ 95 % of mergeable turns merged. The last stdout line is one JSON object
 * `{variant: {solved, calls, captured, traces_per_request, traces_prefix_merging, merged_turn_ratio,
 * mergeable_merged_ratio, mismatches, breaks, …_tolerant, wall_s}}`.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startEngine } from '../engine/server.ts'
import { cliVariants } from '../runner/harness/index.ts'
import { ensureHarnessInstalled } from '../runner/harness/install.ts'
import type { Trajectory } from '../src/contract/trajectory.ts'
import { loadTaskFile } from '../tasks/load.ts'
import { numberOption, parseArgs, usageError } from './lib/cli-args.ts'
import { startEngineTap } from './lib/engine-tap.ts'
import { REPO_ROOT, startEdge } from './lib/processes.ts'
import {
  type CapturedRecord,
  checkSession,
  MATRIX_TARGETS,
  matrixTotals,
  type SessionCheck,
  totalsProblems,
  unexpectedBreaks,
} from './lib/rollout-checks.ts'

const ADMIN_TOKEN = 'harness-matrix-admin'
const RUNNER_TOKEN = 'harness-matrix-runner'
const TASK_FILE = join(REPO_ROOT, 'tasks/fix-stats/task.json')

interface Options {
  only: string[] | null
  timeoutMs: number
  keep: boolean
  verbose: boolean
}

const ARGS = {
  options: {
    only: { type: 'string' },
    'timeout-s': { type: 'string', default: '600' },
    keep: { type: 'boolean', default: false },
    verbose: { type: 'boolean', default: false },
  },
} as const

function parseOptions(argv: string[]): Options {
  const { values } = parseArgs({ ...ARGS, args: argv })
  const timeoutS = numberOption(ARGS, 'timeout-s', values['timeout-s'], { min: 1 })
  return {
    only: values.only === undefined ? null : values.only.split(',').filter(Boolean),
    timeoutMs: timeoutS * 1000,
    keep: values.keep,
    verbose: values.verbose,
  }
}

interface VariantResult extends Omit<SessionCheck, 'problems'> {
  /** The same session under the `tolerant` merge preset (`max_context_drift_tokens` 64). */
  traces_tolerant: number
  merged_turn_ratio_tolerant: number | null
  mergeable_merged_ratio_tolerant: number | null
  /** The checks under `tolerant`, for the totals. */
  tolerant: SessionCheck | null
  breaks_tolerant: string[]
  variant: string
  harness: string
  api: string
  solved: boolean
  reward: number | null
  session_status: string
  wall_s: number
  problems: string[]
  session_id: string | null
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

async function main(): Promise<number> {
  const options = parseOptions(process.argv.slice(2))
  const all = cliVariants()
  const matches = (entry: (typeof all)[number], name: string) =>
    entry.variant.id === name || entry.harness.name === name || entry.harness.name.replaceAll('_', '-') === name
  const variants = options.only ? all.filter((entry) => options.only!.some((name) => matches(entry, name))) : all
  if (variants.length === 0)
    usageError(ARGS, `--only: no variant matches ${options.only?.join(',')} (known: ${all.map((e) => e.variant.id).join(', ')})`)

  // 1. The pinned CLIs, installed once per host.
  const installs: Record<string, { source: string; seconds: number }> = {}
  for (const pkg of new Map(variants.map(({ harness }) => [harness.pkg!.name, harness.pkg!])).values()) {
    const started = Date.now()
    const installed = await ensureHarnessInstalled(pkg, { log: (line) => console.log(line) })
    installs[`${pkg.name}@${pkg.version}`] = { source: installed.source, seconds: Math.round((Date.now() - started) / 100) / 10 }
  }
  console.log(
    `harness CLIs: ${Object.entries(installs)
      .map(([spec, i]) => `${spec} (${i.source}, ${i.seconds} s)`)
      .join(', ')}`,
  )

  // 2. Engine (solver policy) behind a tap, the edge, the runner.
  const work = mkdtempSync(join(tmpdir(), 'rollgate-harness-matrix-'))
  // Every generation outlasts the edge's heartbeat, so every harness also parses the keep-alives of its stream.
  const engine = await startEngine({ port: 0, seed: 7, maxModelLen: 262_144, policy: 'solver', latencyMs: 400 })
  const tap = await startEngineTap(engine.url)
  const edge = await startEdge({
    persistTo: join(work, 'edge-state'),
    verbose: options.verbose,
    vars: {
      ROLLGATE_ADMIN_TOKEN: ADMIN_TOKEN,
      ROLLGATE_SIGNING_KEY: 'harness-matrix-signing-key',
      ROLLGATE_UPSTREAM_URL: tap.url,
      ROLLGATE_RUNNER_TOKEN: RUNNER_TOKEN,
      ROLLGATE_HEARTBEAT_MS: '250',
    },
  })
  const runnerLog = join(work, 'runner.log')
  const runner = startRunner(edge.url, tap.url, work, runnerLog, options.verbose)
  let interrupted = false
  let cleaning: Promise<void> | null = null
  // Idempotent: the normal end and Ctrl-C / SIGTERM both end everything this script started.
  const cleanup = () => {
    cleaning ??= (async () => {
      await stopRunner(runner)
      await tap.close()
      await edge.stop()
      await engine.close()
      if (!options.keep) rmSync(work, { recursive: true, force: true })
    })()
    return cleaning
  }
  const onSignal = () => {
    interrupted = true
    console.log('\ninterrupted: stopping the runner, the edge and the engine')
    void cleanup().finally(() => process.exit(130))
  }
  process.once('SIGINT', onSignal)
  process.once('SIGTERM', onSignal)

  const admin = async (path: string, init: RequestInit = {}) => {
    const response = await fetch(`${edge.url}${path}`, {
      ...init,
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
    })
    const text = await response.text()
    if (!response.ok) throw new Error(`${init.method ?? 'GET'} ${path}: ${response.status} ${text.slice(0, 500)}`)
    return JSON.parse(text) as Record<string, unknown>
  }

  const results: VariantResult[] = []
  try {
    await waitForRunner(admin, runner, runnerLog)
    console.log(`engine ${engine.url} (tap ${tap.url})  edge ${edge.url}  runner log ${runnerLog}\n`)
    printHeader()
    for (const { harness, variant } of variants) {
      if (interrupted) break
      const result = await runVariant(admin, tap, harness.name, variant.id, variant.api, options.timeoutMs, options.keep ? work : null)
      results.push(result)
      printRow(result)
    }
  } finally {
    if (!interrupted) {
      process.off('SIGINT', onSignal)
      process.off('SIGTERM', onSignal)
    }
    await cleanup()
  }

  const failed = results.filter((r) => !passed(r))
  // Totals over the sessions, default exact preset and tolerant; the targets bind when the whole matrix ran.
  const totals = matrixTotals(results)
  const totalsTolerant = matrixTotals(results.flatMap((r) => (r.tolerant ? [r.tolerant] : [])))
  const fullMatrix = options.only === null && !interrupted && results.length === variants.length
  const missed = fullMatrix ? totalsProblems(totals) : []
  const describe = (t: typeof totals) =>
    `${t.traces_prefix_merging} sequences (${t.compression.toFixed(2)}× fewer), ${t.turns_continued}/${t.turns_mergeable} mergeable turns merged (${(t.mergeable_merged_ratio * 100).toFixed(1)} %; continued ÷ completions ${(t.merged_turn_ratio * 100).toFixed(1)} %), ${t.mismatches} mask-1 mismatches`
  console.log(
    `\ntotals: ${totals.calls} calls → per_request ${totals.traces_per_request} sequences; prefix_merging exact: ${describe(totals)}`,
  )
  console.log(`        tolerant: ${describe(totalsTolerant)}`)
  if (fullMatrix)
    console.log(
      missed.length === 0
        ? `targets met (≥ ${MATRIX_TARGETS.compression}× fewer sequences, ≥ ${MATRIX_TARGETS.mergeableMergedRatio * 100} % of mergeable turns merged, exact preset)`
        : `TARGETS MISSED: ${missed.join('; ')}`,
    )
  for (const r of failed) {
    console.log(`\n${r.variant} FAILED (session ${r.session_id ?? '-'}, ${r.session_status}, reward ${r.reward}):`)
    for (const problem of r.problems.slice(0, 8)) console.log(`  - ${problem}`)
  }
  if (options.keep) console.log(`\nkept: ${work} (runner sessions under sessions/, edge state under edge-state/)`)
  console.log(
    `\n${results.length - failed.length}/${results.length} variants passed${interrupted ? ' (interrupted)' : ''}; total ${results.reduce((s, r) => s + r.wall_s, 0).toFixed(0)} s of rollouts`,
  )
  console.log(
    JSON.stringify(
      Object.fromEntries(
        results.map((r) => [
          r.variant,
          {
            solved: r.solved,
            calls: r.calls,
            captured: r.captured,
            traces_per_request: r.traces_per_request,
            traces_prefix_merging: r.traces_prefix_merging,
            merged_turn_ratio: r.merged_turn_ratio,
            mergeable_merged_ratio: r.mergeable_merged_ratio,
            mismatches: r.mismatches,
            breaks: r.breaks,
            traces_prefix_merging_tolerant: r.traces_tolerant,
            merged_turn_ratio_tolerant: r.merged_turn_ratio_tolerant,
            mergeable_merged_ratio_tolerant: r.mergeable_merged_ratio_tolerant,
            wall_s: r.wall_s,
          },
        ]),
      ),
    ),
  )
  return failed.length === 0 && missed.length === 0 && results.length === variants.length ? 0 : 1
}

function passed(r: VariantResult): boolean {
  return r.solved && r.problems.length === 0 && r.mismatches === 0 && r.calls === r.captured && r.calls > 0
}

function startRunner(edgeUrl: string, upstream: string, work: string, logPath: string, verbose: boolean): ChildProcess {
  const log = openSync(logPath, 'w')
  const child = spawn(
    process.execPath,
    [
      join(REPO_ROOT, 'cli/rollgate.ts'),
      'runner',
      ...['--edge', edgeUrl, '--token', RUNNER_TOKEN, '--upstream', upstream, '--runtime', 'local'],
      ...['--state-dir', join(work, 'runner-state'), '--work-dir', join(work, 'sessions'), '--runner-id', 'harness-matrix'],
      ...['--max-init', '1', '--max-run', '1', '--max-postrun', '1', '--status-port', '0', '--json-logs'],
    ],
    { cwd: REPO_ROOT, stdio: ['ignore', verbose ? 'inherit' : log, verbose ? 'inherit' : log], detached: true },
  )
  closeSync(log)
  return child
}

async function stopRunner(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) return
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  process.kill(-child.pid, 'SIGTERM')
  const killed = await Promise.race([exited.then(() => true), sleep(15_000).then(() => false)])
  if (!killed) {
    try {
      process.kill(-child.pid, 'SIGKILL')
    } catch {}
    await exited
  }
}

async function waitForRunner(
  admin: (path: string) => Promise<Record<string, unknown>>,
  runner: ChildProcess,
  logPath: string,
): Promise<void> {
  const deadline = Date.now() + 60_000
  while (Date.now() < deadline) {
    if (runner.exitCode !== null) throw new Error(`runner exited ${runner.exitCode}:\n${readFileSync(logPath, 'utf8').slice(-2000)}`)
    const status = (await admin('/rollout/status')) as { nodes?: { nodes?: { healthy?: boolean }[] } }
    if (status.nodes?.nodes?.some((node) => node.healthy !== false)) return
    await sleep(250)
  }
  throw new Error(`runner did not register within 60 s:\n${readFileSync(logPath, 'utf8').slice(-2000)}`)
}

async function runVariant(
  admin: (path: string, init?: RequestInit) => Promise<Record<string, unknown>>,
  tap: Awaited<ReturnType<typeof startEngineTap>>,
  harness: string,
  variant: string,
  api: string,
  timeoutMs: number,
  dumpDir: string | null,
): Promise<VariantResult> {
  const empty: VariantResult = {
    variant,
    harness,
    api,
    solved: false,
    reward: null,
    session_status: 'not run',
    wall_s: 0,
    calls: 0,
    captured: 0,
    streamed: 0,
    traces_per_request: 0,
    traces_prefix_merging: 0,
    merged_turn_ratio: null,
    turns_mergeable: 0,
    turns_continued: 0,
    mergeable_merged_ratio: null,
    traces_tolerant: 0,
    merged_turn_ratio_tolerant: null,
    mergeable_merged_ratio_tolerant: null,
    tolerant: null,
    breaks_tolerant: [],
    mismatches: 0,
    breaks: [],
    branches: {},
    problems: [],
    session_id: null,
  }
  const task = loadTaskFile(TASK_FILE) as Record<string, unknown>
  const taskId = `matrix-${variant}-${Date.now().toString(36)}`
  Object.assign(task, {
    task_id: taskId,
    num_samples: 1,
    timeout_seconds: Math.ceil(timeoutMs / 1000),
    agent: { harness, settings: { variant } },
    metadata: { ...(task.metadata as object), harness, variant },
  })
  const firstCall = tap.calls.length
  const started = Date.now()
  try {
    await admin('/rollout/task/submit', { method: 'POST', body: JSON.stringify(task) })
    type Status = { status: string; sessions: { session_id: string; status: string; reward: number | null }[] }
    let status: Status | null = null
    while (Date.now() - started < timeoutMs + 60_000) {
      status = (await admin(`/rollout/task/${taskId}?results=false`)) as unknown as Status
      if (status && status.status !== 'running') break
      await sleep(500)
    }
    const wall_s = Math.round((Date.now() - started) / 100) / 10
    const session = status?.sessions[0]
    if (!status || status.status === 'running' || !session)
      return { ...empty, wall_s, session_status: 'timed out', problems: ['rollout did not finish'] }
    const records: CapturedRecord[] = []
    for (let after: number | null = -1; after !== null; ) {
      const page = (await admin(`/v1/sessions/${session.session_id}/completions?after_seq=${after}`)) as {
        completions: CapturedRecord[]
        next_after_seq: number | null
      }
      records.push(...page.completions)
      after = page.next_after_seq
    }
    const trajectory = async (builder: string) =>
      (await admin(`/v1/sessions/${session.session_id}/trajectory?builder=${builder}`)) as unknown as Trajectory
    const perRequest = await trajectory('per_request')
    const prefixMerging = await trajectory('prefix_merging')
    const tolerant = await trajectory(`prefix_merging&config=${encodeURIComponent(JSON.stringify({ preset: 'tolerant' }))}`)
    const served = tap.calls.slice(firstCall)
    const check = checkSession({ served, records, perRequest, prefixMerging })
    const checkTolerant = checkSession({ served, records, perRequest, prefixMerging: tolerant })
    check.problems.push(
      ...checkTolerant.problems.filter((problem) => !check.problems.includes(problem)).map((p) => `tolerant preset: ${p}`),
    )
    if (dumpDir)
      writeFileSync(join(dumpDir, `${variant}.json`), JSON.stringify({ session, records, served, perRequest, prefixMerging, tolerant }))
    const problems = [...check.problems]
    if (session.reward !== 1) problems.unshift(`reward ${session.reward} (session ${session.status})`)
    if (records.length > 0 && !records.some((record) => record.stream)) problems.push('no streamed call captured')
    // Under the default exact preset, a break must be one the harness is known to force (docs/harness-matrix.md).
    problems.push(...unexpectedBreaks(harness, check.breaks))
    return {
      ...empty,
      ...check,
      traces_tolerant: checkTolerant.traces_prefix_merging,
      merged_turn_ratio_tolerant: checkTolerant.merged_turn_ratio,
      mergeable_merged_ratio_tolerant: checkTolerant.mergeable_merged_ratio,
      tolerant: checkTolerant,
      breaks_tolerant: checkTolerant.breaks,
      problems,
      solved: session.reward === 1,
      reward: session.reward,
      session_status: session.status,
      wall_s,
      session_id: session.session_id,
    }
  } catch (error) {
    return {
      ...empty,
      wall_s: Math.round((Date.now() - started) / 100) / 10,
      session_status: 'error',
      problems: [(error as Error).message],
    }
  }
}

const COLUMNS: [string, number][] = [
  ['variant', 25],
  ['api', 17],
  ['solved', 7],
  ['calls', 6],
  ['captured', 9],
  ['streamed', 9],
  ['per_req', 8],
  ['p_merge', 8],
  ['merged', 7],
  ['of_mrg', 7],
  ['breaks', 32],
  ['tolerant', 14],
  ['breaks_tol', 18],
  ['mismatch', 9],
  ['wall_s', 7],
  ['ok', 3],
]

const percent = (ratio: number | null) => (ratio === null ? '-' : `${Math.round(ratio * 100)}%`)

function printHeader() {
  console.log(COLUMNS.map(([name, width]) => name.padEnd(width)).join(''))
}

function printRow(r: VariantResult) {
  const cells = [
    r.variant,
    r.api,
    r.solved ? 'yes' : 'NO',
    String(r.calls),
    String(r.captured),
    String(r.streamed),
    String(r.traces_per_request),
    String(r.traces_prefix_merging),
    percent(r.merged_turn_ratio),
    percent(r.mergeable_merged_ratio),
    r.breaks.length ? [...new Set(r.breaks)].join('+') : '-',
    `${r.traces_tolerant}/${percent(r.merged_turn_ratio_tolerant)}/${percent(r.mergeable_merged_ratio_tolerant)}`,
    r.breaks_tolerant.length ? [...new Set(r.breaks_tolerant)].join('+') : '-',
    String(r.mismatches),
    r.wall_s.toFixed(1),
    passed(r) ? '✓' : '✗',
  ]
  console.log(cells.map((cell, i) => cell.padEnd(COLUMNS[i]![1])).join(''))
}

process.exitCode = await main()
