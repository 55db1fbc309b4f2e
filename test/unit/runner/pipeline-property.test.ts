/**
 * Property: over random orders of submissions, stage completions and failures, cancellations of every
 * kind and shutdowns, no slot ever leaks or is released twice, no pool or the READY buffer exceeds its
 * bound, every session ends exactly once, and every runtime that was prepared is disposed exactly once.
 */
import fc from 'fast-check'
import { describe, it } from 'vitest'
import { type Outcome, type PipelineJob, type PipelineStage, type StopKind, StagePipeline } from '../../../runner/pools/pipeline.ts'
import { flush, job, ManualStages, type StepKind } from './manual-stages.ts'

type Action =
  | { type: 'submit'; prewarm: boolean }
  | { type: 'settle'; pick: number; ok: boolean; prefer: StepKind }
  | { type: 'cancel'; pick: number; kind: StopKind; stage: PipelineStage }

const actionArb: fc.Arbitrary<Action> = fc.oneof(
  { weight: 3, arbitrary: fc.record({ type: fc.constant('submit' as const), prewarm: fc.boolean() }) },
  {
    weight: 6,
    arbitrary: fc.record({
      type: fc.constant('settle' as const),
      pick: fc.nat(),
      ok: fc.integer({ min: 0, max: 3 }).map((n) => n > 0),
      prefer: fc.constantFrom<StepKind>('init', 'init', 'run', 'postrun', 'eval'),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      type: fc.constant('cancel' as const),
      pick: fc.nat(),
      kind: fc.constantFrom<StopKind>('cancel', 'drop', 'shutdown', 'session_timeout', 'agent_timeout'),
      stage: fc.constantFrom<PipelineStage>('QUEUED', 'INITIALIZING', 'READY', 'RUNNING', 'POSTRUN_QUEUED', 'POST_RUN'),
    }),
  },
)

describe('stage pipeline property', () => {
  it('never leaks or double-releases a slot, whatever the order of events', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          maxInit: fc.integer({ min: 1, max: 3 }),
          maxRun: fc.integer({ min: 1, max: 3 }),
          maxPostrun: fc.integer({ min: 1, max: 2 }),
          readyBuffer: fc.integer({ min: 0, max: 3 }),
        }),
        fc.array(actionArb, { minLength: 5, maxLength: 80, size: 'max' }),
        fc.option(fc.nat(60), { nil: null }),
        async (limits, actions, shutdownAt) => {
          const stages = new ManualStages()
          const finished = new Map<string, number>()
          const outcomes = new Map<string, Outcome>()
          const submitted: string[] = []
          const initialized = new Set<string>()
          const pipeline = new StagePipeline<PipelineJob, { id: string }>({
            ...limits,
            handlers: stages,
            onStage: (j, stage) => {
              if (stage === 'READY') initialized.add(j.id)
              const metrics = pipeline.metrics()
              if (metrics.ready_depth > limits.readyBuffer + limits.maxRun) throw new Error('ready buffer overflow')
            },
            onFinished: (j, outcome) => {
              finished.set(j.id, (finished.get(j.id) ?? 0) + 1)
              outcomes.set(j.id, outcome)
            },
          })
          // Runs after every step (tens of thousands of times): plain comparisons, not `expect` matchers.
          const check = () => {
            const bound = (what: string, value: number, max: number) => {
              if (value > max) throw new Error(`${what} ${value} exceeds its bound ${max}`)
            }
            bound('ready depth', pipeline.metrics().ready_depth, limits.readyBuffer)
            bound('init slots', pipeline.init.inUse, limits.maxInit)
            bound('run slots', pipeline.run.inUse, limits.maxRun)
            bound('postrun slots', pipeline.postrun.inUse, limits.maxPostrun)
          }
          for (const [index, action] of actions.entries()) {
            if (index === shutdownAt) pipeline.shutdown()
            if (action.type === 'submit') {
              const id = `s${submitted.length}`
              if (pipeline.submit(job(id, { prewarmEvalRuntime: action.prewarm }))) submitted.push(id)
            } else if (action.type === 'settle') {
              // Prefer one stage's steps, so that sessions pile up between stages (READY, POSTRUN_QUEUED).
              const preferred = stages.pending.filter((step) => step.kind === action.prefer)
              const pool = preferred.length > 0 ? preferred : stages.pending
              const step = pool[action.pick % Math.max(1, pool.length)]
              if (step) (action.ok ? step.succeed : step.fail)()
            } else if (action.type === 'cancel') {
              // Aim at one stage (else any held session), so every stage gets cancelled often.
              const inStage = submitted.filter((id) => pipeline.stageOf(id) === action.stage)
              const pool = inStage.length > 0 ? inStage : pipeline.held().map((held) => held.session_id)
              const target = pool[action.pick % Math.max(1, pool.length)]
              if (target) pipeline.cancel(target, action.kind)
            }
            await flush()
            check()
          }
          // Let everything finish: settle whatever is pending until nothing is held.
          for (let guard = 0; pipeline.size > 0 && guard < 1000; guard++) {
            const step = stages.pending[0]
            if (step) step.succeed()
            await flush()
            check()
          }
          // Plain comparisons here too (400 runs × every session): a failure names the session and the rule.
          const must = (ok: boolean, what: string) => {
            if (!ok) throw new Error(what)
          }
          must(pipeline.size === 0, `pipeline still holds ${pipeline.size} sessions`)
          for (const pool of [pipeline.init, pipeline.run, pipeline.postrun]) {
            must(pool.inUse === 0, `a pool leaks ${pool.inUse} slots`)
            must(pool.doubleReleases === 0, `a pool released a slot twice (${pool.doubleReleases})`)
            must(pool.peak <= pool.capacity, `a pool peaked at ${pool.peak} over its capacity ${pool.capacity}`)
          }
          for (const id of submitted) {
            const disposed = stages.disposed.get(id) ?? 0
            must(finished.get(id) === 1, `${id} ends ${finished.get(id) ?? 0} times, not once`)
            must(disposed === (initialized.has(id) ? 1 : disposed) && disposed <= 1, `${id} disposed ${disposed} times`)
            const evalDisposed = stages.evalDisposed.get(id) ?? 0
            must(evalDisposed === (stages.evalPrepared.has(id) ? 1 : 0), `${id} eval runtime disposed ${evalDisposed} times`)
            const outcome = outcomes.get(id) as Outcome
            // A session that reached RUNNING always has an agent result (partial results are never dropped).
            must(outcome.lastStage !== 'POST_RUN' || outcome.agentResult !== null, `${id} reached POST_RUN without an agent result`)
          }
          must(stages.pending.length === 0, `steps left pending: ${stages.pending.map((step) => `${step.kind}:${step.id}`).join(', ')}`)
        },
      ),
      { numRuns: 400 },
    )
  })
})
