/**
 * @module
 * Follow a task until every session has resolved: sessions per stage as a live progress bar on a TTY
 * (cli-progress), JSON lines otherwise. Used by `rollgate submit` and the demo.
 */
import { Presets, SingleBar } from 'cli-progress'
import type { TaskStatus } from '../../src/contract/rollout.ts'
import type { EdgeClient } from './edge-client.ts'

export const STAGES = ['queued', 'init', 'ready', 'running', 'post', 'completed', 'error'] as const
export type Stage = (typeof STAGES)[number]

/** Sessions per stage (REGISTERED = queued; POST_RUN/BUILDING/EVALUATING = post; ERROR/TIMEOUT = error). */
export function stageCounts(status: Pick<TaskStatus, 'sessions'>): Record<Stage, number> {
  const counts: Record<Stage, number> = { queued: 0, init: 0, ready: 0, running: 0, post: 0, completed: 0, error: 0 }
  for (const session of status.sessions) {
    switch (session.status) {
      case 'REGISTERED':
        counts.queued++
        break
      case 'INITIALIZING':
        counts.init++
        break
      case 'READY':
        counts.ready++
        break
      case 'RUNNING':
        counts.running++
        break
      case 'POST_RUN':
      case 'BUILDING':
      case 'EVALUATING':
        counts.post++
        break
      case 'COMPLETED':
        counts.completed++
        break
      default:
        counts.error++
    }
  }
  return counts
}

export interface WatchOptions {
  /** Poll interval (default 500 ms). */
  intervalMs?: number
  /** Give up after this long (default: no limit). */
  timeoutMs?: number
  /** Live bar on a TTY (default: process.stderr.isTTY). */
  tty?: boolean
  /** Where progress goes (default stderr, so `--json` stdout stays one document). */
  stream?: NodeJS.WriteStream
  signal?: AbortSignal
  /** Read the results with the final status (default true; false: the caller streams them itself). */
  results?: boolean
}

/** Following a task gave up after `timeoutMs`; the task itself goes on. */
export class WatchTimeoutError extends Error {
  readonly taskId: string
  constructor(taskId: string, timeoutMs: number) {
    super(`task ${taskId} still running after ${timeoutMs / 1000} s`)
    this.name = 'WatchTimeoutError'
    this.taskId = taskId
  }
}

/** Sessions whose live status is read per poll (the task's own list is refreshed only as sessions resolve). */
const LIVE_STATUS_LIMIT = 64
const TERMINAL = new Set(['COMPLETED', 'ERROR', 'TIMEOUT'])

/**
 * The task's sessions with their live status: the task lists a session's last status it knows of, which
 * moves only when the session resolves, so unresolved sessions (up to LIVE_STATUS_LIMIT) are read from
 * `GET /rollout/session/:id`.
 */
export async function liveSessions(client: EdgeClient, status: TaskStatus): Promise<TaskStatus['sessions']> {
  const open = status.sessions.filter((session) => !TERMINAL.has(session.status)).slice(0, LIVE_STATUS_LIMIT)
  const live = new Map<string, TaskStatus['sessions'][number]['status']>()
  await Promise.all(
    open.map(async (session) => {
      try {
        const state = await client.json<{ status: TaskStatus['sessions'][number]['status'] }>(
          'GET',
          `/rollout/session/${encodeURIComponent(session.session_id)}`,
        )
        live.set(session.session_id, state.status)
      } catch {
        // keep the task's view of it
      }
    }),
  )
  return status.sessions.map((session) => ({ ...session, status: live.get(session.session_id) ?? session.status }))
}

/** Poll the task until it is no longer running; returns the final status (with results unless `results: false`). */
export async function watchTask(client: EdgeClient, taskId: string, options: WatchOptions = {}): Promise<TaskStatus> {
  const stream = options.stream ?? process.stderr
  const tty = options.tty ?? Boolean(stream.isTTY)
  const intervalMs = options.intervalMs ?? 500
  const deadline = options.timeoutMs ? Date.now() + options.timeoutMs : Number.POSITIVE_INFINITY
  const bar = tty
    ? new SingleBar(
        {
          stream,
          format: `${taskId} {bar} {value}/{total} done | queued {queued} init {init} ready {ready} running {running} post {post} | ok {completed} err {error}`,
          hideCursor: true,
          clearOnComplete: false,
        },
        Presets.shades_classic,
      )
    : null
  let last = ''
  let started = false
  try {
    for (;;) {
      if (options.signal?.aborted) throw options.signal.reason ?? new Error('aborted')
      const status = await client.taskStatus(taskId, false)
      const counts = stageCounts({ sessions: status.status === 'running' ? await liveSessions(client, status) : status.sessions })
      const done = counts.completed + counts.error
      if (bar) {
        if (!started) bar.start(status.total_sessions, done, counts)
        else bar.update(done, counts)
        started = true
      } else {
        const line = JSON.stringify({ task_id: taskId, status: status.status, total: status.total_sessions, ...counts })
        if (line !== last) stream.write(`${line}\n`)
        last = line
      }
      if (status.status !== 'running') return options.results === false ? status : await client.taskStatus(taskId, true)
      if (Date.now() > deadline) throw new WatchTimeoutError(taskId, options.timeoutMs ?? 0)
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, intervalMs)
        options.signal?.addEventListener('abort', () => {
          clearTimeout(timer)
          resolve()
        })
      })
    }
  } finally {
    bar?.stop()
  }
}
