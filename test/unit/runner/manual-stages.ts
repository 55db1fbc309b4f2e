/**
 * @module
 * Stage handlers driven by hand: every stage call parks a pending step that the test settles (succeed or
 * fail) in any order, so pool tests can reach every interleaving without timers.
 */
import type { AgentResult } from '../../../src/contract/runner-protocol.ts'
import type { EvalResult } from '../../../src/contract/trajectory.ts'
import type { PipelineJob, PostrunInput, StageHandlers } from '../../../runner/pools/pipeline.ts'

export type StepKind = 'init' | 'run' | 'postrun' | 'eval'

export interface Step {
  id: string
  kind: StepKind
  signal: AbortSignal
  succeed(): void
  fail(): void
}

export function job(id: string, extra: Partial<PipelineJob> = {}): PipelineJob {
  return { id, priority: 0, sessionBudgetMs: null, agentBudgetMs: null, prewarmEvalRuntime: false, ...extra }
}

export class ManualStages implements StageHandlers<PipelineJob, { id: string }> {
  readonly pending: Step[] = []
  readonly disposed = new Map<string, number>()
  readonly evalDisposed = new Map<string, number>()
  /** Sessions whose evaluation runtime was prepared (each must be disposed exactly once). */
  readonly evalPrepared = new Set<string>()
  readonly postrunInputs = new Map<string, PostrunInput<PipelineJob, { id: string }>>()
  readonly calls: string[] = []

  #park<T>(id: string, kind: StepKind, signal: AbortSignal, value: () => T): Promise<T> {
    this.calls.push(`${kind}:${id}`)
    return new Promise<T>((resolve, reject) => {
      const step: Step = {
        id,
        kind,
        signal,
        succeed: () => {
          this.#drop(step)
          resolve(value())
        },
        fail: () => {
          this.#drop(step)
          reject(new Error(`${kind} of ${id} failed`))
        },
      }
      this.pending.push(step)
    })
  }

  #drop(step: Step): void {
    const index = this.pending.indexOf(step)
    if (index >= 0) this.pending.splice(index, 1)
  }

  step(id: string, kind: StepKind): Step {
    const found = this.pending.find((step) => step.id === id && step.kind === kind)
    if (!found) throw new Error(`no pending ${kind} of ${id}; pending: ${this.pending.map((s) => `${s.kind}:${s.id}`).join(', ')}`)
    return found
  }

  init(job: PipelineJob, signal: AbortSignal): Promise<{ id: string }> {
    return this.#park(job.id, 'init', signal, () => ({ id: job.id }))
  }

  run(job: PipelineJob, _prepared: { id: string }, signal: AbortSignal): Promise<AgentResult> {
    return this.#park(job.id, 'run', signal, () => ({ status: 'completed' as const, return_code: 0, error: null, timeout_stage: null }))
  }

  prewarmEval(job: PipelineJob, signal: AbortSignal): Promise<unknown> {
    return this.#park(job.id, 'eval', signal, () => {
      this.evalPrepared.add(job.id)
      return { evalRuntimeOf: job.id }
    })
  }

  postrun(input: PostrunInput<PipelineJob, { id: string }>, signal: AbortSignal): Promise<EvalResult | null> {
    this.postrunInputs.set(input.job.id, input)
    if (!input.evaluate) return Promise.resolve(null)
    return this.#park(input.job.id, 'postrun', signal, () => ({ outcome_reward: 1, trace_rewards: null, metadata: {} }))
  }

  async dispose(job: PipelineJob, prepared: { id: string } | null, evalRuntime: unknown): Promise<void> {
    if (prepared) this.disposed.set(job.id, (this.disposed.get(job.id) ?? 0) + 1)
    if (evalRuntime) this.evalDisposed.set(job.id, (this.evalDisposed.get(job.id) ?? 0) + 1)
  }
}

/**
 * Let every settled promise's continuation run: the pipeline moves on promise continuations only (its timers are
 * budgets, absent here), and the microtask queue, including what those continuations queue, drains before the
 * next macrotask, so one `setImmediate` turn is enough. (Five turns per step made the property test spend most
 * of its time in the event loop under load.)
 */
export async function flush(): Promise<void> {
  await new Promise((resolve) => setImmediate(resolve))
}
