/**
 * @module
 * Runs a rendered harness plan in a runtime: writes its files (upload), runs its steps in order with the
 * plan env on top of the caller's (Polar's injected env, PATH), each step's output teed to
 * `<session>/logs/agent/<name>.{stdout,stderr}.log`, then its teardown steps (always, also after a
 * failure, timeout or cancel). Also what a runtime must mount for a cached CLI to run inside it.
 * Result: Polar's `AgentRunResult` (`completed | failed | timeout`; cancelled counts as failed).
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import type { Runtime } from '../runtime/runtime.ts'
import { shellQuote } from './common.ts'
import type { HarnessPlan, HarnessStep } from './harness.ts'
import { harnessCacheRoot, type InstalledHarness, REPO_ROOT } from './install.ts'

export interface HarnessRunResult {
  status: 'completed' | 'failed' | 'timeout'
  return_code: number | null
  error: string | null
  /** Per step (run steps, then teardown). */
  steps: { name: string; exitCode: number; timedOut: boolean; cancelled: boolean; durationMs: number }[]
}

export interface RunPlanOptions {
  /** Host session dir (mounted at `/polar/session`): step logs go to `<it>/logs/agent/`. */
  sessionDirHost: string
  /** Env under the plan's (Polar's injected env pointed at the edge, PATH with a Node ≥ 22 first, …). */
  baseEnv?: Record<string, string>
  /** Budget for all run steps together (the agent budget). */
  timeoutMs?: number
  /** Budget per teardown step (default 30 s). */
  teardownTimeoutMs?: number
  signal?: AbortSignal
}

/** Host dirs a runtime must mount read-only (at the same path) so an installed CLI runs inside it. */
export function cliMounts(cli: InstalledHarness): string[] {
  return [join(cli.root, 'node_modules'), dirname(process.execPath)]
}

/**
 * Host dirs a runner mounts read-only (at the same path) into every runtime so any pinned CLI runs inside:
 * the harness cache root (created if missing, so CLIs installed later appear), the repo's `node_modules`
 * (devDependency copies) and this Node's bin dir. Pair with `cliPath()` as PATH and `InstalledHarness.bin`
 * as `HarnessInput.cliPath`.
 */
export function harnessHostMounts(cacheRoot = harnessCacheRoot()): string[] {
  mkdirSync(cacheRoot, { recursive: true })
  return [cacheRoot, join(REPO_ROOT, 'node_modules'), dirname(process.execPath)]
}

/** PATH inside the runtime: this process's Node first (the CLIs need Node ≥ 22; the host's may be older). */
export function cliPath(rest = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'): string {
  return `${dirname(process.execPath)}:${rest}`
}

async function writeFiles(runtime: Runtime, plan: HarnessPlan): Promise<void> {
  if (plan.files.length === 0) return
  const staging = mkdtempSync(join(tmpdir(), 'rollgate-harness-files-'))
  try {
    const dirs = [...new Set(plan.files.map((file) => dirname(file.path)))]
    const made = await runtime.exec({ command: `mkdir -p ${dirs.map(shellQuote).join(' ')}`, timeoutMs: 30_000 })
    if (made.exitCode !== 0) throw new Error(`mkdir for harness files failed: ${made.stderr.trim()}`)
    let index = 0
    for (const file of plan.files) {
      const local = join(staging, String(index++))
      writeFileSync(local, file.content, { mode: file.mode ?? 0o600 })
      await runtime.upload(local, file.path)
      if (file.mode !== undefined) {
        const chmod = await runtime.exec({ command: `chmod ${file.mode.toString(8)} ${shellQuote(file.path)}`, timeoutMs: 30_000 })
        if (chmod.exitCode !== 0) throw new Error(`chmod ${file.path} failed: ${chmod.stderr.trim()}`)
      }
    }
  } finally {
    rmSync(staging, { recursive: true, force: true })
  }
}

export async function runHarnessPlan(runtime: Runtime, plan: HarnessPlan, options: RunPlanOptions): Promise<HarnessRunResult> {
  const logDir = join(options.sessionDirHost, 'logs/agent')
  const env = { ...options.baseEnv, ...plan.env }
  const steps: HarnessRunResult['steps'] = []
  const exec = async (step: HarnessStep, timeoutMs: number, signal?: AbortSignal) => {
    const result = await runtime.exec({
      command: step.command,
      cwd: step.cwd ?? null,
      env: { ...env, ...step.env },
      timeoutMs,
      stdoutPath: join(logDir, `${step.name}.stdout.log`),
      stderrPath: join(logDir, `${step.name}.stderr.log`),
      signal,
    })
    steps.push({
      name: step.name,
      exitCode: result.exitCode,
      timedOut: result.timedOut,
      cancelled: result.cancelled,
      durationMs: result.durationMs,
    })
    return result
  }
  let outcome: Omit<HarnessRunResult, 'steps'> = { status: 'completed', return_code: 0, error: null }
  try {
    await writeFiles(runtime, plan)
    const deadline = Date.now() + (options.timeoutMs ?? 24 * 3600_000)
    for (const step of plan.steps) {
      if (options.signal?.aborted) {
        outcome = { status: 'failed', return_code: null, error: 'cancelled' }
        break
      }
      const result = await exec(step, Math.max(1, deadline - Date.now()), options.signal)
      if (result.timedOut) {
        outcome = { status: 'timeout', return_code: -1, error: `step ${step.name} timed out` }
        break
      }
      if (result.cancelled) {
        outcome = { status: 'failed', return_code: null, error: `step ${step.name} cancelled` }
        break
      }
      if (result.exitCode !== 0) {
        const tail = result.stderr.trim().split('\n').slice(-5).join('\n')
        outcome = {
          status: 'failed',
          return_code: result.exitCode,
          error: `step ${step.name} exited ${result.exitCode}${tail ? `: ${tail}` : ''}`,
        }
        break
      }
    }
  } catch (error) {
    outcome = { status: 'failed', return_code: null, error: `harness setup failed: ${(error as Error).message}` }
  }
  for (const step of plan.postrunSteps) {
    try {
      await exec(step, options.teardownTimeoutMs ?? 30_000)
    } catch {
      // teardown is best effort; the run's outcome stands
    }
  }
  return { ...outcome, steps }
}
