/**
 * @module
 * `swebench_harness`: SWE-bench grading in TypeScript (no Python `swebench` package). The agent's patch
 * is taken from the live runtime (empty ⇒ 0), replayed in a fresh runtime with `refresh_runtime`
 * (`git apply`, then `patch --batch --fuzz=5 -p1`; failure ⇒ 0), the instance's `test_patch` is applied
 * over it (test files first reset to `base_commit` when it is known), the tests run with pytest `-rA`,
 * and FAIL_TO_PASS / PASS_TO_PASS are graded from the printed statuses: resolved iff every FAIL_TO_PASS
 * test passes and no PASS_TO_PASS test fails or goes missing.
 */
import { mkdir, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { parseEvaluatorConfig, type SwebenchHarnessConfig } from '../../src/contract/evaluator-config.ts'
import type { EvalResult } from '../../src/contract/trajectory.ts'
import type { Evaluator } from './evaluator.ts'
import { applyPatch, budgetMs, carryPatch, gradingRuntime, runTests, shellQuote } from './patch.ts'
import { gradeSwebench, parsePytestLog } from './test-report.ts'

/** Files a unified diff touches (`b/` side). */
export function patchedFiles(diff: string): string[] {
  return [...diff.matchAll(/^diff --git a\/\S+ b\/(\S+)$/gm)].map((match) => match[1] ?? '').filter(Boolean)
}

/** The default test command: pytest on the test patch's files, else on the files the test ids name. */
export function defaultTestCommand(config: SwebenchHarnessConfig): string {
  const { instance } = config
  const fromPatch = instance.test_patch ? patchedFiles(instance.test_patch) : []
  const fromIds = [...instance.FAIL_TO_PASS, ...instance.PASS_TO_PASS]
    .map((id) => id.split('::')[0] ?? '')
    .filter((file) => file.endsWith('.py'))
  const files = [...new Set(fromPatch.length > 0 ? fromPatch : fromIds)]
  return `cd ${shellQuote(config.repo_dir)} && python3 -m pytest -rA -p no:cacheprovider ${files.map(shellQuote).join(' ')}`
}

export const swebenchHarness: Evaluator = {
  name: 'swebench_harness',
  validate(config) {
    parseEvaluatorConfig('swebench_harness', config)
  },
  async evaluate(context): Promise<EvalResult> {
    const config = parseEvaluatorConfig('swebench_harness', context.spec.config)
    const instanceId = config.instance.instance_id.toLowerCase()
    const report = { empty_generation: false, resolved: false, failed_apply_patch: false, error_eval: false, test_timeout: false }
    const metadata: Record<string, unknown> = {
      mode: context.spec.refresh_runtime ? 'fresh_runtime' : 'live_runtime',
      instance_id: instanceId,
      report,
    }
    const result = (reward: number): EvalResult => ({ outcome_reward: reward, trace_rewards: null, metadata })
    const runtime = gradingRuntime(context)
    const applyMs = budgetMs(context, config.apply_timeout)

    if (!(await carryPatch(context, runtime, config, applyMs, report, metadata))) return result(0)

    const instanceDir = join(context.artifactsDir, instanceId)
    await mkdir(instanceDir, { recursive: true })
    const testPatch = config.instance.test_patch
    if (testPatch) {
      const base = config.instance.base_commit
      const files = patchedFiles(testPatch)
      if (base && files.length > 0) {
        // SWE-bench resets the test files to the base commit before applying the hidden tests.
        await runtime.exec({
          command: `cd ${shellQuote(config.repo_dir)} && git checkout ${shellQuote(base)} -- ${files.map(shellQuote).join(' ')} 2>/dev/null; true`,
          timeoutMs: applyMs,
          signal: context.signal,
        })
      }
      const testPatchPath = join(instanceDir, 'test.patch')
      await writeFile(testPatchPath, testPatch)
      const applied = await applyPatch(context, runtime, testPatchPath, config.repo_dir, applyMs, 'test.patch')
      metadata.apply_test_patch_output = applied.output.slice(-4000)
      if (!applied.applied) {
        report.error_eval = true
        return result(0)
      }
    }

    const command = config.test_command ?? defaultTestCommand(config)
    const testMs = budgetMs(context, config.test_timeout)
    const { exec, output, outputPath } = await runTests(context, runtime, command, config.repo_dir, testMs, instanceDir)
    metadata.test_output_path = outputPath
    report.test_timeout = exec.timedOut
    const grade = gradeSwebench(parsePytestLog(output), config.instance.FAIL_TO_PASS, config.instance.PASS_TO_PASS)
    Object.assign(report, { resolved: grade.resolved, tests_status: grade.tests_status })
    return result(grade.resolved ? 1 : 0)
  },
}
