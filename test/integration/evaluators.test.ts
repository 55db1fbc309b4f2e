/**
 * The runner's evaluators against real processes: git, GNU patch and pytest (apt `python3-pytest`)
 * over the `tasks/fix-stats` fixture (test_on_output, exactly as its task.json configures it), a tiny
 * SWE-bench-style repo with a hidden test patch (swebench_harness: resolved, unresolved, unappliable),
 * and a Harbor-style tests dir (harbor: reward.txt, reward.json mean, clamping, missing reward).
 */
import { execFileSync } from 'node:child_process'
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { EVALUATORS, runEvaluation } from '../../runner/evaluators/index.ts'
import type { Runtime } from '../../runner/runtime/runtime.ts'
import { KNOWN_FIXES } from '../../engine/policy/known-fixes.ts'
import { type EvaluatorSpec, type PrepareAction, runtimeSpecSchema, taskRequestSchema } from '../../src/contract/rollout.ts'
import { loadTaskFile } from '../../tasks/load.ts'
import { evaluationContext, runPrepare } from '../support/evaluation.ts'
import { createRuntime } from '../../runner/runtime/index.ts'

const FIX = KNOWN_FIXES.find((fix) => fix.id === 'fix-stats/median-even')!
let root: string
const runtimes: Runtime[] = []

interface Sandbox {
  runtime: Runtime
  /** Host directory mounted at /polar/session inside. */
  sessionDir: string
}

/** A real local (bubblewrap) runtime, as the runner builds it; the edge port goes nowhere (not needed). */
async function newRuntime(name: string): Promise<Sandbox> {
  const sessionDir = join(root, name, 'session')
  await mkdir(join(sessionDir, 'logs', 'agent'), { recursive: true })
  const runtime = createRuntime(
    runtimeSpecSchema.parse({ backend: 'local' }),
    { sessionId: `rs_eval_${name}`, sessionDir, edgeUrl: 'http://127.0.0.1:9' },
    { defaultBackend: 'local' },
  )
  runtimes.push(runtime)
  await runtime.start()
  return { runtime, sessionDir }
}

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'rollgate-evaluators-'))
})
afterAll(async () => {
  await Promise.all(runtimes.map((runtime) => runtime.stop()))
  await rm(root, { recursive: true, force: true })
})

/** Replace one line of a file inside a runtime, as an agent's edit would. */
async function editInRuntime({ runtime }: Sandbox, file: string, from: string, to: string) {
  const script = `import pathlib; p = pathlib.Path(${JSON.stringify(file)}); t = p.read_text(); assert ${JSON.stringify(from)} in t; p.write_text(t.replace(${JSON.stringify(from)}, ${JSON.stringify(to)}, 1))`
  const result = await runtime.exec({ command: `python3 -c ${shellArg(script)}` })
  expect(result.exitCode, result.stderr).toBe(0)
}

