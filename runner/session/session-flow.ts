/**
 * @module
 * The real work of each stage for one session (the pipeline's `StageHandlers`):
 * - INIT: create the session directory (`artifacts/`, `logs/agent/`), start the runtime, run the task's
 *   `RuntimeSpec.prepare` actions (uploads and commands, logged under `logs/prepare/`).
 * - RUNNING: render the harness (files, env, steps) and run the plan with the harness modules' own
 *   `runHarnessPlan` (files written, steps run with the assignment's injected environment pointed at the edge
 *   as the sandbox reaches it, output teed to `logs/agent/<step>.{stdout,stderr}.log`, teardown steps after).
 * - POSTRUN: the runner-side evaluator (registry or custom module) on the
 *   live runtime (and a fresh one prepared during RUNNING when `evaluator.refresh_runtime`); a summary
 *   `logs/runner.json` stays in the session directory with the logs.
 * - dispose: stop (or, on a hard shutdown, cancel) the runtimes.
 *
 * Backends, harnesses and evaluators come in through `SessionFlowDeps` (their registries in production,
 * small stand-ins in tests).
 */
import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { EvaluatorSpec, PrepareAction, RuntimeSpec } from '../../src/contract/rollout.ts'
import type { AgentResult, SessionAssignment } from '../../src/contract/runner-protocol.ts'
import type { EvalResult } from '../../src/contract/trajectory.ts'
import type { Evaluator } from '../evaluators/evaluator.ts'
import type { Harness, HarnessPlan } from '../harness/harness.ts'
import { runHarnessPlan } from '../harness/run.ts'
import type { PipelineJob, PostrunInput, StageHandlers } from '../pools/pipeline.ts'
import { type Runtime, type RuntimeContext, SESSION_MOUNT } from '../runtime/runtime.ts'

export interface SessionJob extends PipelineJob {
  assignment: SessionAssignment
}

export interface PreparedSession {
  runtime: Runtime
  /** Inside path of the harness CLI (installed per host, mounted read-only); undefined: on PATH. */
  cliPath?: string
  sessionDir: string
  startedAt: number
  steps: { name: string; exitCode: number; durationMs: number; timedOut: boolean; cancelled: boolean }[]
}

export interface SessionFlowDeps {
  /** Host directory under which each session gets `<session_id>/`. */
  workRoot: string
  /** The edge's base URL as the runner host reaches it (the runtime forwards the sandbox's port to it). */
  edgeUrl: string
  createRuntime(spec: RuntimeSpec | null, context: RuntimeContext, extras?: RuntimeExtras): Runtime
  harness(name: string): Harness
  /**
   * Make the harness CLI available (per-host install cache, never per session): where it is inside the
   * runtime and which host dirs to mount read-only for it. Null / absent: the image provides it on PATH.
   */
  installHarness?(harness: Harness): Promise<{ cliPath: string; readOnlyBinds: { source: string; target: string }[] } | null>
  /** The runner-side evaluator for a spec, or null when the edge evaluates (session_completed) or none is set. */
  evaluator(spec: EvaluatorSpec): Promise<Evaluator | null> | Evaluator | null
  /** Served model name, if known (harnesses ask for it; the edge maps any name anyway). */
  model: string | null
  /** Time for each of the harness's teardown steps (default 30 s). */
  teardownMs?: number
  /** PATH inside the runtime (e.g. the runner's Node ≥ 22 first, for the harness CLIs). */
  basePath?: string
}

/** Per-session additions to the runner-wide runtime options. */
export interface RuntimeExtras {
  readOnlyBinds: { source: string; target: string }[]
}

/** Create the job the pipeline runs from an edge assignment. */
export function jobFromAssignment(assignment: SessionAssignment): SessionJob {
  return {
    id: assignment.session_id,
    priority: assignment.dispatch_priority,
    sessionBudgetMs: assignment.timeout_seconds > 0 ? assignment.timeout_seconds * 1000 : null,
    agentBudgetMs: assignment.agent_timeout_seconds ? assignment.agent_timeout_seconds * 1000 : null,
    prewarmEvalRuntime: assignment.evaluator?.refresh_runtime === true,
    assignment,
  }
}

