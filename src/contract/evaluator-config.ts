/**
 * @module
 * Evaluator configurations (`EvaluatorSpec.config`, Polar §21) as zod schemas, one per built-in
 * strategy, and `validateEvaluatorConfig(strategy, config)`: the edge calls it at submit time to reject
 * a bad evaluator config with a 400 before any session starts; the runner's evaluators parse their
 * config with the same schemas. Pure (zod only): importable by the edge and the runner alike.
 *
 * Custom evaluators are named by module path, `path/to/module.ts:exportName`; only that shape can be
 * checked here (the module lives on the runner host).
 */
import { z } from 'zod'

/** Polar's default exclusions for patches taken from a runtime (fnmatch on the `b/` path or any segment). */
export const DEFAULT_PATCH_EXCLUDES = ['__pycache__', '*.pyc', '*.pyo', '.pytest_cache'] as const

const positiveSeconds = z.number().positive().max(86_400)

/** Shared by the evaluators that take a patch from the live runtime (Polar `BasePatchEvaluator`). */
const patchFields = {
  repo_dir: z.string().min(1).default('/testbed'),
  /** Prints the agent's change as a unified diff; default `cd <repo_dir> && git diff --binary --submodule=diff`. */
  patch_command: z.string().min(1).nullable().default(null),
  apply_timeout: positiveSeconds.default(60),
  test_timeout: positiveSeconds.default(1200),
  exclude_patterns: z.array(z.string().min(1)).default([]),
}

export const TEST_STATUSES = ['PASSED', 'FAILED', 'ERROR', 'SKIPPED'] as const
export const testStatusSchema = z.enum(TEST_STATUSES)
export type TestStatus = z.infer<typeof testStatusSchema>

/** `expected_output_json`: an object, or a JSON string of one (Polar accepts both). */
const expectedOutputSchema = z.preprocess(
  (value) => {
    if (typeof value !== 'string') return value
    try {
      return JSON.parse(value)
    } catch {
      return value
    }
  },
  z
    .record(z.string().min(1), testStatusSchema, { error: 'expected_output_json must map test ids to PASSED|FAILED|ERROR|SKIPPED' })
    .refine((map) => Object.keys(map).length > 0, 'expected_output_json must name at least one test'),
)

export const sessionCompletedConfigSchema = z.strictObject({})

export const testOnOutputConfigSchema = z.strictObject({
  ...patchFields,
  test_command: z.string().min(1),
  expected_output_json: expectedOutputSchema,
})
export type TestOnOutputConfig = z.infer<typeof testOnOutputConfigSchema>

/** A test list in a SWE-bench instance: an array, or a JSON string of one. */
const testListSchema = z.preprocess(
  (value) => {
    if (typeof value !== 'string') return value
    try {
      return JSON.parse(value)
    } catch {
      return value
    }
  },
  z.array(z.string().min(1)),
)

export const swebenchInstanceSchema = z.looseObject({
  instance_id: z.string().min(1),
  repo: z.string().optional(),
  base_commit: z.string().optional(),
  version: z.string().optional(),
  /** Applied after the model's patch (SWE-bench's hidden tests). */
  test_patch: z.string().optional(),
  FAIL_TO_PASS: testListSchema,
  PASS_TO_PASS: testListSchema.default([]),
})
export type SwebenchInstance = z.infer<typeof swebenchInstanceSchema>

export const swebenchHarnessConfigSchema = z.strictObject({
  ...patchFields,
  instance: swebenchInstanceSchema,
  /**
   * Rollgate: runs the tests (pytest with `-rA` so every test's status is printed). Default:
   * `cd <repo_dir> && python3 -m pytest -rA -p no:cacheprovider <test files touched by test_patch>`,
   * or every FAIL_TO_PASS / PASS_TO_PASS file when there is no test patch.
   */
  test_command: z.string().min(1).nullable().default(null),
})
export type SwebenchHarnessConfig = z.infer<typeof swebenchHarnessConfigSchema>

export const harborConfigSchema = z.strictObject({
  /** Host path (on the runner) of the task's tests directory (holds `test.sh`). */
  tests_dir: z.string().min(1),
  verifier_timeout: positiveSeconds.default(120),
  tests_target: z.string().startsWith('/').default('/tests'),
  verifier_dir: z.string().startsWith('/').default('/logs/verifier'),
  test_command: z.string().min(1).default('bash /tests/test.sh'),
})
export type HarborConfig = z.infer<typeof harborConfigSchema>

export const EVALUATOR_CONFIG_SCHEMAS = {
  session_completed: sessionCompletedConfigSchema,
  test_on_output: testOnOutputConfigSchema,
  swebench_harness: swebenchHarnessConfigSchema,
  harbor: harborConfigSchema,
} as const
export type BuiltinEvaluatorName = keyof typeof EVALUATOR_CONFIG_SCHEMAS
export const BUILTIN_EVALUATORS = Object.keys(EVALUATOR_CONFIG_SCHEMAS) as BuiltinEvaluatorName[]

/** `path/to/module.ts:exportName` (a module on the runner host and one of its exports). */
export const CUSTOM_EVALUATOR_PATTERN = /^(?<module>[^:\s][^:]*\.(?:[cm]?[jt]s)):(?<exportName>[A-Za-z_$][\w$]*)$/

export function isBuiltinEvaluator(strategy: string): strategy is BuiltinEvaluatorName {
  return Object.hasOwn(EVALUATOR_CONFIG_SCHEMAS, strategy)
}

export type EvaluatorConfigCheck = { ok: true } | { ok: false; message: string; path: string }

/**
 * Checks `config` for `strategy`. Built-ins are parsed with their schema; a custom module path is
 * accepted by shape (its config is the module's business); anything else is an unknown evaluator.
 * `path` names the offending field relative to the evaluator spec (`config.test_command`, `strategy`).
 */
export function validateEvaluatorConfig(strategy: string, config: unknown): EvaluatorConfigCheck {
  if (isBuiltinEvaluator(strategy)) {
    const parsed = EVALUATOR_CONFIG_SCHEMAS[strategy].safeParse(config ?? {})
    if (parsed.success) return { ok: true }
    const issue = parsed.error.issues[0]
    const field = ['config', ...(issue?.path ?? []).map(String)].join('.')
    return { ok: false, path: field, message: `evaluator ${strategy}: ${field}: ${issue?.message ?? 'invalid'}` }
  }
  if (CUSTOM_EVALUATOR_PATTERN.test(strategy)) return { ok: true }
  return {
    ok: false,
    path: 'strategy',
    message: `unknown evaluator ${JSON.stringify(strategy)}: use one of ${BUILTIN_EVALUATORS.join(', ')} or path/to/module.ts:exportName`,
  }
}

/** Parses a built-in's config (defaults applied); throws with the same message the edge would give. */
export function parseEvaluatorConfig<Name extends BuiltinEvaluatorName>(
  strategy: Name,
  config: unknown,
): z.infer<(typeof EVALUATOR_CONFIG_SCHEMAS)[Name]> {
  const check = validateEvaluatorConfig(strategy, config)
  if (!check.ok) throw new Error(check.message)
  return EVALUATOR_CONFIG_SCHEMAS[strategy].parse(config ?? {}) as z.infer<(typeof EVALUATOR_CONFIG_SCHEMAS)[Name]>
}
