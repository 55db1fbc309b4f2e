/**
 * @module
 * The patch flow shared by `test_on_output` and `swebench_harness` (Polar `BasePatchEvaluator`):
 * print the agent's change in the live runtime with the patch command, keep it as
 * `artifacts/patch.diff`, drop excluded files (fnmatch on the `b/` path or any of its segments), and
 * replay it in a fresh runtime with `git apply`, falling back to `patch --batch --fuzz=5 -p1`; then the
 * test command in the grading runtime, its output teed to the artifacts.
 */
import { mkdir, readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { DEFAULT_PATCH_EXCLUDES } from '../../src/contract/evaluator-config.ts'
import { type ExecResult, type Runtime, SESSION_MOUNT } from '../runtime/runtime.ts'
import { shellQuote } from '../runtime/exec-support.ts'
import type { EvaluationContext } from './evaluator.ts'
import { testRunEnv } from './test-report.ts'

export { shellQuote }

export const APPLY_PASS = '__POLAR_APPLY_PATCH_PASS__'
export const APPLY_FAIL = '__POLAR_APPLY_PATCH_FAIL__'

/** Python `fnmatch.fnmatch` semantics (`*` also crosses `/`). */
export function fnmatch(name: string, pattern: string): boolean {
  let source = ''
  for (let index = 0; index < pattern.length; index++) {
    const char = pattern[index] ?? ''
    if (char === '*') source += '.*'
    else if (char === '?') source += '.'
    else if (char === '[') {
      const end = pattern.indexOf(']', index + 2)
      if (end < 0) source += '\\['
      else {
        let body = pattern.slice(index + 1, end)
        if (body.startsWith('!')) body = `^${body.slice(1)}`
        source += `[${body.replaceAll('\\', '\\\\')}]`
        index = end
      }
    } else source += char.replace(/[.+^${}()|\\/]/g, '\\$&')
  }
  return new RegExp(`^${source}$`, 's').test(name)
}

function excluded(path: string, patterns: readonly string[]): boolean {
  const segments = path.split('/')
  return patterns.some((pattern) => fnmatch(path, pattern) || segments.some((segment) => fnmatch(segment, pattern)))
}

/** Drops the `diff --git` sections whose `b/` path matches a pattern (plus Polar's defaults). */
export function filterPatch(diff: string, patterns: readonly string[]): { patch: string; dropped: string[] } {
  const all = [...DEFAULT_PATCH_EXCLUDES, ...patterns]
  const sections = diff.split(/^(?=diff --git )/m)
  const kept: string[] = []
  const dropped: string[] = []
  for (const section of sections) {
    const header = /^diff --git (?:"?a\/.*?"?) "?b\/(.*?)"?\s*$/m.exec(section.split('\n')[0] ?? '')
    if (header?.[1] !== undefined && excluded(header[1], all)) dropped.push(header[1])
    else kept.push(section)
  }
  const patch = kept.join('')
  return { patch: patch.trim() === '' ? '' : patch, dropped }
}

/** Seconds from config, bounded by what is left of the session budget. */
export function budgetMs(context: EvaluationContext, seconds: number): number {
  return Math.max(1, Math.min(seconds * 1000, context.timeoutMs))
}

export interface TakenPatch {
  /** After exclusions; '' when the agent changed nothing that counts. */
  patch: string
  dropped: string[]
  /** Host path of `patch.diff` in the artifacts dir. */
  path: string
  exec: ExecResult
}

/**
 * The patch command did not print a diff: it failed (non-zero exit) or timed out. An evaluation error
 * (Polar `_extract_patch` raises; the session ends `ERROR` with this message) — never an empty
 * generation, which would score a broken grader as "the agent changed nothing".
 */
export class PatchCommandError extends Error {
  readonly exec: ExecResult

  constructor(exec: ExecResult, strategy: string, command: string) {
    const stderr = exec.stderr.trim().slice(-2000)
    super(
      exec.timedOut
        ? `${strategy}: timed out while collecting the patch (${command})`
        : `${strategy}: the patch command failed with exit code ${exec.exitCode}${exec.cancelled ? ' (cancelled)' : ''}: ${stderr === '' ? '(no stderr)' : stderr}`,
    )
    this.name = 'PatchCommandError'
    this.exec = exec
  }
}

/**
 * Runs the patch command in the live runtime; the raw diff is teed to `<artifacts>/patch.raw.diff`, the
 * filtered one written to `<artifacts>/patch.diff`. A failed or timed-out command throws `PatchCommandError`.
 */
export async function takePatch(
  context: EvaluationContext,
  command: string,
  timeoutMs: number,
  excludes: readonly string[],
): Promise<TakenPatch> {
  await mkdir(context.artifactsDir, { recursive: true })
  const rawPath = join(context.artifactsDir, 'patch.raw.diff')
  const path = join(context.artifactsDir, 'patch.diff')
  const exec = await context.runtime.exec({
    command,
    env: context.spec.env,
    timeoutMs,
    stdoutPath: rawPath,
    stderrPath: join(context.artifactsDir, 'patch.stderr.log'),
    signal: context.signal,
  })
  if (exec.timedOut || exec.cancelled || exec.exitCode !== 0) throw new PatchCommandError(exec, context.spec.strategy, command)
  const raw = await readFile(rawPath, 'utf8').catch(() => exec.stdout)
  const { patch, dropped } = filterPatch(raw, excludes)
  await writeFile(path, patch)
  return { patch, dropped, path, exec }
}

export interface ApplyOutcome {
  applied: boolean
  output: string
  timedOut: boolean
}

/** Uploads the patch into `runtime` and applies it in `repoDir` (`git apply -v`, else `patch --batch --fuzz=5 -p1`). */
export async function applyPatch(
  context: EvaluationContext,
  runtime: Runtime,
  hostPatch: string,
  repoDir: string,
  timeoutMs: number,
  name = 'patch.diff',
): Promise<ApplyOutcome> {
  const target = `${SESSION_MOUNT}/eval_artifacts/${name}`
  await runtime.exec({ command: `mkdir -p ${SESSION_MOUNT}/eval_artifacts`, timeoutMs, signal: context.signal })
  await runtime.upload(hostPatch, target)
  const quoted = shellQuote(target)
  const command = [
    `cd ${shellQuote(repoDir)} || { echo ${APPLY_FAIL}; exit 1; }`,
    `if git apply -v ${quoted}; then echo ${APPLY_PASS}`,
    `elif patch --batch --fuzz=5 -p1 -i ${quoted}; then echo ${APPLY_PASS}`,
    `else echo ${APPLY_FAIL}; fi`,
  ].join('\n')
  const exec = await runtime.exec({ command, env: context.spec.env, timeoutMs, signal: context.signal })
  const output = `${exec.stdout}${exec.stderr === '' ? '' : `\n${exec.stderr}`}`
  return { applied: !exec.timedOut && exec.stdout.includes(APPLY_PASS), output, timedOut: exec.timedOut }
}

/** The runtime a patch evaluator grades in: the fresh one when `refresh_runtime`, else the live one. */
export function gradingRuntime(context: EvaluationContext): Runtime {
  if (!context.spec.refresh_runtime) return context.runtime
  if (context.freshRuntime === null) {
    throw new Error(`${context.spec.strategy}: refresh_runtime is set but no fresh runtime was prepared`)
  }
  return context.freshRuntime
}

/** What the patch flow records about a run (the evaluators' `metadata.report`). */
export interface PatchReport {
  empty_generation: boolean
  failed_apply_patch: boolean
}

/**
 * The agent's patch (the config's patch command, else `git diff` in the repo dir, in the live runtime) kept
 * as `patch.diff` and, with `refresh_runtime`, replayed in the grading runtime. False when the run scores 0
 * — nothing changed that counts, or the patch did not apply — with the report flag set; paths and outputs go
 * to `metadata`.
 */
export async function carryPatch(
  context: EvaluationContext,
  runtime: Runtime,
  config: { patch_command: string | null; repo_dir: string; exclude_patterns: readonly string[] },
  timeoutMs: number,
  report: PatchReport,
  metadata: Record<string, unknown>,
): Promise<boolean> {
  const command = config.patch_command ?? `cd ${shellQuote(config.repo_dir)} && git diff --binary --submodule=diff`
  const taken = await takePatch(context, command, timeoutMs, config.exclude_patterns)
  metadata.patch_path = taken.path
  metadata.excluded_files = taken.dropped
  if (taken.patch === '') {
    report.empty_generation = true
    return false
  }
  if (context.spec.refresh_runtime) {
    const applied = await applyPatch(context, runtime, taken.path, config.repo_dir, timeoutMs)
    metadata.apply_patch_output = applied.output.slice(-4000)
    if (!applied.applied) {
      report.failed_apply_patch = true
      return false
    }
  }
  return true
}

/** Runs the test command in `repoDir` of the grading runtime, output teed to `<dir>/test_output.txt` (stderr beside it). */
export async function runTests(
  context: EvaluationContext,
  runtime: Runtime,
  command: string,
  repoDir: string,
  timeoutMs: number,
  dir: string,
): Promise<{ exec: ExecResult; output: string; outputPath: string }> {
  const outputPath = join(dir, 'test_output.txt')
  const exec = await runtime.exec({
    command,
    cwd: repoDir,
    env: testRunEnv(context.spec.env),
    timeoutMs,
    stdoutPath: outputPath,
    stderrPath: join(dir, 'test_output.stderr.txt'),
    signal: context.signal,
  })
  const output = await readFile(outputPath, 'utf8').catch(() => exec.stdout)
  return { exec, output, outputPath }
}
