/**
 * @module
 * `rollgate generate-sft --task <file> --attempts N --upstream <url> --kind vllm|openai`: offline SFT data.
 * Runs N attempts of a task through the same stack as training rollouts (edge + runner + the task's
 * evaluator) against any OpenAI-compatible model server, keeps the accepted attempts (reward ≥
 * `--threshold`), writes their SFT JSONL in message form (`sft.jsonl`) and token form (`sft-tokens.jsonl`,
 * engines that return token ids only) plus one line per attempt (`attempts.jsonl`), and prints the
 * acceptance rate; each rejected attempt's transcript (the agent's last request and every model answer) goes
 * to `rejected/<session_id>.json`, to see why. Without `--edge` it starts a throwaway local stack (wrangler dev + one local runner);
 * with `--edge` it submits to that edge (a runner must be connected).
 */
import { mkdirSync, writeFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { type Command, InvalidArgumentError, Option } from 'commander'
import type { TaskRequestInput } from '../../src/contract/rollout.ts'
import { loadTaskFile } from '../../tasks/load.ts'
import { readAttemptTranscript } from '../lib/attempt-transcript.ts'
import { action, type CommonOptions, EXIT, edgeClient, output, UsageError, withEdgeOptions } from '../lib/common-options.ts'
import type { EdgeClient } from '../lib/edge-client.ts'
import { JsonlFile } from '../lib/jsonl-file.ts'
import { startLocalStack } from '../lib/local-stack.ts'
import { type ResultSummary, taskResultSummaries } from '../lib/task-results.ts'
import { watchTask } from '../lib/task-watch.ts'

const UPSTREAM_KINDS = ['vllm', 'sglang', 'openai'] as const

interface GenerateSftOptions extends CommonOptions {
  task: string
  attempts: number
  upstream: string
  kind: (typeof UPSTREAM_KINDS)[number]
  servedModel?: string
  upstreamApiKey?: string
  threshold: number
  harness?: string
  builder: 'prefix_merging' | 'per_request'
  out: string
  concurrency: number
  timeout?: number
  verbose: boolean
}

export interface AttemptLine {
  session_id: string
  status: string
  reward: number | null
  accepted: boolean
  error: string | null
  /** The evaluator's metadata (`trajectory.metadata.evaluation`), to see why an attempt was rejected. */
  evaluation: Record<string, unknown> | null
  /**
   * A rejected attempt's transcript (`rejected/<session_id>.json`: every model answer and the messages of
   * the last request, as the edge captured them); null for accepted attempts.
   */
  transcript: string | null
}

export interface GenerateSftSummary {
  task_id: string
  attempts: number
  accepted: number
  acceptance_rate: number
  threshold: number
  files: { sft: string; sft_tokens: string | null; attempts: string }
  sft_lines: number
  sft_token_lines: number
  results: AttemptLine[]
}

function positiveInt(name: string) {
  return (value: string): number => {
    const parsed = Number(value)
    if (!Number.isInteger(parsed) || parsed < 1) throw new InvalidArgumentError(`${name} must be a positive integer`)
    return parsed
  }
}

function finiteNumber(name: string) {
  return (value: string): number => {
    const parsed = Number(value)
    if (!Number.isFinite(parsed)) throw new InvalidArgumentError(`${name} must be a number`)
    return parsed
  }
}

/** What `attemptReward` reads of a `SessionResult` (a `ResultSummary` holds just that). */
type Rewarded =
  | Pick<ResultSummary, 'trajectory'>
  | { trajectory: { metadata: Record<string, unknown>; traces: readonly { reward?: number | null }[] } }

/** The outcome reward of an attempt: the evaluator's, else the best trace reward. */
export function attemptReward(result: Rewarded): number | null {
  const evaluation = result.trajectory.metadata.evaluation as { outcome_reward?: unknown } | undefined
  if (typeof evaluation?.outcome_reward === 'number') return evaluation.outcome_reward
  const rewards = result.trajectory.traces.map((trace) => trace.reward).filter((reward): reward is number => typeof reward === 'number')
  return rewards.length === 0 ? null : Math.max(...rewards)
}

/** The TaskRequest the attempts run: the file's task, N samples, a fresh id, the chosen upstream. */
export function sftTask(
  file: string,
  options: Pick<GenerateSftOptions, 'attempts' | 'upstream' | 'kind' | 'servedModel' | 'harness'>,
): TaskRequestInput {
  let task: TaskRequestInput
  try {
    task = loadTaskFile(file)
  } catch (error) {
    throw new UsageError(`cannot read task ${file}: ${(error as Error).message}`)
  }
  const base = typeof task.task_id === 'string' && task.task_id !== '' ? task.task_id : 'task'
  return {
    ...task,
    task_id: `${base}-sft-${Date.now().toString(36)}`.slice(0, 192),
    num_samples: options.attempts,
    callback_url: null,
    early_stop_min_usable_sessions: null,
    ...(options.harness ? { agent: { ...task.agent, harness: options.harness, custom_shell: null } } : {}),
    upstream: {
      route: 'direct',
      url: options.upstream,
      kind: options.kind,
      ...(options.servedModel ? { served_model: options.servedModel } : {}),
    },
    metadata: { ...(task.metadata ?? {}), purpose: 'sft' },
  }
}

/**
 * The model to ask the upstream for: `--served-model`, else the first model of its `/v1/models` (rollout
 * sessions pass the harness's own model name through otherwise, which an engine rejects).
 */
export async function discoverServedModel(upstream: string, apiKey: string | undefined): Promise<string> {
  const url = `${upstream.replace(/\/+$/, '')}/v1/models`
  let response: Response
  try {
    response = await fetch(url, { headers: apiKey ? { authorization: `Bearer ${apiKey}` } : {}, signal: AbortSignal.timeout(15_000) })
  } catch (error) {
    throw new UsageError(`cannot reach the upstream at ${url} (${(error as Error).message}); is it running?`)
  }
  const body = (await response.json().catch(() => null)) as { data?: Array<{ id?: unknown }> } | null
  const id = body?.data?.[0]?.id
  if (!response.ok || typeof id !== 'string') {
    throw new UsageError(`${url} answered ${response.status} without a model list; pass --served-model`)
  }
  return id
}

/** Writes a rejected attempt's transcript to `<out>/rejected/<session_id>.json`; null (and a warning) when it cannot be read. */
async function keepTranscript(client: EdgeClient, out: string, sessionId: string, sessionDir: string | null): Promise<string | null> {
  try {
    const transcript = await readAttemptTranscript(client, sessionId, sessionDir)
    const file = join(out, 'rejected', `${sessionId}.json`)
    mkdirSync(join(out, 'rejected'), { recursive: true })
    writeFileSync(file, `${JSON.stringify(transcript, null, 2)}\n`)
    return file
  } catch (error) {
    process.stderr.write(`warning: cannot read the transcript of ${sessionId}: ${(error as Error).message}\n`)
    return null
  }
}

/**
 * The attempts' lines from the task's results (streamed, one small summary each), their transcripts when
 * rejected, and the accepted attempts' exports appended to the JSONL files as they arrive: memory holds
 * one result's summary and one export chunk, whatever the sessions' length.
 */
async function collect(
  client: EdgeClient,
  results: AsyncIterable<ResultSummary>,
  options: GenerateSftOptions,
  sessionDir: ((sessionId: string) => string) | null,
): Promise<GenerateSftSummary> {
  const out = resolve(options.out)
  mkdirSync(out, { recursive: true })
  const attempts: AttemptLine[] = []
  let resultTaskId: string | null = null
  for await (const result of results) {
    resultTaskId ??= result.task_id
    const reward = attemptReward(result)
    attempts.push({
      session_id: result.session_id,
      status: result.status,
      reward,
      accepted: result.status === 'COMPLETED' && reward !== null && reward >= options.threshold,
      error: result.error,
      evaluation: (result.trajectory.metadata.evaluation as Record<string, unknown> | undefined) ?? null,
      transcript: null,
    })
  }
  for (const attempt of attempts.filter((entry) => !entry.accepted)) {
    attempt.transcript = await keepTranscript(client, out, attempt.session_id, sessionDir?.(attempt.session_id) ?? null)
  }
  const withTokens = options.kind !== 'openai'
  const files = {
    sft: join(out, 'sft.jsonl'),
    sft_tokens: withTokens ? join(out, 'sft-tokens.jsonl') : null,
    attempts: join(out, 'attempts.jsonl'),
  }
  const sft = new JsonlFile(files.sft)
  const tokens = files.sft_tokens ? new JsonlFile(files.sft_tokens) : null
  try {
    for (const attempt of attempts.filter((entry) => entry.accepted)) {
      await sft.append(client.exportStream(attempt.session_id, { builder: options.builder, format: 'sft' }))
      await tokens?.append(client.exportStream(attempt.session_id, { builder: options.builder, format: 'sft-tokens' }))
    }
    sft.close()
    tokens?.close()
  } catch (error) {
    sft.discard()
    tokens?.discard()
    throw error
  }
  writeFileSync(files.attempts, attempts.length === 0 ? '' : `${attempts.map((attempt) => JSON.stringify(attempt)).join('\n')}\n`)
  const accepted = attempts.filter((attempt) => attempt.accepted).length
  return {
    task_id: resultTaskId ?? '',
    attempts: attempts.length,
    accepted,
    acceptance_rate: attempts.length === 0 ? 0 : accepted / attempts.length,
    threshold: options.threshold,
    files,
    sft_lines: sft.lines,
    sft_token_lines: tokens?.lines ?? 0,
    results: attempts,
  }
}

function render(summary: GenerateSftSummary): string {
  const lines = summary.results.map(
    (attempt) =>
      `  ${attempt.session_id}  ${attempt.status.padEnd(9)}  reward ${attempt.reward ?? '—'}  ${attempt.accepted ? 'accepted' : 'rejected'}${attempt.error ? `  (${attempt.error})` : ''}${attempt.transcript ? `  transcript ${attempt.transcript}` : ''}`,
  )
  return [
    `task ${summary.task_id}: ${summary.attempts} attempts`,
    ...lines,
    `wrote ${summary.sft_lines} SFT lines to ${summary.files.sft}` +
      (summary.files.sft_tokens
        ? `, ${summary.sft_token_lines} to ${summary.files.sft_tokens}`
        : ' (no token form: the upstream returns no token ids)'),
    `acceptance rate: ${summary.accepted}/${summary.attempts} (${(summary.acceptance_rate * 100).toFixed(1)}%) at reward ≥ ${summary.threshold}`,
  ].join('\n')
}

export function register(program: Command): void {
  const command = withEdgeOptions(
    program
      .command('generate-sft')
      .description('run attempts of a task against a model server, keep the accepted ones as SFT JSONL')
      .requiredOption('--task <file>', 'TaskRequest JSON (relative upload sources resolve against its folder)')
      .addOption(new Option('--attempts <n>', 'attempts (num_samples)').argParser(positiveInt('--attempts')).makeOptionMandatory())
      .requiredOption('--upstream <url>', 'OpenAI-compatible model server base URL')
      .addOption(
        new Option('--kind <kind>', 'upstream kind (openai: text only, no token form)').choices([...UPSTREAM_KINDS]).default('vllm'),
      )
      .addOption(new Option('--served-model <name>', 'model name sent upstream (default: the engine’s /v1/models)'))
      .addOption(new Option('--upstream-api-key <key>', 'bearer for a hosted upstream (local stack only)').env('ROLLGATE_UPSTREAM_API_KEY'))
      .addOption(new Option('--threshold <reward>', 'accept attempts with reward ≥ this').argParser(finiteNumber('--threshold')).default(1))
      .option('--harness <name>', "override the task's agent harness")
      .addOption(
        new Option('--builder <name>', 'trajectory builder of the exports')
          .choices(['prefix_merging', 'per_request'])
          .default('prefix_merging'),
      )
      .option('-o, --out <dir>', 'output directory', 'out/sft')
      .addOption(new Option('--concurrency <n>', 'local runner slots per stage').argParser(positiveInt('--concurrency')).default(2))
      .addOption(new Option('--timeout <seconds>', 'give up after this long').argParser(positiveInt('--timeout')))
      .option('--verbose', "show the local edge's and runner's output", false),
  )
  command.action(
    action(async (options: GenerateSftOptions) => {
      const servedModel = options.servedModel ?? (await discoverServedModel(options.upstream, options.upstreamApiKey))
      const task = sftTask(options.task, { ...options, servedModel })
      const existingEdge = command.getOptionValueSource('edge') !== 'default'
      const controller = new AbortController()
      const onSignal = () => controller.abort(new Error('interrupted'))
      process.once('SIGINT', onSignal)
      process.once('SIGTERM', onSignal)
      const stack = existingEdge
        ? null
        : await startLocalStack({
            upstreamUrl: options.upstream,
            upstreamKind: options.kind,
            upstreamApiKey: options.upstreamApiKey,
            servedModel,
            concurrency: options.concurrency,
            verbose: options.verbose,
          })
      const client = stack?.client ?? edgeClient(options)
      let submitted = false
      try {
        const answer = await client.submitTask(task)
        submitted = true
        for (const warning of answer.warnings ?? []) process.stderr.write(`warning: ${warning}\n`)
        await watchTask(client, task.task_id, {
          signal: controller.signal,
          results: false,
          ...(options.timeout ? { timeoutMs: options.timeout * 1000 } : {}),
        })
        // The results are streamed, one session at a time (a long session's is tens of MB).
        const results = taskResultSummaries(client, task.task_id)
        const summary = await collect(client, results, options, stack?.sessionDir ?? null)
        output(options, summary, () => render(summary))
        return summary.accepted > 0 ? EXIT.ok : EXIT.failed
      } catch (error) {
        if (submitted) await client.cancelTask(task.task_id).catch(() => undefined)
        throw error
      } finally {
        process.off('SIGINT', onSignal)
        process.off('SIGTERM', onSignal)
        await stack?.stop()
      }
    }),
  )
}
