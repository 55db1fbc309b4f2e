/**
 * @module
 * `test_on_output` (Polar §21): runs `test_command`, reads `PASSED|FAILED|ERROR|SKIPPED <id>` lines and
 * rewards 1 iff the normalized map equals `expected_output_json` exactly (and is not empty); the exit
 * code is ignored. With `refresh_runtime` (or an explicit `patch_command`) the agent's change is taken as
 * a patch from the live runtime first (empty ⇒ 0) and, with `refresh_runtime`, replayed in the fresh
 * runtime (does not apply ⇒ 0), so only the diff is graded — the shape of Polar's calculator example.
 */
import { mkdir, readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { parseEvaluatorConfig } from '../../src/contract/evaluator-config.ts'
import type { EvalResult } from '../../src/contract/trajectory.ts'
import type { Evaluator } from './evaluator.ts'
import { applyPatch, budgetMs, gradingRuntime, shellQuote, takePatch } from './patch.ts'
import { matchesExpected, parseTestOutput, testRunEnv } from './test-report.ts'

export const testOnOutput: Evaluator = {
  name: 'test_on_output',
  validate(config) {
    parseEvaluatorConfig('test_on_output', config)
  },
  async evaluate(context): Promise<EvalResult> {
    const config = parseEvaluatorConfig('test_on_output', context.spec.config)
    const report = { empty_generation: false, resolved: false, failed_apply_patch: false, error_eval: false, test_timeout: false }
    const metadata: Record<string, unknown> = { mode: context.spec.refresh_runtime ? 'fresh_runtime' : 'live_runtime', report }
    const result = (reward: number): EvalResult => ({ outcome_reward: reward, trace_rewards: null, metadata })
    const runtime = gradingRuntime(context)

    if (context.spec.refresh_runtime || config.patch_command !== null) {
      const command = config.patch_command ?? `cd ${shellQuote(config.repo_dir)} && git diff --binary --submodule=diff`
      const taken = await takePatch(context, command, budgetMs(context, config.apply_timeout), config.exclude_patterns)
      metadata.patch_path = taken.path
      metadata.excluded_files = taken.dropped
      if (taken.patch === '') {
        report.empty_generation = true
        return result(0)
      }
      if (context.spec.refresh_runtime) {
        const applied = await applyPatch(context, runtime, taken.path, config.repo_dir, budgetMs(context, config.apply_timeout))
        metadata.apply_patch_output = applied.output.slice(-4000)
        if (!applied.applied) {
          report.failed_apply_patch = true
          return result(0)
        }
      }
    }

    await mkdir(context.artifactsDir, { recursive: true })
    const outputPath = join(context.artifactsDir, 'test_output.txt')
    const exec = await runtime.exec({
      command: config.test_command,
      cwd: config.repo_dir,
      env: testRunEnv(context.spec.env),
      timeoutMs: budgetMs(context, config.test_timeout),
      stdoutPath: outputPath,
      stderrPath: join(context.artifactsDir, 'test_output.stderr.txt'),
      signal: context.signal,
    })
    metadata.test_output_path = outputPath
    metadata.test_exit_code = exec.exitCode
    report.test_timeout = exec.timedOut
    const output = await readFile(outputPath, 'utf8').catch(() => exec.stdout)
    const parsed = parseTestOutput(`${output}\n${exec.stderr}`)
    metadata.parsed = parsed
    metadata.expected = config.expected_output_json
    report.resolved = matchesExpected(parsed, config.expected_output_json)
    return result(report.resolved ? 1 : 0)
  },
}
