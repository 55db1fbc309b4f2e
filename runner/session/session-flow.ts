/**
 * @module
 * The real work of each stage for one session (the pipeline's `StageHandlers`):
 * - INIT: create the session directory (`artifacts/`, `logs/agent/`), start the runtime, run the task's
 *   `RuntimeSpec.prepare` actions (uploads and commands, logged under `logs/prepare/`).
 * - RUNNING: render the harness (files, env, steps), write its files into the runtime, run its steps with the
 *   assignment's injected environment pointed at the edge as the sandbox reaches it; each step's output is
 *   teed to `logs/agent/<step>.{stdout,stderr}.log`.
 * - POSTRUN: the harness's teardown steps, then the runner-side evaluator (registry or custom module) on the
 *   live runtime (and a fresh one prepared during RUNNING when `evaluator.refresh_runtime`); a summary
 *   `logs/runner.json` stays in the session directory with the logs.
 * - dispose: stop (or, on a hard shutdown, cancel) the runtimes.
 *
 * Backends, harnesses and evaluators come in through `SessionFlowDeps` (their registries in production,
 * small stand-ins in tests).
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { EvaluatorSpec, PrepareAction, RuntimeSpec } from '../../src/contract/rollout.ts'
import type { AgentResult, SessionAssignment } from '../../src/contract/runner-protocol.ts'
import type { EvalResult } from '../../src/contract/trajectory.ts'
import type { Evaluator } from '../evaluators/evaluator.ts'
import type { Harness, HarnessPlan } from '../harness/harness.ts'
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
  /** Time for the harness's teardown steps (default 30 s). */
  teardownMs?: number
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
    const prepared: PreparedSession = { runtime, sessionDir, startedAt: Date.now(), steps: [], ...(cli ? { cliPath: cli.cliPath } : {}) }
    const unhook = abortPromise(signal, () => void runtime.cancel().catch(() => {}))
    try {
      await runtime.start()
      if (signal.aborted) throw new Error('cancelled during runtime start')
      await this.#prepare(runtime, job.assignment.runtime?.prepare ?? [], join(sessionDir, 'logs', 'prepare'), signal)
      return prepared
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
    await this.#writeFiles(runtime, plan)
    const env = { ...insideEnv(assignment, runtime.edgeUrlInside), ...assignment.agent.env, ...plan.env }
    for (const step of plan.steps) {
      const result = await runtime.exec({
        command: step.command,
        cwd: step.cwd ?? runtime.workDir ?? SESSION_MOUNT,
        env: { ...env, ...step.env },
        stdoutPath: join(sessionDir, 'logs', 'agent', `${step.name}.stdout.log`),
        stderrPath: join(sessionDir, 'logs', 'agent', `${step.name}.stderr.log`),
        signal,
      })
      prepared.steps.push({
        name: step.name,
        exitCode: result.exitCode,
        durationMs: result.durationMs,
        timedOut: result.timedOut,
        cancelled: result.cancelled,
      })
      if (result.exitCode !== 0) {
        const tail = result.stderr.trim().split('\n').slice(-5).join('\n')
        return {
          status: 'failed',
          return_code: result.exitCode,
          error: `step ${step.name} exited ${result.exitCode}${tail ? `: ${tail}` : ''}`,
          timeout_stage: null,
        }
      }
    }
    return { status: 'completed', return_code: 0, error: null, timeout_stage: null }
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

  async #writeFiles(runtime: Runtime, plan: HarnessPlan): Promise<void> {
    if (plan.files.length === 0) return
    const staging = mkdtempSync(join(tmpdir(), 'rollgate-files-'))
    try {
      for (const [index, file] of plan.files.entries()) {
        const source = join(staging, String(index))
        writeFileSync(source, file.content, { mode: file.mode ?? 0o644 })
        await runtime.upload(source, file.path)
      }
    } finally {
      rmSync(staging, { recursive: true, force: true })
    }
  }

  async prewarmEval(job: SessionJob, signal: AbortSignal): Promise<unknown> {
    const spec = job.assignment.runtime
    const sessionDir = join(this.sessionDir(job.id), 'eval')
    for (const dir of ['artifacts', 'logs']) mkdirSync(join(sessionDir, dir), { recursive: true })
    const runtime = this.deps.createRuntime(spec, { sessionId: `${job.id}-eval`, sessionDir, edgeUrl: this.deps.edgeUrl })
    const unhook = abortPromise(signal, () => void runtime.cancel().catch(() => {}))
    try {
      await runtime.start()
      await this.#prepare(runtime, spec?.eval_prepare ?? spec?.prepare ?? [], join(sessionDir, 'logs'), signal)
      return runtime
    } catch (error) {
      await runtime.cancel().catch(() => {})
      throw error
    } finally {
      unhook()
    }
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
      if (input.evaluate && !signal.aborted) await this.#teardown(job, prepared, signal)
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

  async #teardown(job: SessionJob, prepared: PreparedSession, signal: AbortSignal): Promise<void> {
    let plan: HarnessPlan
    try {
      plan = this.#render(job, prepared)
    } catch {
      return
    }
    const env = { ...insideEnv(job.assignment, prepared.runtime.edgeUrlInside), ...plan.env }
    for (const step of plan.postrunSteps) {
      await prepared.runtime.exec({
        command: step.command,
        cwd: step.cwd ?? null,
        env: { ...env, ...step.env },
        timeoutMs: this.deps.teardownMs ?? 30_000,
        stdoutPath: join(prepared.sessionDir, 'logs', 'agent', `${step.name}.stdout.log`),
        stderrPath: join(prepared.sessionDir, 'logs', 'agent', `${step.name}.stderr.log`),
        signal,
      })
    }
  }

  async dispose(_job: SessionJob, prepared: PreparedSession | null, evalRuntime: unknown, hard: boolean): Promise<void> {
    const runtimes = [prepared?.runtime, evalRuntime as Runtime | null].filter((runtime): runtime is Runtime => Boolean(runtime))
    await Promise.all(runtimes.map((runtime) => (hard ? runtime.cancel() : runtime.stop()).catch(() => runtime.cancel())))
  }
}
