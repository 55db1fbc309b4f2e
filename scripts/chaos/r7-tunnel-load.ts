/**
 * @module
 * R7 load through the runner tunnel: 500 concurrent rollout sessions × 20 turns (a fifth of them
 * streaming), spread over four runners whose engines answer through their WebSockets. Zero errors; every
 * answer captured; per-call p50/p99; resident memory of the edge (wrangler + workerd) and of this process
 * (the engine and the clients) at start and end, so growth is visible.
 */
import { RunnerClient } from '../../test/support/runner-client.ts'
import { callSession, edge5xx } from './apis.ts'
import { takeAllToRunning } from './runners.ts'
import { emptyRow, type Scenario } from './scenario.ts'
import { percentile, RUNNER_TOKEN, records, startChaosStack, until } from './stack.ts'

const RUNNERS = 4

export const r7TunnelLoad: Scenario = {
  id: 'R7',
  title: '500 concurrent sessions × 20 turns through the runner tunnel',
  async run({ scale, log }) {
    const sessionsWanted = Math.max(8, Math.round(500 * scale))
    const turns = Math.max(4, Math.round(20 * Math.sqrt(scale)))
    const row = {
      ...emptyRow(),
      sessions: sessionsWanted,
      turns,
      received: 0,
      p50_ms: 0,
      p99_ms: 0,
      calls_per_s: 0,
      submit_ms: 0,
      /** Cancels the runners got, by reason (re-dispatch churn: e.g. acknowledgements that missed their deadline). */
      cancels: {} as Record<string, number>,
      rss_start: { edge_mb: 0, chaos_mb: 0 },
      rss_end: { edge_mb: 0, chaos_mb: 0 },
    }
    const stack = await startChaosStack({ ROLLGATE_RUNNER_HEARTBEAT_MS: '2000' })
    const runners: RunnerClient[] = []
    try {
      const per = Math.ceil(sessionsWanted / RUNNERS)
      for (let i = 0; i < RUNNERS; i++) {
        const runner = new RunnerClient({
          edgeUrl: stack.edge.url,
          token: RUNNER_TOKEN,
          runnerId: `r7-${i}`,
          engineUrl: stack.engine.url,
          capacity: { max_init_workers: per, max_run_workers: per, max_postrun_workers: per },
        })
        await runner.start()
        runners.push(runner)
      }
      row.rss_start = stack.rss()
      const submitStarted = Date.now()
      // The submit registers and enqueues every session before it answers: minutes for hundreds on a loaded box.
      const submit = await stack.admin('/rollout/task/submit', {
        signal: AbortSignal.timeout(600_000),
        method: 'POST',
        body: JSON.stringify({
          task_id: 'r7',
          instruction: 'x',
          num_samples: sessionsWanted,
          timeout_seconds: 1800,
          agent: { harness: 'shell', custom_shell: { command: 'true' } },
          evaluator: { strategy: 'session_completed' },
          upstream: { route: 'runner' },
        }),
      })
      if (submit.status !== 200) throw new Error(`submit: ${submit.status} ${await submit.text()}`)
      row.submit_ms = Date.now() - submitStarted
      log(`submit of ${sessionsWanted} samples answered in ${row.submit_ms} ms`)
      const sessions = await takeAllToRunning(stack, 'r7', runners, sessionsWanted, 180_000)
      log(`${sessions.length} sessions RUNNING on ${RUNNERS} runners; ${turns} turns each`)
      const latencies: number[] = []
      const started = Date.now()
      const received = new Map<string, number>()
      await Promise.all(
        sessions.map(async (session, index) => {
          for (let turn = 0; turn < turns; turn++) {
            const stream = (index + turn) % 5 === 0
            const at = performance.now()
            row.sent++
            try {
              const call = await callSession(stack.edge.url, session.token, 'openai-chat', stream, `session ${index} turn ${turn}`, 120_000)
              latencies.push(performance.now() - at)
              if (!call.ok) {
                row.errors++
                if (edge5xx(call.response)) row.edge_5xx++
                if (row.notes.length < 10) row.notes.push(`${call.response.status}: ${call.text.slice(0, 120)}`)
                continue
              }
              received.set(session.session_id, (received.get(session.session_id) ?? 0) + 1)
            } catch (error) {
              row.errors++
              if (row.notes.length < 10) row.notes.push(`transport: ${(error as Error).message}`)
            }
          }
        }),
      )
      const seconds = (Date.now() - started) / 1000
      row.received = [...received.values()].reduce((a, b) => a + b, 0)
      row.p50_ms = percentile(latencies, 50)
      row.p99_ms = percentile(latencies, 99)
      row.calls_per_s = Math.round((row.sent / seconds) * 10) / 10
      row.rss_end = stack.rss()
      for (const runner of runners)
        for (const message of runner.received)
          if (message.type === 'cancel') row.cancels[message.reason] = (row.cancels[message.reason] ?? 0) + 1
      log(`${row.sent} calls in ${seconds.toFixed(1)} s (${row.calls_per_s}/s), p50 ${row.p50_ms} ms, p99 ${row.p99_ms} ms`)
      row.served = stack.engine.stats().requests.chat_completions ?? 0
      for (const session of sessions) {
        const ok = (await records(stack, session.session_id)).filter((record) => record.status === 'ok').length
        row.captured += ok
        const got = received.get(session.session_id) ?? 0
        if (ok < got) row.lost += got - ok
      }
      for (const runner of runners) {
        for (const session of runner.assignments.values()) runner.finish(session.session_id, { status: 'completed', return_code: 0 })
      }
      const task = await until(
        async () => {
          const view = (await (await stack.admin('/rollout/task/r7?results=false')).json()) as { status: string; usable_sessions: number }
          return view.status === 'running' ? undefined : view
        },
        600_000,
        'the task resolved',
      )
      if (task.usable_sessions !== sessionsWanted) {
        row.errors++
        row.notes.push(`${task.usable_sessions}/${sessionsWanted} sessions usable`)
      }
      return row
    } finally {
      for (const runner of runners) await runner.shutdown().catch(() => {})
      await stack.stop()
    }
  },
}
