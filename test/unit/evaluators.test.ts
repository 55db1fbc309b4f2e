/**
 * The evaluators' pure parts: test-status parsing and id normalization (Polar `test_on_output`),
 * SWE-bench grading, patch exclusion with Python fnmatch semantics, taking the patch (the patch command's
 * exit code counts), reward files, and the submit-time config validation the edge uses.
 */
import { spawn } from 'node:child_process'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { EvaluationContext } from '../../runner/evaluators/evaluator.ts'
import { filterPatch, fnmatch, PatchCommandError, takePatch } from '../../runner/evaluators/patch.ts'
import type { ExecRequest, ExecResult, Runtime } from '../../runner/runtime/runtime.ts'
import { defaultTestCommand } from '../../runner/evaluators/swebench-harness.ts'
import { parseReward } from '../../runner/evaluators/harbor.ts'
import { gradeSwebench, matchesExpected, normalizeTestId, parsePytestLog, parseTestOutput } from '../../runner/evaluators/test-report.ts'
import { parseEvaluatorConfig, validateEvaluatorConfig } from '../../src/contract/evaluator-config.ts'

const PYTEST_RA = [
  '..F.s                                                                    [100%]',
  '=========================== short test summary info ============================',
  '\u001b[32mPASSED\u001b[0m tests/test_calc.py::test_add',
  'PASSED tests/test_calc.py::TestOps::test_mul[2-3]',
  'FAILED tests/test_calc.py::test_sub - assert 8 == 2',
  'ERROR tests/test_calc.py::test_div - fixture missing',
  'PASSED test_calculator',
  'SKIPPED [1] tests/test_calc.py:30: no numpy',
  '1 failed, 3 passed, 1 skipped, 1 error in 0.10s',
].join('\n')

describe('test output parsing', () => {
  it('normalizes ids like Polar: path and message dropped, Class::method → Class.method', () => {
    expect(normalizeTestId('tests/test_x.py::TestA::test_b[1]')).toBe('TestA.test_b[1]')
    expect(normalizeTestId('test_x.py::test_c')).toBe('test_c')
    expect(normalizeTestId('test_calculator')).toBe('test_calculator')
    expect(parseTestOutput(PYTEST_RA)).toEqual({
      test_add: 'PASSED',
      'TestOps.test_mul[2-3]': 'PASSED',
      test_sub: 'FAILED',
      test_div: 'ERROR',
      test_calculator: 'PASSED',
    })
  })

  it('matches the expected map exactly and never on an empty parse', () => {
    expect(matchesExpected({ a: 'PASSED' }, { a: 'PASSED' })).toBe(true)
    expect(matchesExpected({ a: 'PASSED', b: 'PASSED' }, { a: 'PASSED' })).toBe(false)
    expect(matchesExpected({ a: 'FAILED' }, { a: 'PASSED' })).toBe(false)
    expect(matchesExpected({}, {} as Record<string, 'PASSED'>)).toBe(false)
  })

  it('grades SWE-bench lists on full node ids; a missing test fails, a skipped PASS_TO_PASS does not', () => {
    const statuses = parsePytestLog(PYTEST_RA)
    expect(statuses['tests/test_calc.py::test_add']).toBe('PASSED')
    expect(gradeSwebench(statuses, ['tests/test_calc.py::test_add'], ['tests/test_calc.py::TestOps::test_mul[2-3]']).resolved).toBe(true)
    const grade = gradeSwebench(statuses, ['tests/test_calc.py::test_sub'], ['tests/test_calc.py::test_add', 'tests/test_calc.py::gone'])
    expect(grade).toEqual({
      resolved: false,
      tests_status: {
        FAIL_TO_PASS: { success: [], failure: ['tests/test_calc.py::test_sub'] },
        PASS_TO_PASS: { success: ['tests/test_calc.py::test_add'], failure: ['tests/test_calc.py::gone'] },
      },
    })
    expect(gradeSwebench({ x: 'SKIPPED' }, ['tests/test_calc.py::test_add'], ['x']).resolved).toBe(false)
    expect(gradeSwebench(statuses, [], []).resolved).toBe(false)
  })
})

