/**
 * @module
 * `rollgate submit [file]`: submit a TaskRequest (from a JSON file, `-` for stdin, or flags), then follow
 * it with live progress until every session resolved. Exit 0 when the task completed with at least one
 * usable session, 1 otherwise (`--no-wait` returns right after the submit).
 */
import { existsSync, readFileSync, statSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { type Command, Option } from 'commander'
import type { TaskRequestInput, TaskSubmitResponse } from '../../src/contract/rollout.ts'
import type { SessionResult } from '../../src/contract/trajectory.ts'
import { action, type CommonOptions, EXIT, edgeClient, output, UsageError, withEdgeOptions } from '../lib/common-options.ts'
import { EdgeError } from '../lib/edge-client.ts'
import { resolveUploadSources } from '../../tasks/load.ts'
import { WatchTimeoutError, watchTask } from '../lib/task-watch.ts'

interface SubmitOptions extends CommonOptions {
  taskId?: string
  instruction?: string
  harness?: string
  samples?: string
  builder: string
  wait: boolean
  timeout?: string
}

/** One stderr line per submit warning (`no_runner_connected: …`). */
export function warningLines(warnings: TaskSubmitResponse['warnings']): string {
  return (warnings ?? []).map((warning) => `warning: ${warning.code}: ${warning.message}\n`).join('')
}

/** `--timeout` in milliseconds (a positive number of seconds), undefined when not given. */
export function timeoutMs(timeout: string | undefined): number | undefined {
  if (timeout === undefined) return undefined
  const seconds = Number(timeout)
  if (!Number.isFinite(seconds) || seconds <= 0) throw new UsageError(`--timeout must be a positive number of seconds, got "${timeout}"`)
  return seconds * 1000
}

/** The TaskRequest from a file (or stdin) with flags layered over it. */
export function taskFromInputs(file: string | undefined, options: SubmitOptions): TaskRequestInput {
  let task: Record<string, unknown> = {}
  if (file) {
    // A task folder (`tasks/fix-stats`) means its `task.json`.
    if (file !== '-' && existsSync(file) && statSync(file).isDirectory()) {
      if (!existsSync(join(file, 'task.json'))) throw new UsageError(`${file} is a folder without a task.json`)
      file = join(file, 'task.json')
    }
    if (file !== '-' && !existsSync(file)) throw new UsageError(`${file}: no such task file`)
    const text = file === '-' ? readFileSync(0, 'utf8') : readFileSync(file, 'utf8')
    try {
      task = JSON.parse(text) as Record<string, unknown>
    } catch (error) {
      throw new UsageError(`${file} is not JSON: ${(error as Error).message}`)
    }
    // The runner reads upload sources on its own host and from its own directory: a task file's relative
    // sources (`tasks/fix-stats/task.json`: `repo`) mean its folder (stdin: the current directory).
    resolveUploadSources(task, file === '-' ? process.cwd() : dirname(resolve(file)))
  }
  if (options.taskId) task.task_id = options.taskId
  if (options.instruction) task.instruction = options.instruction
  if (options.harness) task.agent = { ...((task.agent as object) ?? {}), harness: options.harness }
  if (options.samples !== undefined) {
    const samples = Number(options.samples)
    if (!Number.isInteger(samples) || samples < 1) throw new UsageError('--samples must be a positive integer')
    task.num_samples = samples
  } else if (task.num_samples === undefined) task.num_samples = 1
  if (!task.builder) task.builder = { strategy: options.builder }
  if (!task.task_id) task.task_id = `task-${Date.now().toString(36)}`
  if (!task.instruction) throw new UsageError('a task needs an instruction (--instruction or a TaskRequest file)')
  if (!task.agent) throw new UsageError('a task needs an agent (--harness or a TaskRequest file)')
  return task as unknown as TaskRequestInput
}

/**
 * One session of the final summary; a session that did not complete also says why (its `error`, else the last
 * line of the agent's error, e.g. the engine's answer that made the harness stop), so a newcomer sees the cause
 * without opening the runner's session logs.
 */
export function sessionLines(result: Pick<SessionResult, 'session_id' | 'status' | 'trajectory' | 'error'>): string[] {
  const { traces, metadata } = result.trajectory
  const lines = [`  ${result.session_id}  ${result.status.padEnd(9)}  reward ${traces[0]?.reward ?? '—'}  traces ${traces.length}`]
  if (result.status === 'COMPLETED') return lines
  const agent = (metadata as { agent_result?: { error?: unknown } | null }).agent_result
  const reason = result.error ?? (typeof agent?.error === 'string' ? agent.error : null)
  const last = reason
    ?.split('\n')
    .map((line) => line.trim())
    .filter(Boolean)
    .at(-1)
  if (last) lines.push(`    why: ${last.length > 300 ? `${last.slice(0, 299)}…` : last}`)
  return lines
}

export function register(program: Command): void {
  withEdgeOptions(
    program
      .command('submit')
      .description('submit a TaskRequest and follow it until done')
      .argument('[file]', 'TaskRequest JSON file, or a task folder holding task.json (- for stdin)')
      .option('--task-id <id>', "task id (default: the file's, else generated)")
      .option('--instruction <text>', 'instruction (overrides the file)')
      .option('--harness <name>', 'agent harness (codex, claude_code, gemini_cli, qwen_code, opencode, pi, shell)')
      .option('--samples <n>', "num_samples (default: the file's, else 1)")
      .addOption(new Option('--builder <name>', 'trajectory builder').choices(['prefix_merging', 'per_request']).default('prefix_merging'))
      .option('--no-wait', 'return right after the submit')
      .option('--timeout <seconds>', 'stop following after this long (the task goes on)'),
  ).action(
    action(async (file: string | undefined, options: SubmitOptions) => {
      const client = edgeClient(options)
      const task = taskFromInputs(file, options)
      const timeout = timeoutMs(options.timeout)
      const submitted = await client.submitTask(task).catch((error: unknown) => {
        // The same task file twice while its first run goes on: say how to run it again alongside.
        if (
          error instanceof EdgeError &&
          error.status === 409 &&
          (error.body as { error?: { param?: unknown } })?.error?.param === 'task_id'
        )
          throw new UsageError(
            `${error.message} (submit it again under another --task-id, or follow it: rollgate status ${String(task.task_id)})`,
          )
        throw error
      })
      process.stderr.write(warningLines(submitted.warnings))
      if (!options.wait) {
        output(options, submitted, () => `submitted ${submitted.task_id}`)
        return EXIT.ok
      }
      let final: Awaited<ReturnType<typeof watchTask>>
      try {
        final = await watchTask(client, submitted.task_id, timeout === undefined ? {} : { timeoutMs: timeout })
      } catch (error) {
        if (!(error instanceof WatchTimeoutError)) throw error
        process.stderr.write(`rollgate: ${error.message}; it goes on (follow it: rollgate status ${submitted.task_id})\n`)
        return EXIT.failed
      }
      output(options, final, () => {
        const lines = [`task ${final.task_id}: ${final.status} (${final.usable_sessions}/${final.total_sessions} usable)`]
        for (const result of final.results) lines.push(...sessionLines(result))
        return lines.join('\n')
      })
      return final.status === 'completed' && final.usable_sessions > 0 ? EXIT.ok : EXIT.failed
    }),
  )
}
