/**
 * @module
 * `rollgate runner`: the runner agent for a GPU/Docker host. Connects to the edge's `/runners/connect`,
 * runs assigned sessions through its stage pools (INIT → READY → RUNNING → POSTRUN) on the chosen runtime,
 * serves tunnelled inference from its local engine, and exposes a loopback status endpoint. Every flag has a
 * `ROLLGATE_*` environment variable. SIGTERM / SIGINT drains (finish held sessions, take none, exit 0); a
 * second one cancels (partial results still reported, exit 1).
 */
import { hostname } from 'node:os'
import { isAbsolute, join, resolve } from 'node:path'
import { type Command, InvalidArgumentError, Option } from 'commander'
import { discoverEngine, RunnerAgent } from '../../runner/agent.ts'
import { defaultStateDir } from '../../runner/connection/secret-store.ts'
import { defaultSessionDeps, runnerEvaluators } from '../../runner/session/default-deps.ts'
import { SessionFlow, type SessionJob } from '../../runner/session/session-flow.ts'
import { startStatusServer } from '../../runner/status/status-server.ts'
import { Reporter } from '../../runner/status/reporter.ts'
import type { StageHandlers } from '../../runner/pools/pipeline.ts'
import type { ReadOnlyBind } from '../../runner/runtime/runtime.ts'
import { DEFAULT_EDGE_URL, parseEdgeUrl } from '../lib/common-options.ts'

export interface RunnerCommandOptions {
  edge: string
  token: string
  upstream: string | null
  servedModel: string | null
  upstreamKind: 'vllm' | 'sglang' | 'openai'
  runtime: 'local' | 'docker' | 'apptainer'
  image: string | null
  /** `--ro-bind`: host paths mounted read-only into every runtime. */
  roBind?: ReadOnlyBind[]
  maxInit: number
  maxRun: number
  maxPostrun: number
  readyBuffer: number | null
  stateDir: string
  workDir: string | null
  runnerId: string
  statusPort: number
  statusHost: string
  jsonLogs: boolean
}

function positiveInt(name: string, min = 1) {
  return (value: string): number => {
    const parsed = Number(value)
    if (!Number.isInteger(parsed) || parsed < min) throw new InvalidArgumentError(`${name} must be an integer ≥ ${min}`)
    return parsed
  }
}

/** `--upstream`: `none` or an http(s) URL (a bare `host:port` was retried as an unreachable engine). */
export function parseUpstreamUrl(value: string): string {
  if (value === 'none') return value
  let protocol = ''
  try {
    protocol = new URL(value).protocol
  } catch {}
  if (protocol !== 'http:' && protocol !== 'https:')
    throw new InvalidArgumentError(`Not an http(s) URL: give the engine's base URL, e.g. http://127.0.0.1:8000, or none`)
  return value
}

/** `host[:inside]` (comma-separated for several): `inside` defaults to the host path; both absolute once resolved. */
export function parseReadOnlyBinds(value: string, previous: ReadOnlyBind[] = []): ReadOnlyBind[] {
  const binds = [...previous]
  for (const entry of value.split(',').filter(Boolean)) {
    const colon = entry.indexOf(':')
    const source = resolve(colon < 0 ? entry : entry.slice(0, colon))
    const target = colon < 0 ? source : entry.slice(colon + 1)
    if (!isAbsolute(target)) throw new InvalidArgumentError(`--ro-bind ${entry}: the inside path must be absolute`)
    binds.push({ source, target })
  }
  return binds
}

export function register(program: Command): void {
  program
    .command('runner')
    .description('run the runner agent: sessions on this host, inference tunnelled from the local engine')
    .addOption(new Option('--edge <url>', 'edge base URL').env('ROLLGATE_EDGE_URL').default(DEFAULT_EDGE_URL).argParser(parseEdgeUrl))
    .addOption(
      new Option('--token <token>', 'runner token (the edge’s ROLLGATE_RUNNER_TOKEN)')
        .env('ROLLGATE_RUNNER_TOKEN')
        .default('dev-runner-token'),
    )
    .addOption(
      new Option('--upstream <url>', 'local engine answering tunnelled calls ("none": serve no model)')
        .env('ROLLGATE_UPSTREAM_URL')
        .default('http://127.0.0.1:8000')
        .argParser(parseUpstreamUrl),
    )
    .addOption(new Option('--served-model <name>', 'model the engine serves (default: its /v1/models)').env('ROLLGATE_SERVED_MODEL'))
    .addOption(
      new Option('--upstream-kind <kind>', 'engine kind')
        .choices(['vllm', 'sglang', 'openai'])
        .env('ROLLGATE_UPSTREAM_KIND')
        .default('vllm'),
    )
    .addOption(
      new Option('--runtime <backend>', 'runtime of tasks that name none')
        .choices(['local', 'docker', 'apptainer'])
        .env('ROLLGATE_RUNTIME')
        .default('local'),
    )
    .addOption(new Option('--image <image>', 'image of tasks that name no runtime (docker, apptainer)').env('ROLLGATE_RUNTIME_IMAGE'))
    .addOption(
      new Option('--ro-bind <host[:inside]>', 'host path mounted read-only into every runtime (repeatable; env: comma-separated)')
        .env('ROLLGATE_RUNTIME_RO_BINDS')
        .argParser(parseReadOnlyBinds),
    )
    .addOption(new Option('--max-init <n>', 'INIT workers').env('ROLLGATE_MAX_INIT').argParser(positiveInt('--max-init')).default(2))
    .addOption(new Option('--max-run <n>', 'RUNNING slots').env('ROLLGATE_MAX_RUN').argParser(positiveInt('--max-run')).default(2))
    .addOption(
      new Option('--max-postrun <n>', 'POSTRUN workers').env('ROLLGATE_MAX_POSTRUN').argParser(positiveInt('--max-postrun')).default(2),
    )
    .addOption(
      new Option('--ready-buffer <n>', 'prepared sessions kept ahead of the run slots (default: --max-run)')
        .env('ROLLGATE_READY_BUFFER')
        .argParser(positiveInt('--ready-buffer', 0)),
    )
    .addOption(
      new Option('--state-dir <dir>', 'runner state (per-runner secret)').env('ROLLGATE_RUNNER_STATE_DIR').default(defaultStateDir()),
    )
    .addOption(new Option('--work-dir <dir>', 'session directories (default: <state-dir>/sessions)').env('ROLLGATE_RUNNER_WORK_DIR'))
    .addOption(new Option('--runner-id <id>', 'this runner’s id').env('ROLLGATE_RUNNER_ID').default(hostname()))
    .addOption(
      new Option('--status-port <port>', 'loopback status endpoint (/health, /metrics, /sessions); 0 = any free port')
        .env('ROLLGATE_RUNNER_STATUS_PORT')
        .argParser(positiveInt('--status-port', 0))
        .default(0),
    )
    .addOption(new Option('--status-host <host>', 'status endpoint address').env('ROLLGATE_RUNNER_STATUS_HOST').default('127.0.0.1'))
    .addOption(new Option('--json-logs', 'JSON lines even on a TTY').env('ROLLGATE_RUNNER_JSON_LOGS').default(false))
    .action(async (options: RunnerCommandOptions) => {
      process.exit(await runRunner(options))
    })
}

