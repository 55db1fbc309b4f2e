/**
 * @module
 * R4 edge restart under load: 50 rollout sessions (two runners over real WebSockets, inference tunnelled
 * through them to the engine), each making model calls streamed and not, while the edge is SIGKILLed and
 * restarted twice. Clients retry like harness SDKs do. Every answer a client received must be captured,
 * no session may end ERROR because of the restart, and runners keep their sessions.
 */
import { RunnerClient } from '../../test/support/runner-client.ts'
import { callSession, edge5xx } from './apis.ts'
import { takeAllToRunning } from './runners.ts'
import { emptyRow, type Scenario } from './scenario.ts'
import { RUNNER_TOKEN, records, sleep, startChaosStack, until } from './stack.ts'

const TURNS = 6
const MAX_TRIES = 40

export const r4EdgeRestart: Scenario = {
  id: 'R4',
  title: 'edge SIGKILL + restart ×2 under load (50 sessions, stream and not)',
  async run({ scale, log }) {
    const sessionsWanted = Math.max(4, Math.round(50 * scale))
    const row = {
      ...emptyRow(),
      sessions: sessionsWanted,
      restarts: 0,
      sessions_error: 0,
      client_retries: 0,
      received: 0,
      runner_reconnects: 0,
      edge_5xx_while_down: 0,
      served_not_received: 0,
    }
    const stack = await startChaosStack({ ROLLGATE_RUNNER_HEARTBEAT_MS: '1000', ROLLGATE_RUNNER_GRACE_MS: '30000' })
    const runners: RunnerClient[] = []
    try {
      const capacity = { max_init_workers: sessionsWanted, max_run_workers: sessionsWanted, max_postrun_workers: sessionsWanted }
      for (const id of ['r4-a', 'r4-b']) {
        const runner = new RunnerClient({
          edgeUrl: stack.edge.url,
          token: RUNNER_TOKEN,
          runnerId: id,
          engineUrl: stack.engine.url,
          capacity,
        })
        await runner.start()
        runners.push(runner)
      }
      const submit = await stack.admin('/rollout/task/submit', {
        method: 'POST',
        body: JSON.stringify({
          task_id: 'r4',
          instruction: 'create hello.txt containing hi',
          num_samples: sessionsWanted,
          timeout_seconds: 900,
          agent: { harness: 'shell', custom_shell: { command: 'echo {instruction}' } },
          evaluator: { strategy: 'session_completed' },
        }),
      })
      if (submit.status !== 200) throw new Error(`submit: ${submit.status} ${await submit.text()}`)
      const before = stack.engine.stats().requests.chat_completions ?? 0
      const sessions = await takeAllToRunning(stack, 'r4', runners, sessionsWanted, 60_000)
      await until(
        async () => {
          const task = (await (await stack.admin('/rollout/task/r4?results=false')).json()) as { sessions: { status: string }[] }
          return task.sessions.every((session) => session.status === 'RUNNING') ? true : undefined
        },
        60_000,
        'every session RUNNING',
      )
      log(`${sessions.length} sessions RUNNING on ${runners.length} runners`)
      const received = new Map<string, number>()
      const client = async (session: (typeof sessions)[number]) => {
        for (let turn = 0; turn < TURNS; turn++) {
          const stream = turn % 2 === 1
          for (let attempt = 0; attempt < MAX_TRIES; attempt++) {
            row.sent++
            if (attempt > 0) row.client_retries++
            try {
              const call = await callSession(
                stack.edge.url,
                session.token,
                'openai-chat',
                stream,
                `turn ${turn}: create hello.txt containing hi`,
                30_000,
              )
              if (call.ok) {
                received.set(session.session_id, (received.get(session.session_id) ?? 0) + 1)
                break
              }
              if (edge5xx(call.response)) row.edge_5xx_while_down++
            } catch {
              // the edge is down: retry as an SDK would
            }
            await sleep(250 + Math.random() * 250)
          }
        }
      }
      const load = Promise.all(sessions.map(client))
      for (let restart = 0; restart < 2; restart++) {
        await sleep(1_500)
        log(`SIGKILL edge (${restart + 1}/2)`)
        await stack.restartEdge('SIGKILL')
        row.restarts++
      }
      await load
      // The scripted runners (like harness clients) drop what they send while disconnected; the real runner
      // keeps finished results in an outbox. Finish only once both are back and registered.
      await until(
        async () => {
          const status = (await (await stack.admin('/rollout/status')).json()) as {
            nodes: { nodes: { node_id: string; healthy: boolean }[] }
          }
          const healthy = status.nodes.nodes.filter((node) => node.healthy).length
          return runners.every((runner) => runner.connected) && healthy >= runners.length ? true : undefined
        },
        60_000,
        'runners reconnected',
      )
      log('load done; finishing sessions')
      for (const runner of runners) {
        for (const session of runner.assignments.values()) runner.finish(session.session_id, { status: 'completed', return_code: 0 })
      }
      const task = await until(
        async () => {
          const status = (await (await stack.admin('/rollout/task/r4?results=false')).json()) as {
            status: string
            sessions: { session_id: string; status: string }[]
          }
          return status.status === 'running' ? undefined : status
        },
        120_000,
        'task resolved',
      )
      row.served = (stack.engine.stats().requests.chat_completions ?? 0) - before
      for (const session of task.sessions) {
        if (session.status !== 'COMPLETED') {
          row.sessions_error++
          row.errors++
          const state = (await (await stack.admin(`/rollout/session/${session.session_id}`)).json()) as { error?: string | null }
          row.notes.push(`${session.session_id} ended ${session.status}: ${state.error ?? ''}`)
        }
        const kept = (await records(stack, session.session_id)).filter((record) => record.status === 'ok')
        row.captured += kept.length
        const got = received.get(session.session_id) ?? 0
        if (got < TURNS) {
          row.errors++
          row.notes.push(`${session.session_id}: client got ${got}/${TURNS} answers`)
        }
        if (kept.length < got) row.lost += got - kept.length
      }
      row.received = [...received.values()].reduce((a, b) => a + b, 0)
      const reconnects = runners.reduce((sum, runner) => sum + runner.stats.connects, 0) - runners.length
      row.runner_reconnects = reconnects
      row.served_not_received = Math.max(0, row.served - row.received)
      row.notes.push(
        `edge 5xx while restarting (retried by the client): ${row.edge_5xx_while_down}; engine answers in flight when the edge died (never delivered, so not a loss): ${row.served_not_received}`,
      )
      return row
    } finally {
      for (const runner of runners) await runner.shutdown().catch(() => {})
      await stack.stop()
    }
  },
}