const shellArg = (text: string) => `'${text.replaceAll("'", `'\\''`)}'`

describe('test_on_output over the fix-stats task fixture', () => {
  let prepare: PrepareAction[]
  let spec: EvaluatorSpec

  beforeAll(() => {
    // The fixture is a valid TaskRequest once its upload sources are resolved.
    const task = taskRequestSchema.parse(loadTaskFile(join(import.meta.dirname, '../../tasks/fix-stats/task.json')))
    prepare = task.runtime?.prepare ?? []
    spec = task.evaluator!
    expect(task.runtime?.backend).toBe('local')
  })

  async function session(name: string) {
    const live = await newRuntime(`${name}-live`)
    const fresh = await newRuntime(`${name}-fresh`)
    await runPrepare(live.runtime, prepare)
    await runPrepare(fresh.runtime, prepare)
    return { live, fresh }
  }

  it('resolved: the fix is taken as a patch, replayed in the fresh runtime, all five tests pass', async () => {
    const { live, fresh } = await session('resolved')
    await editInRuntime(live, '/polar/session/workspace/stats/core.py', FIX.buggy, FIX.fixed)
    // Noise the exclusions must drop: a harness config dir and bytecode.
    await live.runtime.exec({
      command: 'mkdir -p .claude __pycache__ && echo x > .claude/settings.json && echo y > __pycache__/m.pyc',
      cwd: '/polar/session/workspace',
    })
    const result = await runEvaluation(await evaluationContext(live.sessionDir, spec, live.runtime, fresh.runtime))
    expect(result.outcome_reward).toBe(1)
    expect(result.metadata.report).toMatchObject({ resolved: true, empty_generation: false, failed_apply_patch: false })
    expect(result.metadata.excluded_files).toEqual(expect.arrayContaining(['.claude/settings.json', '__pycache__/m.pyc']))
    const patch = await readFile(String(result.metadata.patch_path), 'utf8')
    expect(patch).toContain(`+${FIX.fixed}`)
    expect(patch).not.toContain('.claude')
    // The fresh runtime got the fix; the parsed map is the expected one.
    expect(await readFile(join(fresh.sessionDir, 'workspace/stats/core.py'), 'utf8')).toContain(FIX.fixed)
    expect(result.metadata.parsed).toEqual(spec.config.expected_output_json)
  })

  it('unresolved: a change that does not fix the bug scores 0 with the failing test named', async () => {
    const { live, fresh } = await session('unresolved')
    await editInRuntime(live, '/polar/session/workspace/stats/core.py', '"""Descriptive statistics', '"""Statistics')
    const result = await runEvaluation(await evaluationContext(live.sessionDir, spec, live.runtime, fresh.runtime))
    expect(result.outcome_reward).toBe(0)
    expect(result.metadata.report).toMatchObject({ resolved: false, empty_generation: false, failed_apply_patch: false })
    expect(result.metadata.parsed).toMatchObject({ test_median_even: 'FAILED', test_mean: 'PASSED' })
  })

  it('empty generation: no change (or only excluded files) scores 0 without running the tests', async () => {
    const { live, fresh } = await session('empty')
    await live.runtime.exec({ command: 'mkdir -p .pi && echo z > .pi/state', cwd: '/polar/session/workspace' })
    const result = await runEvaluation(await evaluationContext(live.sessionDir, spec, live.runtime, fresh.runtime))
    expect(result.outcome_reward).toBe(0)
    expect(result.metadata.report).toMatchObject({ empty_generation: true })
    expect(result.metadata.test_output_path).toBeUndefined()
  })

  it('live mode (no refresh_runtime, no patch command) grades the live runtime directly', async () => {
    const live = await newRuntime('live-mode')
    await runPrepare(live.runtime, prepare)
    const { patch_command: _, ...config } = spec.config
    const liveSpec = { ...spec, refresh_runtime: false, config }
    expect((await runEvaluation(await evaluationContext(live.sessionDir, liveSpec, live.runtime))).outcome_reward).toBe(0)
    await editInRuntime(live, '/polar/session/workspace/stats/core.py', FIX.buggy, FIX.fixed)
    const result = await runEvaluation(await evaluationContext(live.sessionDir, liveSpec, live.runtime))
    expect(result.outcome_reward).toBe(1)
    expect(result.metadata.mode).toBe('live_runtime')
  })

  it('refresh_runtime without a prepared fresh runtime is an error, not a silent 0', async () => {
    const live = await newRuntime('no-fresh')
    await expect(runEvaluation(await evaluationContext(live.sessionDir, spec, live.runtime, null))).rejects.toThrow(/no fresh runtime/)
  })

  it('a failing patch command is an evaluation error naming its exit code and stderr, not an empty generation', async () => {
    const { live, fresh } = await session('patch-fails')
    // The agent's change is there, but the repository is gone: `git add -A` exits 128.
    await editInRuntime(live, '/polar/session/workspace/stats/core.py', FIX.buggy, FIX.fixed)
    await live.runtime.exec({ command: 'rm -rf .git', cwd: '/polar/session/workspace' })
    const context = await evaluationContext(live.sessionDir, spec, live.runtime, fresh.runtime)
    await expect(runEvaluation(context)).rejects.toThrow(
      /test_on_output: the patch command failed with exit code 128: .*not a git repository/,
    )
  })
})

describe('swebench_harness on a tiny SWE-bench-style repo', () => {
  const CALC = 'def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a + b\n'
  const TESTS = 'from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n'
  const HIDDEN =
    'from calc import add, sub\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\ndef test_sub():\n    assert sub(5, 3) == 2\n'
  let repo: string
  let testPatch: string
  let baseCommit: string

  beforeAll(async () => {
    repo = join(root, 'swe-repo')
    await mkdir(join(repo, 'tests'), { recursive: true })
    await writeFile(join(repo, 'calc.py'), CALC)
    await writeFile(join(repo, 'tests/__init__.py'), '')
    await writeFile(join(repo, 'tests/test_calc.py'), TESTS)
    const git = (...args: string[]) =>
      execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@t', ...args], { cwd: repo, encoding: 'utf8' })
    git('init', '-q')
    git('add', '-A')
    git('commit', '-qm', 'base')
    baseCommit = git('rev-parse', 'HEAD').trim()
    await writeFile(join(repo, 'tests/test_calc.py'), HIDDEN)
    testPatch = git('diff')
    git('checkout', '-q', '--', 'tests/test_calc.py')
  })

  function spec(): EvaluatorSpec {
    return {
      strategy: 'swebench_harness',
      refresh_runtime: true,
      env: {},
      config: {
        repo_dir: '/polar/session/testbed',
        instance: {
          instance_id: 'Tiny__Calc-1',
          base_commit: baseCommit,
          test_patch: testPatch,
          FAIL_TO_PASS: ['tests/test_calc.py::test_sub'],
          PASS_TO_PASS: JSON.stringify(['tests/test_calc.py::test_add']),
        },
      },
    }
  }

  async function session(name: string) {
    const live = await newRuntime(`${name}-live`)
    const fresh = await newRuntime(`${name}-fresh`)
    for (const { runtime } of [live, fresh]) await runtime.upload(repo, '/polar/session/testbed')
    return { live, fresh }
  }

  it('resolved: model patch + hidden test patch, FAIL_TO_PASS passes and PASS_TO_PASS still passes', async () => {
    const { live, fresh } = await session('swe-resolved')
    await editInRuntime(live, '/polar/session/testbed/calc.py', 'def sub(a, b):\n    return a + b', 'def sub(a, b):\n    return a - b')
    const result = await runEvaluation(await evaluationContext(live.sessionDir, spec(), live.runtime, fresh.runtime))
    expect(result.outcome_reward).toBe(1)
    expect(result.metadata.instance_id).toBe('tiny__calc-1')
    expect(result.metadata.report).toMatchObject({
      resolved: true,
      tests_status: {
        FAIL_TO_PASS: { success: ['tests/test_calc.py::test_sub'], failure: [] },
        PASS_TO_PASS: { success: ['tests/test_calc.py::test_add'], failure: [] },
      },
    })
    expect(await readFile(join(live.sessionDir, 'artifacts/tiny__calc-1/test_output.txt'), 'utf8')).toMatch(
      /PASSED tests\/test_calc\.py::test_sub/,
    )
  })

  it('unresolved: a patch that breaks PASS_TO_PASS and misses FAIL_TO_PASS scores 0', async () => {
    const { live, fresh } = await session('swe-unresolved')
    await editInRuntime(live, '/polar/session/testbed/calc.py', 'def add(a, b):\n    return a + b', 'def add(a, b):\n    return a * b')
    const result = await runEvaluation(await evaluationContext(live.sessionDir, spec(), live.runtime, fresh.runtime))
    expect(result.outcome_reward).toBe(0)
    expect(result.metadata.report).toMatchObject({
      resolved: false,
      failed_apply_patch: false,
      tests_status: {
        FAIL_TO_PASS: { success: [], failure: ['tests/test_calc.py::test_sub'] },
        PASS_TO_PASS: { success: [], failure: ['tests/test_calc.py::test_add'] },
      },
    })
  })

  it('unappliable: the patch does not apply in the fresh runtime (git apply and patch both fail) → 0, failed_apply_patch', async () => {
    const { live, fresh } = await session('swe-unappliable')
    await editInRuntime(live, '/polar/session/testbed/calc.py', 'def sub(a, b):\n    return a + b', 'def sub(a, b):\n    return a - b')
    await writeFile(join(fresh.sessionDir, 'testbed/calc.py'), 'import operator\n\nmul = operator.mul\n')
    const result = await runEvaluation(await evaluationContext(live.sessionDir, spec(), live.runtime, fresh.runtime))
    expect(result.outcome_reward).toBe(0)
    expect(result.metadata.report).toMatchObject({ failed_apply_patch: true, resolved: false })
    expect(String(result.metadata.apply_patch_output)).toMatch(/__POLAR_APPLY_PATCH_FAIL__/)
  })

  it('falls back to `patch --fuzz` when git apply refuses a drifted context', async () => {
    const { live, fresh } = await session('swe-fuzz')
    await editInRuntime(live, '/polar/session/testbed/calc.py', 'def sub(a, b):\n    return a + b', 'def sub(a, b):\n    return a - b')
    // The fresh copy drifted by a changed context line: git apply (exact context) fails, patch applies with fuzz.
    await writeFile(join(fresh.sessionDir, 'testbed/calc.py'), CALC.replace('def sub(a, b):', 'def sub(a, b):  # a minus b'))
    const result = await runEvaluation(await evaluationContext(live.sessionDir, spec(), live.runtime, fresh.runtime))
    expect(String(result.metadata.apply_patch_output)).toMatch(/error: patch failed/)
    expect(String(result.metadata.apply_patch_output)).toMatch(/with fuzz/)
    expect(result.metadata.report).toMatchObject({ failed_apply_patch: false, resolved: true })
  })
})

describe('harbor with a Harbor-style tests dir', () => {
  async function testsDir(name: string, script: string) {
    const dir = join(root, 'harbor-tests', name)
    await mkdir(dir, { recursive: true })
    await writeFile(join(dir, 'test.sh'), `#!/bin/bash\n${script}\n`)
    return dir
  }

  const spec = (testsDirPath: string): EvaluatorSpec => ({
    strategy: 'harbor',
    refresh_runtime: false,
    env: {},
    config: {
      tests_dir: testsDirPath,
      tests_target: '/polar/session/tests',
      verifier_dir: '/polar/session/logs/verifier',
      test_command: 'bash "$TESTS_DIR/test.sh"',
    },
  })

  it('grades the live runtime with reward.txt: 1 when the agent left the expected file, 0 otherwise', async () => {
    const dir = await testsDir(
      'harbor-txt',
      'if grep -qx hi "$VERIFIER_DIR/../../hello.txt"; then echo 1 > "$VERIFIER_DIR/reward.txt"; else echo 0 > "$VERIFIER_DIR/reward.txt"; fi',
    )
    const live = await newRuntime('harbor-txt')
    const before = await runEvaluation(await evaluationContext(live.sessionDir, spec(dir), live.runtime))
    expect(before).toMatchObject({ outcome_reward: 0, metadata: { resolved: false, reward_source: 'reward.txt' } })
    await live.runtime.exec({ command: 'echo hi > /polar/session/hello.txt' })
    const after = await runEvaluation(await evaluationContext(live.sessionDir, spec(dir), live.runtime))
    expect(after).toMatchObject({ outcome_reward: 1, metadata: { resolved: true } })
  })

  it('reads reward.json (mean of its numbers) and clamps to [0, 1]; a stale reward from an earlier run is wiped', async () => {
    const live = await newRuntime('harbor-json')
    const json = await testsDir('harbor-json', `echo '{"tests": 1, "lint": 0, "note": "x"}' > "$VERIFIER_DIR/reward.json"`)
    expect((await runEvaluation(await evaluationContext(live.sessionDir, spec(json), live.runtime))).outcome_reward).toBe(0.5)
    const big = await testsDir('harbor-big', 'echo 3.5 > "$VERIFIER_DIR/reward.txt"')
    expect((await runEvaluation(await evaluationContext(live.sessionDir, spec(big), live.runtime))).metadata).toMatchObject({
      reward_raw: 3.5,
      resolved: true,
    })
    const none = await testsDir('harbor-none', 'echo "verifier crashed" >&2; exit 1')
    const result = await runEvaluation(await evaluationContext(live.sessionDir, spec(none), live.runtime))
    expect(result.outcome_reward).toBe(0)
    expect(String(result.metadata.error)).toMatch(/no readable reward/)
  })

  it('rejects a tests_dir that does not exist on the runner', async () => {
    const live = await newRuntime('harbor-missing')
    await expect(runEvaluation(await evaluationContext(live.sessionDir, spec(join(root, 'nope')), live.runtime))).rejects.toThrow(
      /not a directory/,
    )
  })
})

