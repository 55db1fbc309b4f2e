/**
 * @module
 * R3 runner kill -9: the real runner (`rollgate runner --runtime local`, bubblewrap sandboxes) runs six
 * sessions of a shell harness that keeps calling the model; while some are RUNNING and others are still
 * queued, INIT or READY, the runner's whole process group is SIGKILLed, then the runner is started again
 * with the same id and state (its enrolment secret). Sessions that had not reached RUNNING must be
 * re-dispatched and complete; RUNNING ones must end with their partial trajectory; no captured completion
 * may be lost.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { REPO_ROOT } from '../lib/processes.ts'
import { emptyRow, type Scenario } from './scenario.ts'
import { MODEL, RUNNER_TOKEN, records, sleep, startChaosStack, until } from './stack.ts'

const SAMPLES = 6
const CALLS_PER_SESSION = 12

/** The harness: a loop of model calls through the forwarded edge port, then exit 0. */
const LOOP = [
  `for i in $(seq 1 ${CALLS_PER_SESSION}); do`,
  `curl -sf -X POST "$OPENAI_BASE_URL/chat/completions" -H "authorization: Bearer $OPENAI_API_KEY" -H 'content-type: application/json'`,
  `-d "{\\"model\\":\\"${MODEL}\\",\\"messages\\":[{\\"role\\":\\"user\\",\\"content\\":\\"call $i\\"}]}" > /dev/null || exit 3;`,
  'sleep 0.4; done',
].join(' ')

interface RunnerProcess {
  child: ChildProcess
  output(): string
  kill(signal: NodeJS.Signals): Promise<void>
}

function startRunner(edgeUrl: string, engineUrl: string, stateDir: string): RunnerProcess {
  const child = spawn(
    process.execPath,
    [
      join(REPO_ROOT, 'cli/rollgate.ts'),
      'runner',
      '--edge',
      edgeUrl,
      '--token',
      RUNNER_TOKEN,
      '--upstream',
      engineUrl,
      '--runtime',
      'local',
      '--runner-id',
      'r3-runner',
      '--state-dir',
      stateDir,
      '--max-init',
      '2',
      '--max-run',
      '3',
      '--max-postrun',
      '2',
      '--ready-buffer',
      '1',
      '--json-logs',
    ],
    { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'], detached: true },
  )
  let output = ''
  child.stdout?.on('data', (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-50_000)
  })
  child.stderr?.on('data', (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-50_000)
  })
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  const killGroup = (signal: NodeJS.Signals) => {
    try {
      if (child.pid) process.kill(-child.pid, signal)
    } catch {}
  }
  const onExit = () => killGroup('SIGKILL')
  process.once('exit', onExit)
  return {
    child,
    output: () => output,
    async kill(signal) {
      killGroup(signal)
      await exited
      killGroup('SIGKILL')
      process.off('exit', onExit)
    },
  }
}

interface TaskView {
  status: string
  sessions: { session_id: string; status: string }[]
}

