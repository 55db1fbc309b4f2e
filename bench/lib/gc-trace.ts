/**
 * @module
 * V8's own trace of every garbage collection in workerd, each collection timed on this process's clock, so it
 * can be lined up with the calls a benchmark made. `enableGcTrace()` (before Miniflare starts workerd) passes
 * `--trace-gc-nvp` to workerd's V8 (Miniflare's `MINIFLARE_WORKERD_V8_FLAGS`) and makes workerd's stdout
 * line-buffered (coreutils' `libstdbuf` preloaded): V8 prints each line as a collection ends, and without it
 * glibc holds 4 KB of lines back. Each line then reaches Miniflare's log handler as it is printed, and `note`
 * stamps it with `Date.now()` (the benchmark's event loop is idle while it waits on its calls).
 *
 * Diagnosis only (Linux, coreutils): V8's flags and its trace are not something the edge can set in production.
 */
import { existsSync } from 'node:fs'

const LIBSTDBUF = ['/usr/libexec/coreutils/libstdbuf.so', '/usr/lib/coreutils/libstdbuf.so'].find((path) => existsSync(path))

export interface GcEvent {
  /** When its line arrived (ms since the epoch): the end of the collection, within a millisecond or so. */
  at: number
  isolate: string
  /** 's' scavenge (young generation), 'mc' / 'ms' a full (major) collection. */
  kind: string
  pauseMs: number
  reason: string
  /** Bytes a scavenge moved to the old generation. */
  promoted: number
  /** Heap objects before / after (bytes). */
  startObjects: number
  endObjects: number
}

/**
 * Set workerd's V8 flags and stdout buffering for the next Miniflare start; returns a function that restores the
 * environment (call it once workerd runs: its children only see the environment at spawn). Throws where
 * `libstdbuf` is missing (the trace would arrive in 4 KB bursts, untimed).
 */
export function enableGcTrace(): () => void {
  if (!LIBSTDBUF) throw new Error('--gc-trace needs coreutils libstdbuf.so (line-buffered workerd stdout)')
  const saved = { flags: process.env.MINIFLARE_WORKERD_V8_FLAGS, preload: process.env.LD_PRELOAD, stdbuf: process.env._STDBUF_O }
  process.env.MINIFLARE_WORKERD_V8_FLAGS = [saved.flags, '--trace-gc-nvp'].filter(Boolean).join(' ')
  process.env.LD_PRELOAD = [saved.preload, LIBSTDBUF].filter(Boolean).join(' ')
  process.env._STDBUF_O = 'L'
  return () => {
    for (const [key, value] of [
      ['MINIFLARE_WORKERD_V8_FLAGS', saved.flags],
      ['LD_PRELOAD', saved.preload],
      ['_STDBUF_O', saved.stdbuf],
    ] as const) {
      if (value === undefined) delete process.env[key]
      else process.env[key] = value
    }
  }
}

const LINE = /\[\d+:(0x[0-9a-f]+)(?::\d+)?\]\s+\d+ ms: GC: (\{.*\})\s*$/

/** Collects the GC lines of workerd's log (Miniflare's handler gets every line that is not a structured log). */
export class GcTrace {
  readonly events: GcEvent[] = []

  /** Feed one log line; true when it was a GC line. */
  note(message: string, at = Date.now()): boolean {
    const match = LINE.exec(message)
    if (!match) return false
    try {
      const record = JSON.parse(match[2] as string) as Record<string, unknown>
      this.events.push({
        at,
        isolate: match[1] as string,
        kind: String(record.gc),
        pauseMs: Number(record.pause),
        reason: String(record.reason),
        promoted: Number(record.promoted ?? 0),
        startObjects: Number(record.start_object_size ?? 0),
        endObjects: Number(record.end_object_size ?? 0),
      })
      return true
    } catch {
      return false
    }
  }

  between(from: number, to: number): GcEvent[] {
    return this.events.filter((event) => event.at >= from && event.at <= to)
  }
}

export const isMajor = (event: GcEvent) => event.kind !== 's' && !event.reason.includes('low memory')

const r1 = (n: number) => Math.round(n * 10) / 10
const middle = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted.length ? (sorted[Math.floor(sorted.length / 2)] as number) : 0
}

/**
 * The collections during a set of calls (each `sentAt` + `ms`, this process's clock): how often a full collection
 * came, how long it paused the isolate, and whether the slowest 1 % of the calls are the ones that held one.
 */
export function gcDuringCalls(events: GcEvent[], calls: { sentAt?: number; ms: number }[]) {
  const timed = calls.filter((call) => call.sentAt !== undefined) as { sentAt: number; ms: number }[]
  const holding = (event: GcEvent) => timed.findIndex((call) => event.at >= call.sentAt && event.at <= call.sentAt + call.ms + 1)
  const majors = events.filter(isMajor)
  const scavenges = events.filter((event) => event.kind === 's')
  const held = new Set(majors.map(holding).filter((index) => index >= 0))
  const byLatency = timed.map((call, index) => ({ index, ms: call.ms })).sort((a, b) => b.ms - a.ms)
  const slowest = byLatency.slice(0, Math.max(1, Math.floor(timed.length / 100)))
  const heldMs = [...held].map((index) => (timed[index] as { ms: number }).ms)
  return {
    calls: timed.length,
    major_gcs: majors.length,
    major_gcs_per_100_calls: r1((majors.length * 100) / Math.max(1, timed.length)),
    major_pause_ms: {
      p50: r1(middle(majors.map((event) => event.pauseMs))),
      max: r1(Math.max(0, ...majors.map((event) => event.pauseMs))),
    },
    /** Garbage a full collection found (MB): what the calls left in the old generation since the last one. */
    major_freed_mb_p50: r1(middle(majors.map((event) => (event.startObjects - event.endObjects) / 1e6))),
    scavenges: scavenges.length,
    promoted_mb_per_scavenge: r1(scavenges.reduce((sum, event) => sum + event.promoted, 0) / Math.max(1, scavenges.length) / 1e6),
    calls_holding_a_major: held.size,
    their_latency_ms_p50: r1(middle(heldMs)),
    all_calls_latency_ms_p50: r1(middle(timed.map((call) => call.ms))),
    slowest_1pct_holding_a_major: `${slowest.filter((call) => held.has(call.index)).length} of ${slowest.length}`,
  }
}