describe('session_completed and the registry', () => {
  it('rewards a completed agent 1 and a timed-out one 0', async () => {
    const live = await newRuntime('completed')
    const context = await evaluationContext(live.sessionDir, { strategy: 'session_completed' }, live.runtime)
    expect((await runEvaluation(context)).outcome_reward).toBe(1)
    expect((await runEvaluation({ ...context, agentResult: { ...context.agentResult, status: 'timeout' } })).outcome_reward).toBe(0)
  })

  it('loads a custom evaluator by module path (object export and class export)', async () => {
    const dir = join(root, 'custom')
    await mkdir(dir, { recursive: true })
    await writeFile(
      join(dir, 'mine.ts'),
      [
        "export const constant = { name: 'constant', evaluate: async () => ({ outcome_reward: 0.25, trace_rewards: null, metadata: {} }) }",
        'export class Scaled {',
        '  name = "scaled"',
        '  factor: number',
        '  constructor(config: { factor?: number }) { this.factor = config.factor ?? 1 }',
        '  async evaluate() { return { outcome_reward: 0.5 * this.factor, metadata: { factor: this.factor } } }',
        '}',
      ].join('\n'),
    )
    const live = await newRuntime('custom')
    const object = await evaluationContext(live.sessionDir, { strategy: 'mine.ts:constant' }, live.runtime)
    expect((await runEvaluation(object, { baseDir: dir })).outcome_reward).toBe(0.25)
    const klass = await evaluationContext(
      live.sessionDir,
      { strategy: `${join(dir, 'mine.ts')}:Scaled`, config: { factor: 2 } },
      live.runtime,
    )
    expect(await runEvaluation(klass)).toMatchObject({
      outcome_reward: 1,
      metadata: { factor: 2, strategy: `${join(dir, 'mine.ts')}:Scaled` },
    })
    await expect(runEvaluation(await evaluationContext(live.sessionDir, { strategy: 'nope' }, live.runtime))).rejects.toThrow(
      /unknown evaluator/,
    )
    expect(Object.keys(EVALUATORS).sort()).toEqual(['harbor', 'session_completed', 'swebench_harness', 'test_on_output'])
  })
})
