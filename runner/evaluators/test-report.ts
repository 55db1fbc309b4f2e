/**
 * @module
 * Reading test results out of command output (Polar §21): `PASSED|FAILED|ERROR|SKIPPED <id>` lines
 * (pytest's `-rA` summary, or a plain `echo 'PASSED name'`), ANSI colours stripped; the id is the first token. `test_on_output`
 * normalizes ids the way Polar does (path and ` - message` dropped, `Class::method` → `Class.method`);
 * the SWE-bench grader keeps full pytest node ids and grades FAIL_TO_PASS / PASS_TO_PASS.
 */
import type { TestStatus } from '../../src/contract/evaluator-config.ts'

const STATUS_LINE = /^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\s+(\S.*?)\s*$/
// biome-ignore lint/suspicious/noControlCharactersInRegex: ANSI escape sequences start with ESC.
const ANSI = /\u001b\[[0-?]*[ -/]*[@-~]|\u001b[@-Z\\-_]/g

export function stripAnsi(text: string): string {
  return text.replace(ANSI, '')
}

/** Every status line, in order: `[status, id-as-printed]` (` - message` suffix already dropped). */
export function statusLines(output: string): Array<[string, string]> {
  const lines: Array<[string, string]> = []
  for (const raw of stripAnsi(output).split(/\r?\n/)) {
    const match = STATUS_LINE.exec(raw.trim())
    if (!match?.[1] || !match[2]) continue
    // The id is the first token (`FAILED x::y - message`); pytest's `SKIPPED [1] file:line: reason`
    // summary names no test and is ignored.
    const id = match[2].split(/\s+/)[0] ?? ''
    if (id !== '' && !/^\[\d+\]$/.test(id)) lines.push([match[1], id])
  }
  return lines
}

/** `tests/test_x.py::TestA::test_b[1] - msg` → `TestA.test_b[1]`; `test_x.py::test_c` → `test_c`; `name` → `name`. */
export function normalizeTestId(id: string): string {
  const parts = id.split('::')
  return (parts.length > 1 ? parts.slice(1) : parts).join('.')
}

/** `test_on_output`'s map: normalized id → status (a later line for the same id wins). */
export function parseTestOutput(output: string): Record<string, string> {
  const map: Record<string, string> = {}
  for (const [status, id] of statusLines(output)) {
    if (status === 'XFAIL' || status === 'XPASS') continue
    map[normalizeTestId(id)] = status
  }
  return map
}

/** Resolved iff the parsed map equals the expected one exactly, and is not empty. */
export function matchesExpected(parsed: Record<string, string>, expected: Record<string, TestStatus>): boolean {
  const keys = Object.keys(parsed)
  if (keys.length === 0 || keys.length !== Object.keys(expected).length) return false
  return keys.every((key) => Object.hasOwn(expected, key) && expected[key] === parsed[key])
}

/** SWE-bench's pytest log parser: full node id → status. */
export function parsePytestLog(output: string): Record<string, string> {
  const map: Record<string, string> = {}
  for (const [status, id] of statusLines(output)) map[id] = status
  return map
}

export interface TestsStatus {
  success: string[]
  failure: string[]
}

export interface SwebenchGrade {
  resolved: boolean
  tests_status: { FAIL_TO_PASS: TestsStatus; PASS_TO_PASS: TestsStatus }
}

const passed = (status: string | undefined) => status === 'PASSED' || status === 'XFAIL'
const failed = (status: string | undefined) => status === undefined || status === 'FAILED' || status === 'ERROR'

/**
 * SWE-bench grading: FAIL_TO_PASS must all pass now, PASS_TO_PASS must not break (a missing test counts
 * as failed; a skipped PASS_TO_PASS test is neither).
 */
export function gradeSwebench(statuses: Record<string, string>, failToPass: string[], passToPass: string[]): SwebenchGrade {
  const split = (tests: string[]): TestsStatus => ({
    success: tests.filter((test) => passed(statuses[test])),
    failure: tests.filter((test) => failed(statuses[test])),
  })
  const f2p = split(failToPass)
  const p2p = split(passToPass)
  const resolved = failToPass.length > 0 && f2p.success.length === failToPass.length && p2p.failure.length === 0
  return { resolved, tests_status: { FAIL_TO_PASS: f2p, PASS_TO_PASS: p2p } }
}

/**
 * Environment for an evaluator's test run: Python reads and writes bytecode only under a fresh cache
 * prefix, so a `__pycache__` left by an earlier run (the agent's own, or a first grading) can never stand
 * in for a source file edited within the same second at the same size (pyc freshness is mtime + size).
 * The evaluator spec's own `env` comes last and may override it.
 */
export function testRunEnv(specEnv: Record<string, string> | null | undefined): Record<string, string> {
  return {
    PYTHONPYCACHEPREFIX: `/tmp/rollgate-eval-pycache-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`,
    PYTHONDONTWRITEBYTECODE: '1',
    ...(specEnv ?? {}),
  }
}
