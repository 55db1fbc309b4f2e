/**
 * The runner's stage pools: ordering, bounds, the independent READY buffer, cancellation at every stage,
 * budgets, crashes and partial results on shutdown. Stages are settled by hand (no timers) except where a
 * budget timer is the thing under test.
 */
import { describe, expect, it } from 'vitest'
import { type Outcome, type PipelineJob, StagePipeline } from '../../../runner/pools/pipeline.ts'
import { SimulatedStages } from '../../../runner/pools/simulated-stages.ts'
import { flush, job, ManualStages } from './manual-stages.ts'

function setup(limits: { maxInit?: number; maxRun?: number; maxPostrun?: number; readyBuffer?: number } = {}) {
  const stages = new ManualStages()
  const outcomes = new Map<string, Outcome>()
  const seen: string[] = []
  const pipeline = new StagePipeline<PipelineJob, { id: string }>({
    maxInit: limits.maxInit ?? 2,
    maxRun: limits.maxRun ?? 1,
    maxPostrun: limits.maxPostrun ?? 1,
    readyBuffer: limits.readyBuffer ?? 1,
    handlers: stages,
    onStage: (j, stage) => seen.push(`${j.id}:${stage}`),
    onFinished: (j, outcome) => {
      if (outcomes.has(j.id)) throw new Error(`${j.id} finished twice`)
      outcomes.set(j.id, outcome)
    },
  })
  return { stages, outcomes, seen, pipeline }
}

function noLeaks(pipeline: StagePipeline<PipelineJob, { id: string }>) {
  for (const pool of [pipeline.init, pipeline.run, pipeline.postrun]) {
    expect(pool.inUse, `${pool.name} in use`).toBe(0)
    expect(pool.doubleReleases, `${pool.name} double releases`).toBe(0)
  }
  expect(pipeline.size).toBe(0)
}