export const r3RunnerKill: Scenario = {
  id: 'R3',
  title: 'real runner kill -9 mid-RUNNING, then restart',
  async run({ log }) {
    const row = {
      ...emptyRow(),
      sessions: SAMPLES,
      running_at_kill: 0,
      before_running_at_kill: 0,
      redispatched_completed: 0,
      partial_finalized: 0,
      records_before_kill: 0,
      records_of_killed_after: 0,
    }
    const stack = await startChaosStack({ ROLLGATE_RUNNER_HEARTBEAT_MS: '1000', ROLLGATE_RUNNER_GRACE_MS: '4000' })
    const stateDir = mkdtempSync(join(tmpdir(), 'rollgate-chaos-runner-'))
    let runner = startRunner(stack.edge.url, stack.engine.url, stateDir)
    try {
      await until(
        async () => {
          const status = (await (await stack.admin('/rollout/status')).json()) as {
            nodes: { nodes: { node_id: string; healthy: boolean }[] }
          }
          return status.nodes.nodes.some((node) => node.node_id === 'r3-runner' && node.healthy) ? true : undefined
        },
        60_000,
        'the runner registered',
      )
      const submit = await stack.admin('/rollout/task/submit', {
        method: 'POST',
        body: JSON.stringify({
          task_id: 'r3',
          instruction: 'call the model in a loop',
          num_samples: SAMPLES,
          timeout_seconds: 600,
          agent: { harness: 'shell', custom_shell: { command: LOOP } },
          evaluator: { strategy: 'session_completed' },
        }),
      })
      if (submit.status !== 200) throw new Error(`submit: ${submit.status} ${await submit.text()}`)
      const task = () => stack.admin('/rollout/task/r3?results=false').then((response) => response.json() as Promise<TaskView>)
      // Live statuses come from each session (the task's own list is refreshed only as sessions resolve).
      const live = async (): Promise<TaskView> => {
        const view = await task()
        const sessions = await Promise.all(
          view.sessions.map(async (session) => {
            const state = (await (await stack.admin(`/rollout/session/${session.session_id}`)).json()) as { status: string }
            return { session_id: session.session_id, status: state.status }
          }),
        )
        return { ...view, sessions }
      }
      // Kill once some RUNNING session has captured calls and some session has not reached RUNNING.
      const atKill = await until(
        async () => {
          const view = await live()
          const running = view.sessions.filter((session) => session.status === 'RUNNING')
          if (running.length === 0) return undefined
          const counts = await Promise.all(running.map(async (session) => (await records(stack, session.session_id)).length))
          log(`poll: ${view.sessions.map((session) => session.status).join(',')} records ${counts.join(',')}`)
          return counts.some((count) => count >= 2) ? view : undefined
        },
        120_000,
        'a RUNNING session with captured calls',
      )
      const running = atKill.sessions.filter((session) => session.status === 'RUNNING').map((session) => session.session_id)
      const before = atKill.sessions
        .filter((session) => ['REGISTERED', 'INITIALIZING', 'READY'].includes(session.status))
        .map((s) => s.session_id)
      row.running_at_kill = running.length
      row.before_running_at_kill = before.length
      const kept = new Map<string, number>()
      for (const sessionId of running)
        kept.set(sessionId, (await records(stack, sessionId)).filter((record) => record.status === 'ok').length)
      row.records_before_kill = [...kept.values()].reduce((a, b) => a + b, 0)
      log(`kill -9 with ${running.length} RUNNING, ${before.length} not yet RUNNING`)
      await runner.kill('SIGKILL')
      await sleep(500)
      runner = startRunner(stack.edge.url, stack.engine.url, stateDir)
      const final = await until(
        async () => {
          const view = await task()
          return view.status === 'running' ? undefined : view
        },
        300_000,
        'the task resolved',
      )
      row.served = stack.engine.stats().requests.chat_completions ?? 0
      for (const session of final.sessions) {
        const all = await records(stack, session.session_id)
        row.captured += all.length
        if (running.includes(session.session_id)) {
          const ok = all.filter((record) => record.status === 'ok').length
          row.records_of_killed_after += ok
          if (ok < (kept.get(session.session_id) ?? 0)) row.lost += (kept.get(session.session_id) ?? 0) - ok
          if (session.status === 'COMPLETED') {
            row.errors++
            row.notes.push(`${session.session_id} was RUNNING on the killed runner yet ended COMPLETED`)
          } else row.partial_finalized++
          const trajectory = (await (await stack.admin(`/v1/sessions/${session.session_id}/trajectory?builder=per_request`)).json()) as {
            traces: unknown[]
          }
          if (trajectory.traces.length < ok) {
            row.errors++
            row.notes.push(`${session.session_id}: ${trajectory.traces.length} traces for ${ok} captured calls`)
          }
        } else if (session.status === 'COMPLETED') {
          if (before.includes(session.session_id)) row.redispatched_completed++
        } else {
          row.errors++
          row.notes.push(`${session.session_id} (not RUNNING at the kill) ended ${session.status}`)
        }
      }
      row.sent = row.served
      row.notes.push(`statuses: ${final.sessions.map((session) => session.status).join(', ')}`)
      return row
    } catch (error) {
      const view = await stack
        .admin('/rollout/task/r3?results=false')
        .then((response) => response.text())
        .catch(() => '')
      throw new Error(`${(error as Error).message}\ntask: ${view.slice(0, 1500)}\nrunner output:\n${runner.output().slice(-12000)}`)
    } finally {
      await runner.kill('SIGTERM').catch(() => {})
      await stack.stop()
      rmSync(stateDir, { recursive: true, force: true })
    }
  },
}