/** The assignment's injected env with the edge's public origin replaced by the one the sandbox reaches. */
export function insideEnv(assignment: SessionAssignment, edgeUrlInside: string): Record<string, string> {
  const origin = assignment.base_urls.anthropic.replace(/\/$/, '')
  const inside = edgeUrlInside.replace(/\/$/, '')
  const env: Record<string, string> = {}
  for (const [key, value] of Object.entries(assignment.env))
    env[key] = value.startsWith(origin) ? inside + value.slice(origin.length) : value
  return env
}

function abortPromise(signal: AbortSignal, onAbort: () => void): () => void {
  if (signal.aborted) {
    onAbort()
    return () => {}
  }
  signal.addEventListener('abort', onAbort, { once: true })
  return () => signal.removeEventListener('abort', onAbort)
}

export class SessionFlow implements StageHandlers<SessionJob, PreparedSession> {
  readonly deps: SessionFlowDeps

  constructor(deps: SessionFlowDeps) {
    this.deps = deps
  }

  sessionDir(sessionId: string): string {
    return join(this.deps.workRoot, sessionId)
  }

  async init(job: SessionJob, signal: AbortSignal): Promise<PreparedSession> {
    const sessionDir = this.sessionDir(job.id)
    for (const dir of ['artifacts', 'logs/agent', 'logs/prepare']) mkdirSync(join(sessionDir, dir), { recursive: true })
    const name = job.assignment.agent.harness
    if (!name) throw new Error('agent.import_path (custom agents) is not supported by this runner; name a harness')
    const cli = this.deps.installHarness ? await this.deps.installHarness(this.deps.harness(name)) : null
    if (signal.aborted) throw new Error('cancelled during harness install')
    const runtime = this.deps.createRuntime(
      job.assignment.runtime,
      { sessionId: job.id, sessionDir, edgeUrl: this.deps.edgeUrl },
      { readOnlyBinds: cli?.readOnlyBinds ?? [] },
    )
    const prepared: PreparedSession = {
      runtime,
      sessionDir,
      startedAt: Date.now(),
      steps: [],
      ...(cli?.cliPath ? { cliPath: cli.cliPath } : {}),
    }
    await this.#startPrepared(runtime, job.assignment.runtime?.prepare ?? [], join(sessionDir, 'logs', 'prepare'), signal)
    return prepared
  }

