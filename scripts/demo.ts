/**
 * @module
 * `npm run demo`: a real rollout on one machine. Starts the stand-in engine (real Qwen3 tokenizer and chat
 * template, the `solver` policy that fixes the `fix-stats` task through a harness's own tools), the edge
 * (`wrangler dev`, local persistence in `.state/demo`), and a local `rollgate runner` (bubblewrap sandbox, its
 * state and session dirs in `.state/demo/runner`,
 * inference tunnelled edge → runner → engine); submits `tasks/fix-stats` with N samples on the default harness
 * (`--harness`, `--samples`); shows sessions per stage live; prints a summary table (status, reward, model
 * calls, traces per builder, merged-turn ratio, compression vs per_request); writes slime / NeMo Gym / SFT
 * JSONL exports to `./out/`; shuts everything down, also on Ctrl-C.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdirSync, writeFileSync } from 'node:fs'
import { isAbsolute, join, relative, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs, usageError } from './lib/cli-args.ts'
import { EdgeClient } from '../cli/lib/edge-client.ts'
import { watchTask } from '../cli/lib/task-watch.ts'
import { startEngine } from '../engine/server.ts'
import { DEFAULT_HARNESS, getHarness } from '../runner/harness/index.ts'
import { ensureHarnessInstalled } from '../runner/harness/install.ts'
import { HARNESS_NAMES } from '../src/contract/harness-names.ts'
import type { SessionResult, Trajectory } from '../src/contract/trajectory.ts'
import { toJsonl, toNemoGymRows, toSftRows, toSlimeSamples } from '../src/reconstruct/index.ts'
import { loadTaskFile } from '../tasks/load.ts'
import { REPO_ROOT, startEdge } from './lib/processes.ts'

const ARGS = {
  options: {
    harness: { type: 'string', default: DEFAULT_HARNESS },
    samples: { type: 'string', default: '4' },
    out: { type: 'string', default: 'out' },
    seed: { type: 'string', default: '17' },
    'persist-to': { type: 'string', default: '.state/demo' },
    'max-run': { type: 'string', default: '2' },
    'timeout-seconds': { type: 'string', default: '900' },
    verbose: { type: 'boolean', default: false },
  },
} as const
const { values } = parseArgs(
  ARGS,
  `A real rollout on this machine: the stand-in engine, the edge (wrangler dev) and a local runner; --samples
sessions of --harness solve tasks/fix-stats; then a summary table, and slime / NeMo Gym / SFT exports in --out.
Everything it starts stops when it ends (also on Ctrl-C).
--harness: ${HARNESS_NAMES.join(', ')}`,
)
if (!(HARNESS_NAMES as readonly string[]).includes(values.harness))
  usageError(ARGS, `--harness: unknown harness "${values.harness}" (known: ${HARNESS_NAMES.join(', ')})`)
if (!/^\d+$/.test(values.samples) || Number(values.samples) < 1 || Number(values.samples) > 32)
  usageError(ARGS, `--samples must be an integer from 1 to 32, got "${values.samples}"`)

const CLI = fileURLToPath(new URL('../cli/rollgate.ts', import.meta.url))
const TASK_FILE = join(REPO_ROOT, 'tasks/fix-stats/task.json')
const samples = Number(values.samples)
const outDir = resolve(values.out ?? 'out')
const adminToken = `demo-admin-${randomBytes(6).toString('hex')}`
const runnerToken = `demo-runner-${randomBytes(6).toString('hex')}`
const runnerId = 'demo-runner'
const started = Date.now()
const say = (line: string) => process.stdout.write(`${line}\n`)
/**
 * A path as the user can open it from where they typed the command: `npm run demo` runs in the repo root whatever
 * the shell's directory (npm's `INIT_CWD`), so a path relative to the root was wrong from a subdirectory.
 */
function shown(path: string): string {
  const rel = relative(process.env.INIT_CWD ?? process.cwd(), path)
  return rel && !rel.startsWith('..') && !isAbsolute(rel) ? rel : path
}

let runner: ChildProcess | null = null
let stopping: Promise<void> | null = null
const cleanups: (() => Promise<void>)[] = []

