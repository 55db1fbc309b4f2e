/**
 * @module
 * What the runner prints: on a TTY one live status line (sessions per stage, completions/s over the last
 * minute, failures, edge link) redrawn in place, with notable events above it; otherwise one JSON object per
 * line for every event (for log shippers).
 */
import type { RunnerAgent } from '../agent.ts'

export type LogFn = (event: string, fields?: Record<string, unknown>) => void

/** Events worth a line above the status line on a TTY. */
const NOTABLE = new Set([
  'edge.registered',
  'edge.disconnected',
  'edge.connect_failed',
  'edge.enrolled',
  'edge.error',
  'edge.drained',
  'session.finished',
  'session.cancel',
  'session.error',
  'runner.draining',
  'runner.cancelling',
  'runner.stopped',
  'runner.started',
  'upstream.unreachable',
  'upstream.changed',
  'tunnel.error',
])

export class Reporter {
  readonly tty: boolean
  readonly #out: NodeJS.WriteStream
  #agent: RunnerAgent | null = null
  #timer: ReturnType<typeof setInterval> | null = null
  #lineShown = false

  constructor(out: NodeJS.WriteStream = process.stderr, tty = Boolean(out.isTTY)) {
    this.#out = out
    this.tty = tty
  }

  readonly log: LogFn = (event, fields = {}) => {
    if (!this.tty) {
      this.#out.write(`${JSON.stringify({ ts: new Date().toISOString(), event, ...fields })}\n`)
      return
    }
    if (!NOTABLE.has(event)) return
    this.#clear()
    const detail = Object.entries(fields)
      .filter(([, value]) => value !== null && value !== undefined)
      .map(([key, value]) => `${key}=${typeof value === 'string' ? value : JSON.stringify(value)}`)
      .join(' ')
    this.#out.write(`${new Date().toISOString().slice(11, 19)} ${event} ${detail}\n`)
    this.#draw()
  }

  attach(agent: RunnerAgent): void {
    this.#agent = agent
    if (this.tty) {
      this.#timer = setInterval(() => this.#draw(), 500)
      this.#timer.unref()
    }
  }

  /** The status line's text. */
  line(): string {
    const agent = this.#agent
    if (!agent) return ''
    const m = agent.pipeline.metrics()
    const since = Date.now() - 60_000
    const recent = agent.recent.filter((entry) => entry.at >= since)
    const elapsed = Math.min(60, Math.max(1, (Date.now() - agent.startedAt) / 1000))
    const rate = (recent.length / elapsed).toFixed(2)
    const c = agent.pipeline.counters
    const link = agent.connection.registered ? 'edge ✓' : 'edge ✗'
    return (
      `${link} queue ${m.init_queue_depth} · init ${m.init_inflight} · ready ${m.ready_depth} · run ${m.run_inflight}` +
      ` · postrun ${m.postrun_queue_depth + m.postrun_inflight} | ${rate} done/s · ok ${c.completed} · failed ${c.failed}` +
      ` · timeout ${c.timeout} · cancelled ${c.cancelled} | tunnel ${agent.tunnel.inflight}${agent.draining ? ' | draining' : ''}`
    )
  }

  #draw(): void {
    if (!this.tty || !this.#agent) return
    const columns = this.#out.columns || 160
    this.#out.write(`\r\x1b[2K${this.line().slice(0, columns - 1)}`)
    this.#lineShown = true
  }

  #clear(): void {
    if (this.#lineShown) this.#out.write('\r\x1b[2K')
    this.#lineShown = false
  }

  stop(): void {
    if (this.#timer) clearInterval(this.#timer)
    this.#timer = null
    if (this.tty) {
      this.#draw()
      this.#out.write('\n')
    }
  }
}
