/**
 * @module
 * `npm test`: run every vitest project and close with the plain `N passed, N failed` line CI reads.
 * Extra arguments go to vitest (`npm test -- --project unit`). `--help` prints how to call it and exits 0; an
 * option `vitest run` does not know is one `error:` line and the usage with exit 2 before any test starts
 * (vitest itself would throw a stack trace, and this script would count it as one failed test).
 *
 * The tests run with their own temp dir (`TMPDIR`, inherited by every process they start): whatever is left in
 * it when they end — a test or a process it started that did not clean up — is named, removed, and counted as
 * one failed check, so `npm test` never leaves anything in the system temp dir and a leak cannot come back.
 * vitest's JSON report stays in `reports/test-results.json`.
 */
import { spawnSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { createCLI } from 'vitest/node'

interface VitestJson {
  numPassedTests: number
  numFailedTests: number
  numPendingTests: number
  numTodoTests: number
  numFailedTestSuites: number
}

/** Caches a tool keeps in the temp dir on purpose, one per tool and not one per run: not leaks. */
const SHARED_CACHES = new Set([
  // wrangler's "is there a newer version" cache (the `update-check` package).
  'update-check',
  // Node's compile cache of a process that calls `module.enableCompileCache()` (kept under the temp dir).
  'node-compile-cache',
])

const USAGE = `usage: npm test -- [vitest run arguments …]

Runs every vitest project (unit, workers, integration) with its own temp dir and ends with the line
"N passed, N failed"; anything the tests leave in their temp dir counts as one failure. vitest's JSON
report: reports/test-results.json.
Arguments go to vitest run, e.g. npm test -- --project unit, or npm test -- test/unit/cli-args.test.ts
(vitest run's options: npx vitest run --help).`

const args = process.argv.slice(2)
if (args.includes('--help') || args.includes('-h')) {
  process.stdout.write(`${USAGE}\n`)
  process.exit(0)
}
try {
  // vitest's own parser and check, without running anything: an option it does not know fails here.
  const cli = createCLI()
  cli.parse(['node', 'vitest', 'run', ...args], { run: false })
  cli.matchedCommand?.checkUnknownOptions()
} catch (error) {
  process.stderr.write(`error: ${(error as Error).message}\n\n${USAGE}\n`)
  process.exit(2)
}

// vitest's JSON report, kept where its "JSON report written to …" line says (it was written into a temp dir this
// script then removed): `reports/` at the repo root, not in git, as the mutation reports.
const reports = fileURLToPath(new URL('../reports/', import.meta.url))
mkdirSync(reports, { recursive: true })
const outputFile = join(reports, 'test-results.json')
rmSync(outputFile, { force: true })
// A short name: unix socket paths under it (the runner's edge relay) must stay within 107 bytes.
const testTmp = mkdtempSync(join(tmpdir(), 'rgt-'))
const result = spawnSync('vitest', ['run', '--reporter=default', '--reporter=json', `--outputFile.json=${outputFile}`, ...args], {
  stdio: 'inherit',
  env: {
    ...process.env,
    TMPDIR: testTmp,
    TMP: testTmp,
    TEMP: testTmp,
    WRANGLER_SEND_METRICS: 'false',
    CLOUDFLARE_CF_FETCH_ENABLED: 'false',
  },
})

let summary: VitestJson | null = null
try {
  summary = JSON.parse(readFileSync(outputFile, 'utf8')) as VitestJson
} catch {
  summary = null
}
const leftovers = readdirSync(testTmp).filter((name) => !SHARED_CACHES.has(name))
rmSync(testTmp, { recursive: true, force: true })
if (leftovers.length > 0) {
  const shown = leftovers.slice(0, 20).join(', ')
  console.log(`the tests left ${leftovers.length} entries in their temp dir (removed now): ${shown}${leftovers.length > 20 ? ', …' : ''}`)
}
if (!summary) {
  console.log('0 passed, 1 failed')
  process.exit(result.status || 1)
}
const failed =
  summary.numFailedTests +
  (summary.numFailedTestSuites > 0 && summary.numFailedTests === 0 ? summary.numFailedTestSuites : 0) +
  (leftovers.length > 0 ? 1 : 0)
const skipped = summary.numPendingTests + summary.numTodoTests
console.log(`${summary.numPassedTests} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}`)
process.exit(failed > 0 || result.status !== 0 ? 1 : 0)