/** Stop everything that was started (runner first, so its sessions end before the edge does). Idempotent. */
function shutdown(): Promise<void> {
  stopping ??= (async () => {
    if (runner && runner.exitCode === null && runner.signalCode === null) {
      const child = runner
      const exited = new Promise<void>((done) => child.once('exit', () => done()))
      child.kill('SIGTERM') // drain
      const hard = setTimeout(() => child.kill('SIGTERM'), 5_000) // second signal: cancel
      const kill = setTimeout(() => child.kill('SIGKILL'), 15_000)
      await exited
      clearTimeout(hard)
      clearTimeout(kill)
    }
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {})
  })()
  return stopping
}

let interrupted = false
const onSignal = () => {
  if (interrupted) process.exit(130)
  interrupted = true
  process.stderr.write('\ninterrupted: stopping the runner, the edge and the engine…\n')
  void shutdown().then(() => process.exit(130))
}
process.on('SIGINT', onSignal)
process.on('SIGTERM', onSignal)

function pad(text: string, width: number): string {
  return text.length >= width ? text : text + ' '.repeat(width - text.length)
}

async function main(): Promise<number> {
  const harness = getHarness(values.harness ?? DEFAULT_HARNESS)
  if (harness.pkg) {
    const cli = await ensureHarnessInstalled(harness.pkg)
    say(`harness ${harness.name} ${harness.pkg.version}  (${cli.source}: ${cli.bin})`)
  }

  const engine = await startEngine({ seed: Number(values.seed), policy: 'solver', maxModelLen: 262_144 })
  cleanups.push(() => engine.close())
  say(`engine  ${engine.url}  (stand-in vLLM: Qwen3 tokenizer + chat template, solver policy)`)

  const persistTo = resolve(values['persist-to'] ?? '.state/demo')
  mkdirSync(persistTo, { recursive: true })
  const edge = await startEdge({
    persistTo,
    verbose: values.verbose,
    vars: {
      ROLLGATE_ADMIN_TOKEN: adminToken,
      ROLLGATE_SIGNING_KEY: randomBytes(16).toString('hex'),
      ROLLGATE_RUNNER_TOKEN: runnerToken,
      ROLLGATE_UPSTREAM_URL: engine.url,
      ROLLGATE_RUNNER_HEARTBEAT_MS: '2000',
    },
  })
  cleanups.push(() => edge.stop())
  say(`edge    ${edge.url}  (wrangler dev: workerd, Durable Objects with SQLite, R2 in ${persistTo})`)

  // The runner's state (its per-runner secret, session dirs with their logs) lives next to the edge's.
  const stateDir = join(persistTo, 'runner')
  const maxRun = values['max-run'] ?? '2'
  runner = spawn(
    process.execPath,
    [
      CLI,
      'runner',
      ...['--edge', edge.url, '--token', runnerToken, '--upstream', engine.url, '--runtime', 'local'],
      ...['--max-init', maxRun, '--max-run', maxRun, '--max-postrun', maxRun, '--ready-buffer', maxRun],
      ...['--state-dir', stateDir, '--runner-id', runnerId, '--json-logs'],
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  )
  let runnerLog = ''
  runner.stderr?.on('data', (chunk: Buffer) => {
    runnerLog = (runnerLog + chunk.toString()).slice(-200_000)
    if (values.verbose) process.stderr.write(chunk)
  })
  cleanups.push(async () => {
    mkdirSync(outDir, { recursive: true })
    writeFileSync(join(outDir, 'runner.log'), runnerLog)
  })

  const client = new EdgeClient({ edge: edge.url, adminToken })
  const deadline = Date.now() + 60_000
  for (;;) {
    const overview = await client.rolloutStatus()
    if (overview.nodes.nodes.some((node) => node.node_id === runnerId && node.healthy)) break
    if (runner.exitCode !== null) throw new Error(`the runner exited (${runner.exitCode}):\n${runnerLog.slice(-3000)}`)
    if (Date.now() > deadline) throw new Error(`the runner did not register within 60 s:\n${runnerLog.slice(-3000)}`)
    await new Promise((done) => setTimeout(done, 200))
  }
  say(`runner  ${runnerId}  (local bubblewrap runtime, model calls tunnelled edge → runner → engine)`)

  const task = loadTaskFile(TASK_FILE)
  const taskId = `demo-fix-stats-${new Date()
    .toISOString()
    .replace(/[-:T.Z]/g, '')
    .slice(0, 14)}`
  await client.submitTask({
    ...task,
    task_id: taskId,
    num_samples: samples,
    agent: { ...task.agent, harness: harness.name },
    upstream: { route: 'runner' },
    metadata: { ...task.metadata, group_id: taskId },
  })
  say(`task    ${taskId}: ${samples} × ${harness.name} on fix-stats (a failing pytest in a small Python package)\n`)
  const status = await watchTask(client, taskId, { timeoutMs: Number(values['timeout-seconds']) * 1000 })

  // Summary: per session, from the task's results (prefix_merging, the task's builder) and per_request rebuilt.
  const results = status.results as SessionResult[]
  // merged: continued turns ÷ completions (at most (n−1)/n); of mergeable: continued ÷ turns after the first of
  // each conversation (1 = every agent branch / side call is one trace). docs/harness-matrix.md.
  const rows: string[][] = [
    ['session', 'status', 'reward', 'calls', 'per_request', 'prefix_merging', 'merged', 'of mergeable', 'compression'],
  ]
  const slime: string[] = []
  const nemo: string[] = []
  const sft: string[] = []
  for (const [index, result] of results.entries()) {
    const perRequest = (await client.json<Trajectory>(
      'GET',
      `/v1/sessions/${result.session_id}/trajectory?builder=per_request`,
    )) as Trajectory
    const merged = result.trajectory
    const stats = merged.metadata.reconstruction_stats as
      | { merged_turn_ratio?: number; mergeable_merged_ratio?: number; completions_total?: number }
      | undefined
    const calls = perRequest.traces.length
    const reward = merged.traces[0]?.reward ?? null
    rows.push([
      result.session_id.slice(0, 16),
      result.status,
      reward === null ? '—' : String(reward),
      String(calls),
      String(perRequest.traces.length),
      String(merged.traces.length),
      stats?.merged_turn_ratio === undefined ? '—' : `${Math.round(stats.merged_turn_ratio * 100)} %`,
      stats?.mergeable_merged_ratio === undefined ? '—' : `${Math.round(stats.mergeable_merged_ratio * 100)} %`,
      merged.traces.length === 0 ? '—' : `${(perRequest.traces.length / merged.traces.length).toFixed(1)}×`,
    ])
    slime.push(toJsonl(toSlimeSamples(result, { group_index: 0, trajectory_index: index })))
    nemo.push(toJsonl(toNemoGymRows(merged)))
    sft.push(toJsonl(toSftRows(merged)))
  }
  const widths = rows[0]?.map((_, column) => Math.max(...rows.map((row) => (row[column] ?? '').length))) ?? []
  say('')
  for (const row of rows) say(row.map((cell, column) => pad(cell, widths[column] ?? 0)).join('  '))
  mkdirSync(outDir, { recursive: true })
  writeFileSync(join(outDir, 'slime.jsonl'), slime.join(''))
  writeFileSync(join(outDir, 'nemo-gym.jsonl'), nemo.join(''))
  writeFileSync(join(outDir, 'sft.jsonl'), sft.join(''))
  const solved = results.filter((result) => result.status === 'COMPLETED' && result.trajectory.traces[0]?.reward === 1).length
  say(
    `\n${solved}/${results.length} solved · task ${status.status} · ${((Date.now() - started) / 1000).toFixed(0)} s` +
      `\ntrajectories in local R2 (${persistTo}): rollout/task_${taskId}/; session dirs and logs: ${join(stateDir, 'sessions')}` +
      `\nexports: ${shown(join(outDir, 'slime.jsonl'))}, ${shown(join(outDir, 'nemo-gym.jsonl'))}, ${shown(join(outDir, 'sft.jsonl'))} (runner log: ${shown(join(outDir, 'runner.log'))})`,
  )
  return status.status === 'completed' ? 0 : 1
}

let code = 1
try {
  code = await main()
} catch (error) {
  // After Ctrl-C the shutdown stops the edge under the task watch, whose next poll then fails: that is the
  // interrupt, said already, not a failure of the demo.
  if (!interrupted) process.stderr.write(`demo failed: ${(error as Error).message}\n`)
} finally {
  await shutdown()
}
process.exit(interrupted ? 130 : code)
