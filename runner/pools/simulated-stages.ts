/**
 * @module
 * Stage handlers that only wait: INIT, RUN and POSTRUN take fixed (scaled) durations and honour their
 * abort signal at once. Used by `npm run bench:runner` and the pool tests; they record the timeline of
 * every session so occupancy and ordering can be computed afterwards.
 */
import type { AgentResult } from '../../src/contract/runner-protocol.ts'
import type { EvalResult } from '../../src/contract/trajectory.ts'
import type { PipelineJob, PostrunInput, StageHandlers } from './pipeline.ts'

export interface SimulatedDurations {
  initMs: number
  runMs: number
  postrunMs: number
}

export interface SimulatedEvent {
  id: string
  what: 'init' | 'run' | 'postrun' | 'dispose'
  start: number
  end: number
  aborted: boolean
}

function wait(ms: number, signal: AbortSignal): Promise<boolean> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve(false)
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort)
      resolve(true)
    }, ms)
    const onAbort = () => {
      clearTimeout(timer)
      resolve(false)
    }
    signal.addEventListener('abort', onAbort, { once: true })
  })
}

export class SimulatedStages<J extends PipelineJob> implements StageHandlers<J, { id: string }> {
  readonly events: SimulatedEvent[] = []
  readonly disposed = new Map<string, number>()

  readonly durations: (job: J) => SimulatedDurations
  readonly now: () => number

  constructor(durations: (job: J) => SimulatedDurations, now: () => number = () => performance.now()) {
    this.durations = durations
    this.now = now
  }

  async #span(id: string, what: SimulatedEvent['what'], ms: number, signal: AbortSignal): Promise<boolean> {
    const start = this.now()
    const done = await wait(ms, signal)
    this.events.push({ id, what, start, end: this.now(), aborted: !done })
    return done
  }

  async init(job: J, signal: AbortSignal): Promise<{ id: string }> {
    if (!(await this.#span(job.id, 'init', this.durations(job).initMs, signal))) throw new Error('init aborted')
    return { id: job.id }
  }

  async run(job: J, _prepared: { id: string }, signal: AbortSignal): Promise<AgentResult> {
    const done = await this.#span(job.id, 'run', this.durations(job).runMs, signal)
    return { status: done ? 'completed' : 'failed', return_code: done ? 0 : null, error: null, timeout_stage: null }
  }

  async postrun(input: PostrunInput<J, { id: string }>, signal: AbortSignal): Promise<EvalResult | null> {
    if (!input.evaluate) return null
    const done = await this.#span(input.job.id, 'postrun', this.durations(input.job).postrunMs, signal)
    return done ? { outcome_reward: input.agentResult.status === 'completed' ? 1 : 0, trace_rewards: null, metadata: {} } : null
  }

  async dispose(job: J): Promise<void> {
    this.disposed.set(job.id, (this.disposed.get(job.id) ?? 0) + 1)
  }
}

/** Share of `slots × window` during which RUN spans were active, over [from, to]. */
export function occupancy(events: readonly SimulatedEvent[], slots: number, from: number, to: number): number {
  let busy = 0
  for (const event of events) {
    if (event.what !== 'run') continue
    busy += Math.max(0, Math.min(event.end, to) - Math.max(event.start, from))
  }
  return busy / (slots * (to - from))
}