  /** Start a runtime and run its prepare actions; an abort cancels it, and so does a failure (then rethrown). */
  async #startPrepared(runtime: Runtime, actions: readonly PrepareAction[], logDir: string, signal: AbortSignal): Promise<void> {
    const unhook = abortPromise(signal, () => void runtime.cancel().catch(() => {}))
    try {
      await runtime.start()
      if (signal.aborted) throw new Error('cancelled during runtime start')
      await this.#prepare(runtime, actions, logDir, signal)
    } catch (error) {
      await runtime.cancel().catch(() => {})
      throw error
    } finally {
      unhook()
    }
  }

  async #prepare(runtime: Runtime, actions: readonly PrepareAction[], logDir: string, signal: AbortSignal): Promise<void> {
    for (const [index, action] of actions.entries()) {
      if (signal.aborted) throw new Error('cancelled during prepare')
      if (action.type === 'exec') {
        const attempts = action.max_attempts ?? 1
        for (let attempt = 1; ; attempt++) {
          const result = await runtime.exec({
            command: action.command as string,
            cwd: action.cwd ?? null,
            env: action.env ?? null,
            stdoutPath: join(logDir, `${index}.stdout.log`),
            stderrPath: join(logDir, `${index}.stderr.log`),
            signal,
          })
          if (result.exitCode === 0) break
          if (signal.aborted || attempt >= attempts) {
            throw new Error(`prepare action ${index} (${action.command}) exited ${result.exitCode}: ${result.stderr.slice(-500)}`)
          }
          await new Promise((resolve) => setTimeout(resolve, (action.retry_backoff_seconds ?? 1) * 1000))
        }
      } else {
        await runtime.upload(action.source as string, action.target as string)
      }
    }
  }

  async run(job: SessionJob, prepared: PreparedSession, signal: AbortSignal): Promise<AgentResult> {
    const { assignment } = job
    const { runtime, sessionDir } = prepared
    const plan = this.#render(job, prepared)
    // The harness modules' own runner (single source of truth with the recording script): files, steps
    // with logs under logs/agent/, then the teardown steps (also after a failure or cancel).
    const result = await runHarnessPlan(runtime, plan, {
      sessionDirHost: sessionDir,
      baseEnv: {
        ...(this.deps.basePath ? { PATH: this.deps.basePath } : {}),
        ...insideEnv(assignment, runtime.edgeUrlInside),
        ...assignment.agent.env,
      },
      ...(this.deps.teardownMs ? { teardownTimeoutMs: this.deps.teardownMs } : {}),
      signal,
    })
    prepared.steps.push(...result.steps)
    return {
      status: result.status,
      return_code: result.return_code,
      error: result.error,
      timeout_stage: result.status === 'timeout' ? 'exec' : null,
    }
  }

  #render(job: SessionJob, prepared: PreparedSession): HarnessPlan {
    const { assignment } = job
    const { runtime } = prepared
    const name = assignment.agent.harness
    if (!name) throw new Error('agent.import_path (custom agents) is not supported by this runner; name a harness')
    const harness = this.deps.harness(name)
    const model = assignment.agent.model_name ?? this.deps.model
    return harness.render({
      instruction: assignment.instruction,
      edgeUrl: runtime.edgeUrlInside.replace(/\/$/, ''),
      token: assignment.token,
      ...(model ? { model } : {}),
      agent: assignment.agent,
      ...(typeof assignment.agent.settings.variant === 'string' ? { variant: assignment.agent.settings.variant } : {}),
      ...(prepared.cliPath ? { cliPath: prepared.cliPath } : {}),
      sessionDir: SESSION_MOUNT,
      homeDir: runtime.homeDir,
      workDir: runtime.workDir,
    })
  }

  async prewarmEval(job: SessionJob, signal: AbortSignal): Promise<unknown> {
    const spec = job.assignment.runtime
    const sessionDir = join(this.sessionDir(job.id), 'eval')
    for (const dir of ['artifacts', 'logs']) mkdirSync(join(sessionDir, dir), { recursive: true })
    const runtime = this.deps.createRuntime(spec, { sessionId: `${job.id}-eval`, sessionDir, edgeUrl: this.deps.edgeUrl })
    await this.#startPrepared(runtime, spec?.eval_prepare ?? spec?.prepare ?? [], join(sessionDir, 'logs'), signal)
    return runtime
  }

  async postrun(input: PostrunInput<SessionJob, PreparedSession>, signal: AbortSignal): Promise<EvalResult | null> {
    const { job, prepared } = input
    const { assignment } = job
    const summary: Record<string, unknown> = {
      session_id: job.id,
      task_id: assignment.task_id,
      agent_result: input.agentResult,
      steps: prepared.steps,
      evaluated: false,
    }
    try {
      const spec = assignment.evaluator
      if (!input.evaluate || !spec || signal.aborted) return null
      const evaluator = await this.deps.evaluator(spec)
      if (!evaluator) return null
      const result = await evaluator.evaluate({
        sessionId: job.id,
        taskId: assignment.task_id,
        sessionDir: prepared.sessionDir,
        artifactsDir: join(prepared.sessionDir, 'artifacts'),
        agentResult: input.agentResult,
        spec,
        timeoutMs: input.timeoutMs,
        runtime: prepared.runtime,
        freshRuntime: (input.evalRuntime as Runtime | null) ?? null,
        signal,
      })
      summary.evaluated = true
      summary.eval_result = result
      return result
    } catch (error) {
      summary.error = (error as Error).message
      throw error
    } finally {
      writeFileSync(join(prepared.sessionDir, 'logs', 'runner.json'), `${JSON.stringify(summary, null, 2)}\n`)
    }
  }

  async dispose(_job: SessionJob, prepared: PreparedSession | null, evalRuntime: unknown, hard: boolean): Promise<void> {
    const runtimes = [prepared?.runtime, evalRuntime as Runtime | null].filter((runtime): runtime is Runtime => Boolean(runtime))
    await Promise.all(runtimes.map((runtime) => (hard ? runtime.cancel() : runtime.stop()).catch(() => runtime.cancel())))
  }
}
