/**
 * @module
 * `npm run bench:runner`: RUNNING-slot occupancy of the runner's stage pools with simulated stages of
 * INIT 20 s / RUN 30 s / POSTRUN 10 s, time-scaled (`--scale`, default 1/100), with the independent READY
 * buffer (= max_run, the runner's default) and without it (0: a run slot waits for a whole INIT). The edge is
 * modelled as always having work: sessions are submitted whenever the runner holds fewer than its admission
 * limit (`max_init + ready_buffer + max_run + max_postrun`, as the hub's dispatch does). Occupancy is measured
 * over a steady-state window after a warm-up; the two variants alternate (A/B/A/B) on the same machine.
 *
 * Target: ≥ 95 % with the buffer. Last line: one JSON object.
 */
import { parseArgs } from '../scripts/lib/cli-args.ts'
import { type PipelineJob, StagePipeline } from '../runner/pools/pipeline.ts'
import { occupancy, SimulatedStages } from '../runner/pools/simulated-stages.ts'

const { values } = parseArgs({
  options: {
    scale: { type: 'string', default: '0.01' },
    rounds: { type: 'string', default: '2' },
    'max-init': { type: 'string', default: '4' },
    'max-run': { type: 'string', default: '4' },
    'max-postrun': { type: 'string', default: '4' },
    /** Steady-state window, in simulated seconds (after a warm-up of one INIT + RUN). */
    'window-seconds': { type: 'string', default: '600' },
  },
})

const scale = Number(values.scale)
const limits = { maxInit: Number(values['max-init']), maxRun: Number(values['max-run']), maxPostrun: Number(values['max-postrun']) }
const durations = { initMs: 20_000 * scale, runMs: 30_000 * scale, postrunMs: 10_000 * scale }
const windowMs = Number(values['window-seconds']) * 1000 * scale
const warmupMs = durations.initMs + durations.runMs

interface Variant {
  occupancy: number
  sessions_finished: number
  max_ready_depth: number
}

async function measure(readyBuffer: number): Promise<Variant> {
  const stages = new SimulatedStages<PipelineJob>(() => durations)
  let next = 0
  let maxReady = 0
  let stopped = false
  const admission = limits.maxInit + readyBuffer + limits.maxRun + limits.maxPostrun
  const pipeline: StagePipeline<PipelineJob, { id: string }> = new StagePipeline<PipelineJob, { id: string }>({
    ...limits,
    readyBuffer,
    handlers: stages,
    onStage: () => {
      maxReady = Math.max(maxReady, pipeline.metrics().ready_depth)
    },
    onFinished: () => queueMicrotask(feed),
  })
  const feed = () => {
    while (!stopped && pipeline.size < admission) {
      pipeline.submit({ id: `s${next++}`, priority: 0, sessionBudgetMs: null, agentBudgetMs: null, prewarmEvalRuntime: false })
    }
  }
  const start = performance.now()
  feed()
  await new Promise((resolve) => setTimeout(resolve, warmupMs + windowMs))
  const end = performance.now()
  stopped = true
  pipeline.shutdown('benchmark over')
  await pipeline.idle()
  return {
    occupancy: occupancy(stages.events, limits.maxRun, start + warmupMs, end),
    sessions_finished: stages.events.filter((event) => event.what === 'run' && !event.aborted && event.end <= end).length,
    max_ready_depth: maxReady,
  }
}

const rounds = Math.max(1, Number(values.rounds))
const withBuffer: Variant[] = []
const without: Variant[] = []
for (let round = 0; round < rounds; round++) {
  withBuffer.push(await measure(limits.maxRun))
  without.push(await measure(0))
  const a = withBuffer.at(-1) as Variant
  const b = without.at(-1) as Variant
  console.log(
    `round ${round + 1}: with READY buffer ${(a.occupancy * 100).toFixed(1)} % (${a.sessions_finished} runs), without ${(b.occupancy * 100).toFixed(1)} % (${b.sessions_finished} runs)`,
  )
}
const mean = (list: Variant[]) => list.reduce((sum, item) => sum + item.occupancy, 0) / list.length
const result = {
  bench: 'runner',
  stage_seconds: { init: 20, run: 30, postrun: 10 },
  scale,
  limits: { ...limits, ready_buffer: limits.maxRun },
  window_simulated_seconds: Number(values['window-seconds']),
  rounds,
  occupancy_with_ready_buffer: Number(mean(withBuffer).toFixed(4)),
  occupancy_without_ready_buffer: Number(mean(without).toFixed(4)),
  ratio: Number((mean(withBuffer) / mean(without)).toFixed(3)),
  runs_with_ready_buffer: withBuffer.map((item) => item.sessions_finished),
  runs_without_ready_buffer: without.map((item) => item.sessions_finished),
  target_met: mean(withBuffer) >= 0.95,
}
console.log(JSON.stringify(result))
