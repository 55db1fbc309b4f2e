/**
 * @module
 * Helpers for evaluator tests: run a task's prepare actions in a runtime (what the runner's INIT stage
 * does) and build an `EvaluationContext`.
 */
import { mkdir } from 'node:fs/promises'
import { join } from 'node:path'
import type { EvaluationContext } from '../../runner/evaluators/evaluator.ts'
import type { Runtime } from '../../runner/runtime/runtime.ts'
import { type EvaluatorSpec, evaluatorSpecSchema, type PrepareAction } from '../../src/contract/rollout.ts'

export async function runPrepare(runtime: Runtime, actions: readonly PrepareAction[]): Promise<void> {
  for (const action of actions) {
    if (action.type === 'exec') {
      const result = await runtime.exec({
        command: action.command ?? '',
        cwd: action.cwd ?? null,
        env: action.env ?? null,
        timeoutMs: 60_000,
      })
      if (result.exitCode !== 0) throw new Error(`prepare ${action.command} failed (${result.exitCode}): ${result.stderr}`)
    } else {
      await runtime.upload(action.source ?? '', action.target ?? '')
    }
  }
}

export async function evaluationContext(
  sessionDir: string,
  spec: Partial<EvaluatorSpec> & { strategy: string },
  runtime: Runtime,
  freshRuntime: Runtime | null = null,
): Promise<EvaluationContext> {
  const artifactsDir = join(sessionDir, 'artifacts')
  await mkdir(artifactsDir, { recursive: true })
  return {
    sessionId: 'rs_eval_test',
    taskId: 'eval-test',
    sessionDir,
    artifactsDir,
    agentResult: { status: 'completed', return_code: 0, error: null, timeout_stage: null },
    spec: evaluatorSpecSchema.parse(spec),
    timeoutMs: 120_000,
    runtime,
    freshRuntime,
    signal: new AbortController().signal,
  }
}
