/**
 * @module
 * The evaluator registry: a built-in by name (`session_completed`, `test_on_output`,
 * `swebench_harness`, `harbor`) or a custom evaluator by module path, `path/to/module.ts:exportName`
 * (resolved against `baseDir`, default the working directory). The export is an {@link Evaluator}
 * object, or a class whose instances are (constructed with the config, as Polar does `cls(**config)`).
 *
 * `runEvaluation` is what POSTRUN calls: resolve, validate, evaluate, and check the result against
 * the `EvalResult` contract.
 */
import { isAbsolute, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import {
  BUILTIN_EVALUATORS,
  type BuiltinEvaluatorName,
  CUSTOM_EVALUATOR_PATTERN,
  validateEvaluatorConfig,
} from '../../src/contract/evaluator-config.ts'
import { type EvalResult, evalResultSchema } from '../../src/contract/trajectory.ts'
import type { EvaluationContext, Evaluator } from './evaluator.ts'
import { harbor } from './harbor.ts'
import { sessionCompleted } from './session-completed.ts'
import { swebenchHarness } from './swebench-harness.ts'
import { testOnOutput } from './test-on-output.ts'

export const EVALUATORS: Readonly<Record<BuiltinEvaluatorName, Evaluator>> = {
  session_completed: sessionCompleted,
  test_on_output: testOnOutput,
  swebench_harness: swebenchHarness,
  harbor,
}

function isEvaluator(value: unknown): value is Evaluator {
  return typeof value === 'object' && value !== null && typeof (value as Evaluator).evaluate === 'function'
}

export async function resolveEvaluator(
  strategy: string,
  options: { baseDir?: string; config?: Record<string, unknown> } = {},
): Promise<Evaluator> {
  if ((BUILTIN_EVALUATORS as string[]).includes(strategy)) return EVALUATORS[strategy as BuiltinEvaluatorName]
  const match = CUSTOM_EVALUATOR_PATTERN.exec(strategy)
  if (!match?.groups) {
    throw new Error(
      `unknown evaluator ${JSON.stringify(strategy)}: use one of ${BUILTIN_EVALUATORS.join(', ')} or path/to/module.ts:exportName`,
    )
  }
  const { module, exportName } = match.groups as { module: string; exportName: string }
  const file = isAbsolute(module) ? module : resolve(options.baseDir ?? process.cwd(), module)
  const loaded = (await import(pathToFileURL(file).href)) as Record<string, unknown>
  const exported = loaded[exportName]
  if (isEvaluator(exported)) return exported
  if (typeof exported === 'function' && typeof (exported as { prototype?: { evaluate?: unknown } }).prototype?.evaluate === 'function') {
    const instance: unknown = new (exported as new (config: Record<string, unknown>) => unknown)(options.config ?? {})
    if (isEvaluator(instance)) return { ...instance, name: instance.name ?? strategy, evaluate: instance.evaluate.bind(instance) }
  }
  throw new Error(`evaluator ${strategy}: ${exportName} in ${file} is not an evaluator (an object or class with evaluate())`)
}

/** Resolve, validate and run the session's evaluator; the result is checked against `EvalResult`. */
export async function runEvaluation(context: EvaluationContext, options: { baseDir?: string } = {}): Promise<EvalResult> {
  const { strategy, config } = context.spec
  const check = validateEvaluatorConfig(strategy, config)
  if (!check.ok) throw new Error(check.message)
  const evaluator = await resolveEvaluator(strategy, { ...options, config })
  evaluator.validate?.(config)
  const started = Date.now()
  const raw = await evaluator.evaluate(context)
  const parsed = evalResultSchema.safeParse(raw)
  if (!parsed.success) throw new Error(`evaluator ${strategy} returned an invalid result: ${parsed.error.issues[0]?.message ?? 'invalid'}`)
  return { ...parsed.data, metadata: { ...parsed.data.metadata, strategy, evaluation_ms: Date.now() - started } }
}
