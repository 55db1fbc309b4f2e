/**
 * The scripts' and benchmarks' argument parsing (`scripts/lib/cli-args.ts`): `--help` prints the options and
 * exits 0, a bad option is one `error:` line and the options with exit 2 — never a Node stack trace.
 */
import { spawnSync } from 'node:child_process'
import { describe, expect, it } from 'vitest'
import { numberOptionProblem, parseCliArgs, usageText } from '../../scripts/lib/cli-args.ts'

const options = {
  rounds: { type: 'string', default: '2' },
  only: { type: 'string', multiple: true },
  verbose: { type: 'boolean', default: false },
} as const

describe('script arguments', () => {
  it('lists every option with its default', () => {
    expect(usageText(options, 'npm run bench:x --')).toBe(
      [
        'usage: npm run bench:x -- [options]',
        '  --rounds <value>  (default: "2")',
        '  --only <value> …',
        '  --verbose',
        '  -h, --help',
      ].join('\n'),
    )
  })

  it('answers --help and -h with the usage, a bad option with one error line and the usage, else parses', () => {
    for (const flag of ['--help', '-h']) {
      expect(parseCliArgs({ options, args: ['--rounds', '3', flag] }, 'cmd')).toEqual({ kind: 'help', text: usageText(options, 'cmd') })
    }
    const bad = parseCliArgs({ options, args: ['--round', '3'] }, 'cmd')
    expect(bad.kind).toBe('error')
    expect(bad.kind === 'error' && bad.text.split('\n\n')).toEqual([
      expect.stringMatching(/^error: Unknown option '--round'/),
      usageText(options, 'cmd'),
    ])
    const missing = parseCliArgs({ options, args: ['--rounds'] }, 'cmd')
    expect(missing.kind === 'error' && missing.text).toMatch(/^error: Option '--rounds <value>' argument missing/)
    const ok = parseCliArgs({ options, args: ['--rounds', '5', '--only', 'a', '--only', 'b'] }, 'cmd')
    expect(ok).toEqual({ kind: 'ok', parsed: { values: { rounds: '5', only: ['a', 'b'], verbose: false }, positionals: [] } })
  })

  it('takes a numeric option only as a plain decimal number within its bounds', () => {
    expect(numberOptionProblem('requests', '200', { integer: true, min: 1 })).toBeNull()
    expect(numberOptionProblem('scale', '0.5', { min: 0, max: 1 })).toBeNull()
    expect(numberOptionProblem('seed', '-3', { integer: true })).toBeNull()
    for (const value of ['x', '', '1e3', '0x10', ' 5', '1.5']) {
      expect(numberOptionProblem('requests', value, { integer: true, min: 1 }), value).toBe(
        `--requests must be an integer ≥ 1, got "${value}"`,
      )
    }
    expect(numberOptionProblem('concurrency', '0', { integer: true, min: 1, max: 256 })).toBe(
      '--concurrency must be an integer ≥ 1 and ≤ 256, got "0"',
    )
    expect(numberOptionProblem('scale', '2', { max: 1 })).toBe('--scale must be a number ≤ 1, got "2"')
  })

  // One node process per case (a benchmark's entry point): the budget is a process start on a loaded machine.
  it('a benchmark run with --help or a typo exits 0 / 2 without a stack trace', { timeout: 30_000 }, () => {
    const run = (arg: string) =>
      spawnSync(process.execPath, ['bench/runner.ts', arg], { encoding: 'utf8', env: { ...process.env, npm_lifecycle_event: '' } })
    const help = run('--help')
    expect({ status: help.status, stderr: help.stderr }).toEqual({ status: 0, stderr: '' })
    expect(help.stdout).toMatch(/^usage: node bench\/runner\.ts \[options\]\n {2}--scale <value> {2}\(default: "0\.01"\)/)
    const typo = run('--scael')
    expect(typo.status).toBe(2)
    expect(typo.stdout).toBe('')
    expect(typo.stderr).toMatch(/^error: Unknown option '--scael'/)
    expect(typo.stderr).not.toMatch(/\n\s+at /)
  })
})
