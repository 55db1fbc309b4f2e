/**
 * @module
 * The patch flow shared by `test_on_output` and `swebench_harness` (Polar `BasePatchEvaluator`):
 * print the agent's change in the live runtime with the patch command, keep it as
 * `artifacts/patch.diff`, drop excluded files (fnmatch on the `b/` path or any of its segments), and
 * replay it in a fresh runtime with `git apply`, falling back to `patch --batch --fuzz=5 -p1`.
 */
import { mkdir, readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { DEFAULT_PATCH_EXCLUDES } from '../../src/contract/evaluator-config.ts'
import { type ExecResult, type Runtime, SESSION_MOUNT } from '../runtime/runtime.ts'
import type { EvaluationContext } from './evaluator.ts'

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

export function shellQuote(text: string): string {
  return `'${text.replaceAll("'", `'\\''`)}'`
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

/** Runs the patch command in the live runtime; the full diff is teed to `<artifacts>/patch.diff`. */
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
