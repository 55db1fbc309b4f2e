/**
 * @module
 * `harbor` (Harbor task verifiers: Terminal-Bench, TMax): wipes and uploads the task's tests directory
 * into the **live** runtime (it grades the final container state), runs `test_command` (default
 * `bash /tests/test.sh`), then reads `<verifier_dir>/reward.txt` (a float) or else `reward.json` (a number,
 * or the mean of an object's / array's numbers), clamped to [0, 1]; `metadata.resolved` = reward ≥ 1.
 * The command also gets `TESTS_DIR` and `VERIFIER_DIR` in its environment (Rollgate), so verifiers can
 * run where `/tests` and `/logs` are not writable.
 */
import { mkdir, stat } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { parseEvaluatorConfig } from '../../src/contract/evaluator-config.ts'
import type { EvalResult } from '../../src/contract/trajectory.ts'
import type { Evaluator } from './evaluator.ts'
import { budgetMs, shellQuote } from './patch.ts'

/** A reward file's value, or null when it holds no number. */
export function parseReward(text: string, kind: 'txt' | 'json'): number | null {
  if (kind === 'txt') {
    const value = Number.parseFloat(text.trim())
    return Number.isFinite(value) ? value : null
  }
  let data: unknown
  try {
    data = JSON.parse(text)
  } catch {
    return null
  }
  if (typeof data === 'number') return Number.isFinite(data) ? data : null
  const values = (Array.isArray(data) ? data : data !== null && typeof data === 'object' ? Object.values(data) : []).filter(
    (value): value is number => typeof value === 'number' && Number.isFinite(value),
  )
  return values.length === 0 ? null : values.reduce((sum, value) => sum + value, 0) / values.length
}

export const harbor: Evaluator = {
  name: 'harbor',
  validate(config) {
    parseEvaluatorConfig('harbor', config)
  },
  async evaluate(context): Promise<EvalResult> {
    const config = parseEvaluatorConfig('harbor', context.spec.config)
    const info = await stat(config.tests_dir).catch(() => null)
    if (!info?.isDirectory()) throw new Error(`harbor: tests_dir ${config.tests_dir} is not a directory on this runner`)
    const { runtime } = context
    const timeoutMs = budgetMs(context, config.verifier_timeout)
    const tests = shellQuote(config.tests_target)
    const verifier = shellQuote(config.verifier_dir)
    const prepared = await runtime.exec({
      command: `rm -rf ${tests} ${verifier} && mkdir -p ${shellQuote(dirname(config.tests_target))} ${verifier}`,
      timeoutMs,
      signal: context.signal,
    })
    if (prepared.exitCode !== 0) throw new Error(`harbor: cannot prepare ${config.tests_target}: ${prepared.stderr.trim()}`)
    await runtime.upload(config.tests_dir, config.tests_target)

    await mkdir(context.artifactsDir, { recursive: true })
    const exec = await runtime.exec({
      command: config.test_command,
      env: { ...context.spec.env, TESTS_DIR: config.tests_target, VERIFIER_DIR: config.verifier_dir },
      timeoutMs,
      stdoutPath: join(context.artifactsDir, 'verifier.stdout.log'),
      stderrPath: join(context.artifactsDir, 'verifier.stderr.log'),
      signal: context.signal,
    })
    const metadata: Record<string, unknown> = { verifier_exit_code: exec.exitCode, verifier_timed_out: exec.timedOut }
    let raw: number | null = null
    for (const kind of ['txt', 'json'] as const) {
      const read = await runtime.exec({
        command: `cat ${shellQuote(`${config.verifier_dir}/reward.${kind}`)}`,
        timeoutMs,
        signal: context.signal,
      })
      if (read.exitCode !== 0) continue
      raw = parseReward(read.stdout, kind)
      metadata.reward_source = `reward.${kind}`
      break
    }
    if (raw === null) {
      metadata.error = `no readable reward.txt or reward.json in ${config.verifier_dir}`
      metadata.resolved = false
      return { outcome_reward: 0, trace_rewards: null, metadata }
    }
    const reward = Math.min(1, Math.max(0, raw))
    metadata.reward_raw = raw
    metadata.resolved = reward >= 1
    return { outcome_reward: reward, trace_rewards: null, metadata }
  },
}