describe('patch exclusion', () => {
  it('follows fnmatch (`*` crosses `/`, character classes, negation)', () => {
    expect(fnmatch('a/b/c.pyc', '*.pyc')).toBe(true)
    expect(fnmatch('.claude/settings.json', '.claude/*')).toBe(true)
    expect(fnmatch('x.py', '*.py[co]')).toBe(false)
    expect(fnmatch('x.pyo', '*.py[co]')).toBe(true)
    expect(fnmatch('x.pyd', '*.py[!co]')).toBe(true)
    expect(fnmatch('a+b.txt', 'a+b.txt')).toBe(true)
  })

  it('drops whole diff sections by the b/ path or any of its segments, keeping the rest byte for byte', () => {
    const keep =
      'diff --git a/stats/core.py b/stats/core.py\nindex 1..2 100644\n--- a/stats/core.py\n+++ b/stats/core.py\n@@ -1 +1 @@\n-a\n+b\n'
    const cache = 'diff --git a/stats/__pycache__/core.cpython-312.pyc b/stats/__pycache__/core.cpython-312.pyc\nBinary files differ\n'
    const config = 'diff --git a/.codex/config.toml b/.codex/config.toml\nnew file mode 100644\n'
    const { patch, dropped } = filterPatch(`${cache}${keep}${config}`, ['.codex/*'])
    expect(patch).toBe(keep)
    expect(dropped).toEqual(['stats/__pycache__/core.cpython-312.pyc', '.codex/config.toml'])
    expect(filterPatch(cache, []).patch).toBe('')
  })
})

/** Runs commands with the host's bash (real exit codes, timeouts and teed output); only `exec` is used here. */
function hostRuntime(cwd: string): Runtime {
  const exec = (request: ExecRequest) =>
    new Promise<ExecResult>((resolve) => {
      const started = Date.now()
      const child = spawn('bash', ['-c', request.command], { cwd, stdio: ['ignore', 'pipe', 'pipe'] })
      let stdout = ''
      let stderr = ''
      let timedOut = false
      child.stdout.on('data', (chunk: Buffer) => {
        stdout += chunk.toString()
      })
      child.stderr.on('data', (chunk: Buffer) => {
        stderr += chunk.toString()
      })
      const timer = request.timeoutMs
        ? setTimeout(() => {
            timedOut = true
            child.kill('SIGKILL')
          }, request.timeoutMs)
        : null
      child.on('close', async (code) => {
        if (timer) clearTimeout(timer)
        if (request.stdoutPath) await writeFile(request.stdoutPath, stdout)
        if (request.stderrPath) await writeFile(request.stderrPath, stderr)
        resolve({ exitCode: timedOut ? -1 : (code ?? -1), stdout, stderr, timedOut, cancelled: false, durationMs: Date.now() - started })
      })
    })
  const unused = () => Promise.reject(new Error('not used by takePatch'))
  return {
    backend: 'host',
    capabilities: { isolatesNetwork: false, cpuLimits: false, memoryLimits: false, storageLimits: false, gpus: false },
    edgeUrlInside: 'http://127.0.0.1:9',
    homeDir: cwd,
    workDir: cwd,
    start: () => Promise.resolve(),
    exec,
    upload: unused,
    download: unused,
    stop: () => Promise.resolve(),
    cancel: () => Promise.resolve(),
  }
}

describe('takePatch: the patch command must succeed', () => {
  let dir: string
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'rollgate-take-patch-'))
  })
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true })
  })
  const context = (name: string): EvaluationContext => ({
    sessionId: 'rs_take_patch',
    taskId: 'take-patch',
    sessionDir: dir,
    artifactsDir: join(dir, name),
    agentResult: { status: 'completed', return_code: 0, error: null, timeout_stage: null },
    spec: { strategy: 'test_on_output', config: {}, env: {}, refresh_runtime: false },
    timeoutMs: 60_000,
    runtime: hostRuntime(dir),
    freshRuntime: null,
    signal: new AbortController().signal,
  })
  const DIFF = 'diff --git a/stats/core.py b/stats/core.py\n--- a/stats/core.py\n+++ b/stats/core.py\n@@ -1 +1 @@\n-a\n+b\n'

  it('keeps the diff of a command that exits 0, and an empty one as an empty patch', async () => {
    expect((await takePatch(context('ok'), `printf '${DIFF}'`, 10_000, [])).patch).toBe(DIFF)
    expect((await takePatch(context('empty'), 'true', 10_000, [])).patch).toBe('')
  })

  it('a failing git is an error naming the exit code and stderr (never an empty generation)', async () => {
    const taken = takePatch(
      context('no-repo'),
      'git --git-dir=/nonexistent/.git add -A && git --git-dir=/nonexistent/.git diff --cached --binary',
      10_000,
      [],
    )
    await expect(taken).rejects.toThrow(PatchCommandError)
    await expect(taken).rejects.toThrow(/^test_on_output: the patch command failed with exit code 128: fatal: not a git repository/)
  })

  it('a diff printed by a command that then fails is not taken', async () => {
    await expect(takePatch(context('partial'), `printf '${DIFF}'; echo 'disk full' >&2; exit 2`, 10_000, [])).rejects.toThrow(
      /exit code 2: disk full/,
    )
  })

  it('a patch command that times out is an error', async () => {
    await expect(takePatch(context('slow'), 'sleep 5', 100, [])).rejects.toThrow(/timed out while collecting the patch \(sleep 5\)/)
  })
})

