/**
 * @module
 * `test_on_output` (Polar §21): runs `test_command`, reads `PASSED|FAILED|ERROR|SKIPPED <id>` lines and
 * rewards 1 iff the normalized map equals `expected_output_json` exactly (and is not empty); the exit
 * code is ignored. With `refresh_runtime` (or an explicit `patch_command`) the agent's change is taken as
 * a patch from the live runtime first (empty ⇒ 0) and, with `refresh_runtime`, replayed in the fresh
 * runtime (does not apply ⇒ 0), so only the diff is graded — the shape of Polar's calculator example.
 */
import { mkdir } from 'node:fs/promises'
import { parseEvaluatorConfig } from '../../src/contract/evaluator-config.ts'
import type { EvalResult } from '../../src/contract/trajectory.ts'
import type { Evaluator } from './evaluator.ts'
import { budgetMs, carryPatch, gradingRuntime, runTests } from './patch.ts'
import { matchesExpected, parseTestOutput } from './test-report.ts'

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
      if (!(await carryPatch(context, runtime, config, budgetMs(context, config.apply_timeout), report, metadata))) return result(0)
    }

    await mkdir(context.artifactsDir, { recursive: true })
    const testMs = budgetMs(context, config.test_timeout)
    const { exec, output, outputPath } = await runTests(
      context,
      runtime,
      config.test_command,
      config.repo_dir,
      testMs,
      context.artifactsDir,
    )
    metadata.test_output_path = outputPath
    metadata.test_exit_code = exec.exitCode
    report.test_timeout = exec.timedOut
    const parsed = parseTestOutput(`${output}\n${exec.stderr}`)
    metadata.parsed = parsed
    metadata.expected = config.expected_output_json
    report.resolved = matchesExpected(parsed, config.expected_output_json)
    return result(report.resolved ? 1 : 0)
  },
}
