/**
 * @module
 * CPU time and resident memory of the workerd process(es) a benchmark started, from `/proc` (Linux):
 * the descendants of this Node process whose command is `workerd`. CPU is the scheduler's run time of
 * every thread, in milliseconds; RSS is `VmRSS`, in MiB.
 */
import { readFileSync, readdirSync } from 'node:fs'

const TICKS_PER_SECOND = 100 // USER_HZ on Linux

function statFields(pid: number): string[] | null {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8')
    // The command sits in parentheses and may hold spaces: fields start after the last ')'.
    return text.slice(text.lastIndexOf(')') + 2).split(' ')
  } catch {
    return null
  }
}

/** Descendants of `root` (default: this process) whose `comm` is `workerd`. */
export function workerdPids(root = process.pid): number[] {
  const parents = new Map<number, number>()
  const names = new Map<number, string>()
  for (const entry of readdirSync('/proc')) {
    const pid = Number(entry)
    if (!Number.isInteger(pid)) continue
    const fields = statFields(pid)
    if (!fields) continue
    parents.set(pid, Number(fields[1]))
    try {
      names.set(pid, readFileSync(`/proc/${pid}/comm`, 'utf8').trim())
    } catch {}
  }
  const isDescendant = (pid: number): boolean => {
    for (let p = parents.get(pid); p !== undefined && p > 1; p = parents.get(p)) if (p === root) return true
    return false
  }
  return [...names].filter(([pid, name]) => name === 'workerd' && isDescendant(pid)).map(([pid]) => pid)
}

/**
 * CPU time of the processes, in ms: the scheduler's own nanosecond count of every thread
 * (`/proc/<pid>/task/<tid>/schedstat`), else utime + stime (10 ms ticks: too coarse for a few hundred
 * 2 ms requests).
 */
export function cpuMs(pids: number[]): number {
  let ns = 0
  for (const pid of pids) {
    let tids: string[] = []
    try {
      tids = readdirSync(`/proc/${pid}/task`)
    } catch {}
    for (const tid of tids) {
      try {
        ns += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0])
      } catch {} // a thread that just ended
    }
  }
  return Number.isFinite(ns) && ns > 0 ? ns / 1e6 : tickCpuMs(pids)
}

function tickCpuMs(pids: number[]): number {
  let ticks = 0
  for (const pid of pids) {
    const fields = statFields(pid)
    // After the command: state(0) ppid(1) … utime(11) stime(12).
    if (fields) ticks += Number(fields[11]) + Number(fields[12])
  }
  return (ticks * 1000) / TICKS_PER_SECOND
}

/** Resident set size of the processes, in MiB. */
export function rssMb(pids: number[]): number {
  let kb = 0
  for (const pid of pids) {
    try {
      const match = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
      if (match) kb += Number(match[1])
    } catch {}
  }
  return Math.round((kb / 1024) * 10) / 10
}
