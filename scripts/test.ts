/**
 * @module
 * `npm test`: run every vitest project and close with the plain `N passed, N failed` line CI reads.
 * Extra arguments go to vitest (`npm test -- --project unit`).
 */
import { spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'

interface VitestJson {
  numPassedTests: number
  numFailedTests: number
  numPendingTests: number
  numTodoTests: number
  numFailedTestSuites: number
}

const outputFile = join(mkdtempSync(join(tmpdir(), 'rollgate-test-')), 'results.json')
const result = spawnSync(
  'vitest',
  ['run', '--reporter=default', '--reporter=json', `--outputFile.json=${outputFile}`, ...process.argv.slice(2)],
  { stdio: 'inherit', env: { ...process.env, WRANGLER_SEND_METRICS: 'false', CLOUDFLARE_CF_FETCH_ENABLED: 'false' } },
)

let summary: VitestJson | null = null
try {
  summary = JSON.parse(readFileSync(outputFile, 'utf8')) as VitestJson
} catch {
  summary = null
} finally {
  rmSync(dirname(outputFile), { recursive: true, force: true })
}
if (!summary) {
  console.log('0 passed, 1 failed')
  process.exit(result.status || 1)
}
const failed = summary.numFailedTests + (summary.numFailedTestSuites > 0 && summary.numFailedTests === 0 ? summary.numFailedTestSuites : 0)
const skipped = summary.numPendingTests + summary.numTodoTests
console.log(`${summary.numPassedTests} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}`)
process.exit(failed > 0 || result.status !== 0 ? 1 : 0)
