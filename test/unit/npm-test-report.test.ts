/**
 * `npm test` (scripts/test.ts) on one small test file, as a process: it closes with the plain `N passed, N failed`
 * line, and the JSON report vitest says it wrote is there afterwards (it was written into a temp dir the script then
 * removed, so the line pointed at nothing).
 */
import { spawn } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { expect, it } from 'vitest'
import { childOutput } from '../support/child-output.ts'

const ROOT = join(import.meta.dirname, '../..')

it('npm test: the closing line, and the JSON report where vitest says it is', async () => {
  const child = spawn(process.execPath, ['scripts/test.ts', 'test/unit/readme-commands.test.ts'], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, FORCE_COLOR: '0', NO_COLOR: '1' },
  })
  const result = await childOutput(child)
  const context = `${result.stdout.slice(-2000)}\n--- stderr ---\n${result.stderr.slice(-2000)}`
  expect(result.code, context).toBe(0)
  expect(result.stdout.trimEnd().split('\n').at(-1), context).toBe('2 passed, 0 failed')
  const report = /JSON report written to (\S+)/.exec(result.stdout)?.[1]
  expect(report, context).toBe(join(ROOT, 'reports/test-results.json'))
  expect(existsSync(report ?? ''), `${report} exists after npm test`).toBe(true)
  expect(JSON.parse(readFileSync(report ?? '', 'utf8'))).toMatchObject({ numPassedTests: 2, numFailedTests: 0 })
}, 120_000)