export async function runRunner(options: RunnerCommandOptions, handlers?: StageHandlers<SessionJob, unknown>): Promise<number> {
  if (!options.token) {
    process.stderr.write('rollgate runner: --token (ROLLGATE_RUNNER_TOKEN) is required\n')
    return 2
  }
  const reporter = new Reporter(process.stderr, options.jsonLogs ? false : Boolean(process.stderr.isTTY))
  const log = reporter.log
  const upstream = options.upstream && options.upstream !== 'none' ? options.upstream : null
  const capacity = {
    max_init_workers: options.maxInit,
    max_run_workers: options.maxRun,
    max_postrun_workers: options.maxPostrun,
    ready_buffer: options.readyBuffer ?? options.maxRun,
  }
  const workRoot = options.workDir ?? join(options.stateDir, 'sessions')
  const edgeUrl = options.edge.replace(/\/$/, '')
  const engine = upstream ? await discoverEngine(upstream, log) : { id: null, maxModelLen: null }
  const model = options.servedModel ?? engine.id
  const flow = new SessionFlow(
    defaultSessionDeps({
      workRoot,
      edgeUrl,
      model,
      runtime: options.runtime,
      image: options.image ?? null,
      readOnlyBinds: options.roBind ?? [],
      log,
    }),
  )
  const agent = new RunnerAgent({
    edgeUrl,
    token: options.token,
    runnerId: options.runnerId,
    stateDir: options.stateDir,
    upstreamUrl: upstream,
    // What was given, not what was read: the agent reads the engine again (cached now) and keeps re-reading it,
    // so a restarted engine's new window reaches the edge (`--served-model` stays fixed).
    servedModel: options.servedModel ?? null,
    maxModelLen: null,
    upstreamKind: options.upstreamKind,
    capacity,
    handlers:
      handlers ??
      ({
        init: (job, signal) => flow.init(job, signal),
        run: (job, prepared, signal) => flow.run(job, prepared as never, signal),
        prewarmEval: (job, signal) => flow.prewarmEval(job, signal),
        postrun: (input, signal) => flow.postrun(input as never, signal),
        dispose: (job, prepared, evalRuntime, hard) => flow.dispose(job, prepared as never, evalRuntime, hard),
      } satisfies StageHandlers<SessionJob, unknown>),
    labels: { runtime: options.runtime },
    evaluators: runnerEvaluators(),
    log,
  })
  reporter.attach(agent)
  await agent.start()
  const status = await startStatusServer(agent, options.statusPort, options.statusHost)
  log('runner.started', {
    runner_id: options.runnerId,
    edge: options.edge,
    upstream,
    model: agent.model,
    runtime: options.runtime,
    capacity,
    status_url: status.url,
    work_dir: workRoot,
    pid: process.pid,
  })

  let signals = 0
  const finished = new Promise<number>((resolve) => {
    const onSignal = (signal: NodeJS.Signals) => {
      signals++
      if (signals === 1) {
        log('runner.signal', { signal, action: 'drain' })
        void agent.drain().then(() => resolve(0))
      } else if (signals === 2) {
        log('runner.signal', { signal, action: 'cancel' })
        void agent.cancel(`runner cancelled (${signal})`).then(() => resolve(1))
      } else {
        process.exit(1)
      }
    }
    process.on('SIGTERM', onSignal)
    process.on('SIGINT', onSignal)
  })
  // A refused token or per-runner secret, or a server that is not an edge, never gets better by retrying (network
  // errors, 5xx and 429 are retried forever): one line naming the fix, exit 3.
  const refused = agent.refused.then((error) => {
    process.stderr.write(`rollgate runner: ${error.summary} (${error.message}); ${error.fix}\n`)
    return 3
  })
  const code = await Promise.race([finished, refused])
  reporter.stop()
  await status.close()
  return code
}
