/**
 * `npm run demo` for real (engine, `wrangler dev`, the runner with the bubblewrap runtime, the default harness
 * solving `tasks/fix-stats`), with one sample to stay quick: it solves the task, prints the summary, writes the
 * three exports, and leaves no process behind; interrupted with SIGINT it stops everything and exits 130.
 */
import { spawn } from 'node:child_process'
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as delay } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import { afterAll, describe, expect, it } from 'vitest'

const DEMO = fileURLToPath(new URL('../../scripts/demo.ts', import.meta.url))
const scratch = mkdtempSync(join(tmpdir(), 'rollgate-demo-test-'))
/** Every demo this file started: a demo still running when the file ends (a timed-out test) gets Ctrl-C. */
const started = new Set<{ child: ReturnType<typeof spawn>; exited: Promise<number | null> }>()
afterAll(async () => {
  // A demo still running (its test timed out) is interrupted as a user would, so it stops its engine, edge
  // (workerd) and runner itself; SIGKILL only if it does not exit within 30 s.
  for (const demo of started) {
    if (demo.child.exitCode !== null || demo.child.signalCode !== null) continue
    demo.child.kill('SIGINT')
    const timer = new AbortController()
    const stopped = await Promise.race([demo.exited.then(() => true), delay(30_000, false, { signal: timer.signal }).catch(() => false)])
    timer.abort()
    if (!stopped) demo.child.kill('SIGKILL')
  }
  // Whatever the demo left behind under this test's scratch dir (only on failure) ends with the test.
  for (const line of await processesMentioning(scratch)) {
    const pid = Number(line.trim().split(/\s+/)[0])
    if (pid > 0 && pid !== process.pid) {
      try {
        process.kill(pid, 'SIGKILL')
      } catch {
        // already gone
      }
    }
  }
  rmSync(scratch, { recursive: true, force: true })
})

function runDemo(name: string, onLine?: (line: string, child: ReturnType<typeof spawn>) => void) {
  // Its own process group, as in a terminal: Ctrl-C there signals the demo and everything it started at once. As
  // `npm run demo` typed in a subdirectory: npm runs it in the package dir (here the test's `<name>` dir, where the
  // relative --out lands) with INIT_CWD the shell's (here the scratch dir), and the paths it prints are the shell's.
  mkdirSync(join(scratch, name), { recursive: true })
  const child = spawn(process.execPath, [DEMO, '--samples', '1', '--out', 'out', '--persist-to', join(scratch, name, 'state')], {
    cwd: join(scratch, name),
    env: { ...process.env, INIT_CWD: scratch },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  })
  let stdout = ''
  let stderr = ''
  child.stdout?.on('data', (chunk: Buffer) => {
    const text = chunk.toString()
    stdout += text
    for (const line of text.split('\n')) if (line) onLine?.(line, child)
  })
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString()
  })
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)))
  started.add({ child, exited })
  return { child, exited, output: () => `${stdout}\n--- stderr ---\n${stderr.slice(-3000)}` }
}

/** Processes whose command line mentions `marker` (what the demo started under this test's scratch dir). */
async function processesMentioning(marker: string): Promise<string[]> {
  const ps = spawn('ps', ['-eo', 'pid,args'], { stdio: ['ignore', 'pipe', 'ignore'] })
  let text = ''
  ps.stdout?.on('data', (chunk: Buffer) => {
    text += chunk.toString()
  })
  await new Promise((resolve) => ps.once('exit', resolve))
  return text.split('\n').filter((line) => line.includes(marker) && !line.includes(' ps -eo'))
}

describe('npm run demo', () => {
  it('runs a real rollout: solved, summary table, exports in ./out, nothing left running', async () => {
    const demo = runDemo('full')
    const code = await demo.exited
    const output = demo.output()
    expect(code, output).toBe(0)
    expect(output).toMatch(/session\s+status\s+reward\s+calls\s+per_request\s+prefix_merging\s+merged\s+of mergeable\s+compression/)
    // The default preset keeps the agent's conversation one trace: every mergeable turn merged.
    expect(output).toMatch(/COMPLETED\s+1\s+(\d+)\s+\1\s+1\s+\d+ %\s+100 %\s+\d+\.0×/)
    expect(output).toContain('1/1 solved')
    expect(output).toContain(
      '\nexports: full/out/slime.jsonl, full/out/nemo-gym.jsonl, full/out/sft.jsonl (runner log: full/out/runner.log)\n',
    )
    for (const file of ['slime.jsonl', 'nemo-gym.jsonl', 'sft.jsonl']) {
      const lines = readFileSync(join(scratch, 'full', 'out', file), 'utf8')
        .trim()
        .split('\n')
      expect(lines.length, file).toBeGreaterThanOrEqual(1)
      for (const line of lines) expect(() => JSON.parse(line)).not.toThrow()
    }
    expect(await processesMentioning(join(scratch, 'full'))).toEqual([])
  })

  it('Ctrl-C stops the runner, the edge and the engine, and exits 130', async () => {
    let sent = false
    const demo = runDemo('interrupted', (line, child) => {
      if (!sent && line.startsWith('task ')) {
        sent = true
        // Ctrl-C in a terminal: SIGINT to the foreground process group (the demo, its runner, wrangler, workerd).
        process.kill(-(child.pid ?? 0), 'SIGINT')
      }
    })
    const code = await demo.exited
    expect(sent, demo.output()).toBe(true)
    expect(code, demo.output()).toBe(130)
    // The interrupt is said once; the task watch that lost its edge to the shutdown is no "demo failed".
    expect(demo.output()).toContain('interrupted: stopping the runner, the edge and the engine…')
    expect(demo.output()).not.toContain('demo failed')
    expect(await processesMentioning(join(scratch, 'interrupted'))).toEqual([])
  })
})