describe('harbor reward files', () => {
  it('reads a float, a JSON number, or the mean of JSON numbers', () => {
    expect(parseReward(' 0.75\n', 'txt')).toBe(0.75)
    expect(parseReward('nope', 'txt')).toBeNull()
    expect(parseReward('1', 'json')).toBe(1)
    expect(parseReward('{"a": 1, "b": 0, "c": "x"}', 'json')).toBe(0.5)
    expect(parseReward('[0.2, 0.4]', 'json')).toBeCloseTo(0.3)
    expect(parseReward('{"a": "x"}', 'json')).toBeNull()
  })
})

describe('validateEvaluatorConfig (edge submit check)', () => {
  it('accepts the built-ins with good configs and custom module paths', () => {
    expect(validateEvaluatorConfig('session_completed', {})).toEqual({ ok: true })
    expect(validateEvaluatorConfig('test_on_output', { test_command: 'pytest -rA', expected_output_json: '{"t": "PASSED"}' })).toEqual({
      ok: true,
    })
    expect(validateEvaluatorConfig('harbor', { tests_dir: '/tasks/x/tests' })).toEqual({ ok: true })
    expect(
      validateEvaluatorConfig('swebench_harness', { instance: { instance_id: 'a__b-1', FAIL_TO_PASS: '["t::x"]', PASS_TO_PASS: [] } }),
    ).toEqual({ ok: true })
    expect(validateEvaluatorConfig('evals/mine.ts:MyEvaluator', { anything: 1 })).toEqual({ ok: true })
  })

  it('names the offending field', () => {
    expect(validateEvaluatorConfig('test_on_output', { expected_output_json: { t: 'PASSED' } })).toMatchObject({
      ok: false,
      path: 'config.test_command',
    })
    expect(validateEvaluatorConfig('test_on_output', { test_command: 'x', expected_output_json: { t: 'GREEN' } })).toMatchObject({
      ok: false,
      path: 'config.expected_output_json.t',
    })
    expect(validateEvaluatorConfig('test_on_output', { test_command: 'x', expected_output_json: {} })).toMatchObject({ ok: false })
    expect(validateEvaluatorConfig('session_completed', { surprise: true })).toMatchObject({ ok: false, path: 'config' })
    expect(validateEvaluatorConfig('harbor', { tests_dir: 'x', tests_target: 'relative' })).toMatchObject({
      ok: false,
      path: 'config.tests_target',
    })
    expect(validateEvaluatorConfig('swebench_harness', { instance: { instance_id: 'x' } })).toMatchObject({
      ok: false,
      path: 'config.instance.FAIL_TO_PASS',
    })
    expect(validateEvaluatorConfig('no_such', {})).toMatchObject({ ok: false, path: 'strategy' })
  })

  it('applies Polar defaults when parsing', () => {
    const config = parseEvaluatorConfig('swebench_harness', { instance: { instance_id: 'A__b-1', FAIL_TO_PASS: ['t/test_a.py::test_x'] } })
    expect(config).toMatchObject({ repo_dir: '/testbed', apply_timeout: 60, test_timeout: 1200, exclude_patterns: [], test_command: null })
    expect(defaultTestCommand(config)).toBe("cd '/testbed' && python3 -m pytest -rA -p no:cacheprovider 't/test_a.py'")
  })
})