describe('stage pipeline', () => {
  it('walks INIT → READY → RUNNING → POST_RUN in order within every bound', async () => {
    const stages = new SimulatedStages<PipelineJob>(() => ({ initMs: 5, runMs: 15, postrunMs: 5 }))
    const order: string[] = []
    let maxReady = 0
    const outcomes: Outcome[] = []
    const pipeline = new StagePipeline<PipelineJob, { id: string }>({
      maxInit: 2,
      maxRun: 2,
      maxPostrun: 1,
      readyBuffer: 1,
      handlers: stages,
      onStage: (j, stage) => {
        order.push(`${j.id}:${stage}`)
        maxReady = Math.max(maxReady, pipeline.metrics().ready_depth)
      },
      onFinished: (_j, outcome) => outcomes.push(outcome),
    })
    for (let i = 0; i < 8; i++) pipeline.submit(job(`s${i}`))
    await pipeline.idle()
    expect(outcomes).toHaveLength(8)
    for (const outcome of outcomes) {
      expect(outcome.agentResult?.status).toBe('completed')
      expect(outcome.evalResult?.outcome_reward).toBe(1)
      expect(outcome.report).toBe(true)
      const mine = order.filter((line) => line.startsWith(`${outcome.sessionId}:`)).map((line) => line.split(':')[1])
      expect(mine).toEqual(['INITIALIZING', 'READY', 'RUNNING', 'POST_RUN'])
      expect(stages.disposed.get(outcome.sessionId)).toBe(1)
    }
    expect(pipeline.init.peak).toBeLessThanOrEqual(2)
    expect(pipeline.run.peak).toBe(2)
    expect(pipeline.postrun.peak).toBe(1)
    expect(maxReady).toBeLessThanOrEqual(1)
    noLeaks(pipeline)
  })

  it('starts INIT by priority, then arrival', async () => {
    const { stages, pipeline } = setup({ maxInit: 1, maxRun: 1, readyBuffer: 3 })
    pipeline.submit(job('first'))
    pipeline.submit(job('low', { priority: 1 }))
    pipeline.submit(job('high', { priority: 90 }))
    pipeline.submit(job('low2', { priority: 1 }))
    expect(stages.calls).toEqual(['init:first'])
    for (const id of ['first', 'high', 'low']) {
      stages.step(id, 'init').succeed()
      await flush()
    }
    expect(stages.calls.filter((call) => call.startsWith('init:'))).toEqual(['init:first', 'init:high', 'init:low', 'init:low2'])
    pipeline.shutdown()
    await flush()
  })

  it('keeps prepared sessions in the READY buffer without holding an INIT slot, and never beyond it', async () => {
    const { stages, pipeline } = setup({ maxInit: 1, maxRun: 1, readyBuffer: 2 })
    for (const id of ['a', 'b', 'c', 'd', 'e']) pipeline.submit(job(id))
    stages.step('a', 'init').succeed()
    await flush()
    expect(pipeline.stageOf('a')).toBe('RUNNING')
    stages.step('b', 'init').succeed()
    await flush()
    stages.step('c', 'init').succeed()
    await flush()
    // b and c wait prepared; the INIT slot is free but d may not start: the buffer (2) is full.
    expect(pipeline.metrics()).toMatchObject({ ready_depth: 2, init_inflight: 0, run_inflight: 1, init_queue_depth: 2 })
    expect(stages.calls).not.toContain('init:d')
    stages.step('a', 'run').succeed()
    await flush()
    // a's run slot went to b at once; a buffer place opened, so d starts INIT.
    expect(pipeline.stageOf('b')).toBe('RUNNING')
    expect(stages.calls).toContain('init:d')
    expect(pipeline.metrics()).toMatchObject({ ready_depth: 1, init_inflight: 1, postrun_inflight: 1 })
    pipeline.shutdown()
    for (const step of [...stages.pending]) step.fail()
    await flush()
    await pipeline.idle()
    noLeaks(pipeline)
  })

  it('with no READY buffer, starts INIT only for a free run slot', async () => {
    const { stages, pipeline } = setup({ maxInit: 4, maxRun: 2, readyBuffer: 0 })
    for (const id of ['a', 'b', 'c']) pipeline.submit(job(id))
    expect(stages.calls).toEqual(['init:a', 'init:b'])
    pipeline.shutdown()
    for (const step of [...stages.pending]) step.fail()
    await pipeline.idle()
    noLeaks(pipeline)
  })

  it('cancels at every stage without leaking or double-releasing a slot; RUNNING still goes through POSTRUN', async () => {
    const { stages, outcomes, pipeline } = setup({ maxInit: 3, maxRun: 1, maxPostrun: 1, readyBuffer: 2 })
    for (const id of ['run', 'ready', 'init', 'queued']) pipeline.submit(job(id))
    stages.step('run', 'init').succeed()
    stages.step('ready', 'init').succeed()
    await flush()
    expect(pipeline.stageOf('run')).toBe('RUNNING')
    expect(pipeline.stageOf('ready')).toBe('READY')
    expect(pipeline.stageOf('init')).toBe('INITIALIZING')
    expect(pipeline.stageOf('queued')).toBe('QUEUED')

    pipeline.cancel('queued', 'cancel', 'task cancelled')
    expect(outcomes.get('queued')).toMatchObject({ agentResult: null, error: 'cancelled: task cancelled', lastStage: 'QUEUED' })

    pipeline.cancel('init', 'cancel')
    expect(stages.step('init', 'init').signal.aborted).toBe(true)
    stages.step('init', 'init').fail()
    await flush()
    expect(outcomes.get('init')).toMatchObject({ agentResult: null, error: 'cancelled', lastStage: 'INITIALIZING' })

    pipeline.cancel('ready', 'cancel')
    await flush()
    expect(outcomes.get('ready')).toMatchObject({ agentResult: null, lastStage: 'READY' })
    expect(stages.disposed.get('ready')).toBe(1)

    pipeline.cancel('run', 'cancel', 'early stop')
    pipeline.cancel('run', 'cancel', 'again') // idempotent
    expect(stages.step('run', 'run').signal.aborted).toBe(true)
    stages.step('run', 'run').succeed()
    await flush()
    // Evaluated on the partial work.
    stages.step('run', 'postrun').succeed()
    await flush()
    expect(outcomes.get('run')).toMatchObject({
      agentResult: { status: 'failed', error: 'cancelled: early stop', return_code: 0 },
      evalResult: { outcome_reward: 1 },
      report: true,
      lastStage: 'POST_RUN',
    })
    expect(stages.disposed.get('run')).toBe(1)
    noLeaks(pipeline)
  })

  it('a soft cancel leaves POSTRUN alone; a drop stops it without a report', async () => {
    const { stages, outcomes, pipeline } = setup({ maxInit: 2, maxRun: 2, maxPostrun: 1, readyBuffer: 0 })
    for (const id of ['p1', 'p2']) pipeline.submit(job(id))
    for (const id of ['p1', 'p2']) stages.step(id, 'init').succeed()
    await flush()
    for (const id of ['p1', 'p2']) stages.step(id, 'run').succeed()
    await flush()
    expect(pipeline.stageOf('p1')).toBe('POST_RUN')
    expect(pipeline.stageOf('p2')).toBe('POSTRUN_QUEUED')
    pipeline.cancel('p1', 'cancel')
    expect(stages.step('p1', 'postrun').signal.aborted).toBe(false)
    pipeline.cancel('p2', 'drop')
    pipeline.cancel('p1', 'drop')
    expect(stages.step('p1', 'postrun').signal.aborted).toBe(true)
    stages.step('p1', 'postrun').fail()
    await flush()
    await pipeline.idle()
    expect(outcomes.get('p1')?.report).toBe(false)
    expect(outcomes.get('p2')).toMatchObject({ report: false, evalResult: null })
    expect(stages.postrunInputs.get('p2')?.evaluate).toBe(false)
    noLeaks(pipeline)
  })

  it('a harness crash is reported failed and still evaluated', async () => {
    const { stages, outcomes, pipeline } = setup()
    pipeline.submit(job('x'))
    stages.step('x', 'init').succeed()
    await flush()
    stages.step('x', 'run').fail()
    await flush()
    stages.step('x', 'postrun').succeed()
    await flush()
    expect(outcomes.get('x')).toMatchObject({
      agentResult: { status: 'failed', error: 'harness crashed: run of x failed' },
      evalResult: { outcome_reward: 1 },
    })
    noLeaks(pipeline)
  })

  it('an INIT failure ends the session with its error and frees the slot', async () => {
    const { stages, outcomes, pipeline } = setup({ maxInit: 1 })
    pipeline.submit(job('bad'))
    pipeline.submit(job('good'))
    stages.step('bad', 'init').fail()
    await flush()
    expect(outcomes.get('bad')).toMatchObject({ agentResult: null, error: 'init failed: init of bad failed', report: true })
    expect(stages.calls).toContain('init:good')
    pipeline.shutdown()
    stages.step('good', 'init').fail()
    await pipeline.idle()
    noLeaks(pipeline)
  })

  it('agent budget: the harness is stopped as a timeout and evaluated', async () => {
    const { stages, outcomes, pipeline } = setup()
    pipeline.submit(job('slow', { agentBudgetMs: 20, sessionBudgetMs: 60_000 }))
    stages.step('slow', 'init').succeed()
    await flush()
    const run = stages.step('slow', 'run')
    await new Promise<void>((resolve) => run.signal.addEventListener('abort', () => resolve(), { once: true }))
    run.succeed()
    await flush()
    const postrun = stages.postrunInputs.get('slow')
    expect(postrun?.agentResult).toMatchObject({ status: 'timeout', timeout_stage: 'exec', error: 'agent budget exceeded' })
    expect(postrun?.timeoutMs).toBeGreaterThan(50_000) // the rest of the session budget
    stages.step('slow', 'postrun').succeed()
    await pipeline.idle()
    expect(outcomes.get('slow')?.evalResult?.outcome_reward).toBe(1)
    noLeaks(pipeline)
  })

  it('session budget: spent while waiting READY ends the session and disposes the runtime', async () => {
    const { stages, outcomes, pipeline } = setup({ maxRun: 1, readyBuffer: 1 })
    pipeline.submit(job('holder'))
    pipeline.submit(job('waiter', { sessionBudgetMs: 30 }))
    stages.step('holder', 'init').succeed()
    stages.step('waiter', 'init').succeed()
    await flush()
    expect(pipeline.stageOf('waiter')).toBe('READY')
    await new Promise<void>((resolve) => {
      const check = () => (outcomes.has('waiter') ? resolve() : setTimeout(check, 5))
      check()
    })
    expect(outcomes.get('waiter')).toMatchObject({ agentResult: null, error: 'session budget exceeded', lastStage: 'READY' })
    expect(stages.disposed.get('waiter')).toBe(1)
    pipeline.shutdown()
    stages.step('holder', 'run').succeed()
    await pipeline.idle()
    noLeaks(pipeline)
  })

  it('shutdown: running sessions report partial results without evaluation; unstarted ones go back unreported', async () => {
    const { stages, outcomes, pipeline } = setup({ maxInit: 2, maxRun: 1, readyBuffer: 1 })
    for (const id of ['r', 'i', 'q']) pipeline.submit(job(id))
    stages.step('r', 'init').succeed()
    await flush()
    pipeline.shutdown('SIGTERM twice')
    expect(pipeline.submit(job('late'))).toBe(false)
    stages.step('r', 'run').succeed()
    stages.step('i', 'init').fail()
    await pipeline.idle()
    expect(outcomes.get('r')).toMatchObject({
      report: true,
      agentResult: { status: 'failed', error: 'runner cancelled: SIGTERM twice' },
      evalResult: null,
    })
    expect(stages.postrunInputs.get('r')?.evaluate).toBe(false)
    expect(outcomes.get('i')?.report).toBe(false)
    expect(outcomes.get('q')?.report).toBe(false)
    noLeaks(pipeline)
  })

  it('prewarms a fresh evaluation runtime during RUNNING and hands it to POSTRUN', async () => {
    const { stages, pipeline } = setup()
    pipeline.submit(job('e', { prewarmEvalRuntime: true }))
    stages.step('e', 'init').succeed()
    await flush()
    stages.step('e', 'eval').succeed()
    stages.step('e', 'run').succeed()
    await flush()
    expect(stages.postrunInputs.get('e')?.evalRuntime).toEqual({ evalRuntimeOf: 'e' })
    stages.step('e', 'postrun').succeed()
    await pipeline.idle()
    expect(stages.evalDisposed.get('e')).toBe(1)
    noLeaks(pipeline)
  })

  it('held() reports what the edge must keep, POSTRUN as RUNNING', async () => {
    const { stages, pipeline } = setup({ maxInit: 1, maxRun: 1, readyBuffer: 1 })
    for (const id of ['a', 'b', 'c']) pipeline.submit(job(id))
    stages.step('a', 'init').succeed()
    await flush()
    stages.step('a', 'run').succeed()
    await flush()
    expect(pipeline.held()).toEqual([
      { session_id: 'a', status: 'RUNNING' },
      { session_id: 'b', status: 'INITIALIZING' },
      { session_id: 'c', status: 'ASSIGNED' },
    ])
    pipeline.shutdown()
    for (const step of [...stages.pending]) step.fail()
    await pipeline.idle()
    noLeaks(pipeline)
  })
})
