/**
 * Every command a new user types, from package.json and the README: `--help` prints the usage on stdout and
 * exits 0 before starting anything; an unknown flag prints an `error:` line and the usage on stderr and exits 2.
 * Table-driven: each `node <file>` npm script, the `rollgate` bin, and each `npx node scripts/….ts` the README
 * shows — a new script without `--help` fails here. A script that runs a third-party tool with its own
 * flags (vitest, tsc, biome, wrangler, stryker) is listed in THIRD_PARTY with that tool; nothing else is exempt.
 * One process per call (each exits before it starts anything).
 */
import { execFile } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { describe, expect, it } from 'vitest'

const ROOT = join(import.meta.dirname, '../..')
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string>; bin: Record<string, string> }
const readme = readFileSync(join(ROOT, 'README.md'), 'utf8')

/** npm scripts that are a third-party tool's own command line (its flags, its help): not ours to answer. */
const THIRD_PARTY: Record<string, string> = {
  'test:vitest': 'vitest',
  typecheck: 'tsc',
  lint: 'biome',
  format: 'biome',
  'cf-typegen': 'wrangler',
  build: 'wrangler',
  check: 'tsc, biome, wrangler',
  mutate: 'stryker',
}

interface Entry {
  name: string
  file: string
  /** What npm sets for `npm run <script>`: the usage then names the npm command. */
  lifecycle?: string
}

function entries(): Entry[] {
  const list: Entry[] = []
  for (const [name, command] of Object.entries(pkg.scripts)) {
    const match = /^node (\S+\.ts)$/.exec(command)
    if (match) list.push({ name: `npm run ${name}`, file: match[1]!, lifecycle: name })
    else if (!(name in THIRD_PARTY)) list.push({ name: `npm run ${name}`, file: `(not a "node <file>.ts" script: ${command})` })
  }
  for (const [name, file] of Object.entries(pkg.bin)) list.push({ name, file })
  for (const [, file] of readme.matchAll(/npx node (scripts\/[\w.-]+\.ts)/g)) {
    if (!list.some((entry) => entry.file === file)) list.push({ name: `npx node ${file}`, file: file! })
  }
  return list
}

const run = (entry: Entry, ...args: string[]) =>
  promisify(execFile)(process.execPath, [entry.file, ...args], {
    cwd: ROOT,
    encoding: 'utf8',
    timeout: 60_000,
    env: { ...process.env, npm_lifecycle_event: entry.lifecycle ?? '' },
  }).then(
    ({ stdout, stderr }) => ({ status: 0 as number | null, stdout, stderr }),
    (error: { code?: number | string; stdout?: string; stderr?: string }) => ({
      status: typeof error.code === 'number' ? error.code : null,
      stdout: error.stdout ?? '',
      stderr: error.stderr ?? String(error),
    }),
  )

describe('every script: --help exits 0 with the usage, an unknown flag exits 2 with an error and the usage', () => {
  it('lists only scripts that exist as third-party tools', () => {
    expect(Object.keys(THIRD_PARTY).filter((name) => !(name in pkg.scripts))).toEqual([])
    expect(entries().length).toBeGreaterThan(25)
  })

  for (const entry of entries()) {
    it.concurrent(entry.name, { timeout: 120_000 }, async () => {
      expect(entry.file, 'an npm script that is not "node <file>.ts" must be listed in THIRD_PARTY').toMatch(/\.ts$/)
      const [help, unknown] = await Promise.all([run(entry, '--help'), run(entry, '--bogus-flag-xyz')])
      expect({ status: help.status, stderr: help.stderr }, '--help').toEqual({ status: 0, stderr: '' })
      expect(help.stdout, '--help prints the usage first').toMatch(/^usage: /i)
      expect(unknown.status, `unknown flag: ${unknown.stderr}`).toBe(2)
      expect(unknown.stdout).toBe('')
      expect(unknown.stderr).toMatch(/^error: unknown option .--bogus(-flag-xyz|FlagXyz)/i)
      expect(unknown.stderr).toMatch(/\n\s*usage: /i)
      expect(unknown.stderr, 'no stack trace').not.toMatch(/\n\s+at /)
    })
  }
})

describe('a value a bench cannot use is refused before it starts anything (exit 2, the error and the usage)', () => {
  const BUNDLES = ['--bundle', 'a=current', '--bundle', 'b=durable-floor']
  for (const [file, flag, value, rest] of [
    ['bench/gateway.ts', '--sizes', '3XB', []],
    ['bench/gateway.ts', '--reps', '0', []],
    ['bench/gateway-ab.ts', '--sizes', '524XB', BUNDLES],
    ['bench/gateway-ab.ts', '--concurrency', '1,x', BUNDLES],
  ] as const) {
    it.concurrent(`${file} ${flag} ${value}`, { timeout: 120_000 }, async () => {
      const result = await run({ name: file, file }, ...rest, flag, value)
      expect(result.status, result.stderr).toBe(2)
      expect(result.stdout, 'nothing started (the stack prints its URL first)').toBe('')
      expect(result.stderr).toMatch(new RegExp(`^error: ${flag}`))
      expect(result.stderr).toMatch(/\n\s*usage: /i)
    })
  }
})
