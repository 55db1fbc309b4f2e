/**
 * The per-host harness install cache, with a real `npm install` of a local tarball (no registry): two
 * processes racing for the same package install it once (the other waits on the lock and reuses it), a
 * later call reuses the cache without npm, a wrong version is refused and leaves nothing behind, and the
 * repo's devDependency copy is used only when its version matches.
 */
import { spawn, spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { findInstalled, harnessCacheDir, harnessCacheRoot, installHarness } from '../../../runner/harness/install.ts'

const INSTALL_MODULE = join(import.meta.dirname, '../../../runner/harness/install.ts')
let work: string
let tarball: (version: string) => string

beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), 'rollgate-install-test-'))
  const tarballs = new Map<string, string>()
  tarball = (version) => {
    const existing = tarballs.get(version)
    if (existing) return existing
    // The npm tarball layout (`package/…`) made with tar: `npm pack` would start npm once more per version.
    const src = join(work, `src-${version}`, 'package')
    mkdirSync(src, { recursive: true })
    writeFileSync(join(src, 'package.json'), JSON.stringify({ name: 'fake-harness', version, bin: { 'fake-harness': 'cli.js' } }))
    writeFileSync(join(src, 'cli.js'), `#!/usr/bin/env node\nconsole.log('fake-harness ${version}')\n`, { mode: 0o755 })
    const file = join(work, `fake-harness-${version}.tgz`)
    const packed = spawnSync('tar', ['-czf', file, '-C', join(src, '..'), 'package'], { encoding: 'utf8' })
    if (packed.status !== 0) throw new Error(`tar: ${packed.stderr}`)
    tarballs.set(version, file)
    return file
  }
})
afterAll(() => rmSync(work, { recursive: true, force: true }))

const NPM_BUDGET_MS = 60_000
const PKG = { name: 'fake-harness', version: '1.0.0', bin: 'fake-harness', approxBytes: 1000 }

/** One installer in its own process; prints its result as JSON. */
function installInChild(cacheRoot: string, spec: string): Promise<{ source: string; bin: string; log: string }> {
  const script = `
    import { installHarness } from ${JSON.stringify(INSTALL_MODULE)}
    const lines = []
    const result = await installHarness(${JSON.stringify(PKG)}, { cacheRoot: ${JSON.stringify(cacheRoot)}, spec: ${JSON.stringify(spec)},
      useDevDependency: false, tty: false, log: (line) => lines.push(line) })
    console.log(JSON.stringify({ source: result.source, bin: result.bin, log: lines.join('\\n') }))`
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    let err = ''
    child.stdout.on('data', (chunk) => (out += chunk))
    child.stderr.on('data', (chunk) => (err += chunk))
    child.once('close', (code) =>
      code === 0 ? resolve(JSON.parse(out.trim().split('\n').at(-1)!)) : reject(new Error(`exit ${code}: ${err}`)),
    )
  })
}

describe('harness install cache', () => {
  it('defaults under ~/.cache and honours ROLLGATE_HARNESS_CACHE', () => {
    expect(harnessCacheRoot({ HOME: '/h' })).toMatch(/\.cache\/rollgate\/harnesses$/)
    expect(harnessCacheRoot({ ROLLGATE_HARNESS_CACHE: '/srv/cache' })).toBe('/srv/cache')
    expect(harnessCacheDir({ name: '@scope/cli', version: '1.2.3', bin: 'cli' }, '/c')).toBe('/c/@scope/cli@1.2.3')
  })

  // These two run a real `npm install` (npm alone is ~1 s of CPU; two node processes on top): their budget is
  // that work on a loaded 2-core machine, not vitest's 5 s default for in-process logic.
  it('installs once when two processes race, then reuses the cache', { timeout: NPM_BUDGET_MS }, async () => {
    const cacheRoot = join(work, 'cache-race')
    const spec = tarball('1.0.0')
    const results = await Promise.all([installInChild(cacheRoot, spec), installInChild(cacheRoot, spec)])
    expect(results.map((r) => r.source).sort()).toEqual(['cache', 'installed'])
    const installer = results.find((r) => r.source === 'installed')!
    expect(installer.log).toMatch(/^installing .*fake-harness-1\.0\.0\.tgz into .*fake-harness@1\.0\.0/m)
    expect(installer.log).toMatch(/^installed .* in [\d.]+ s/m)
    expect(spawnSync(results[0]!.bin, { encoding: 'utf8' }).stdout).toBe('fake-harness 1.0.0\n')
    // No staging dirs or lock left behind.
    expect(readdirSync(cacheRoot).filter((name) => name.includes('staging') || name.endsWith('.lock'))).toEqual([])

    const lines: string[] = []
    const again = await installHarness(PKG, { cacheRoot, spec: '/nonexistent.tgz', useDevDependency: false, log: (l) => lines.push(l) })
    expect(again.source).toBe('cache')
    expect(lines).toEqual([])
  })

  it('refuses an install whose version is not the pinned one and keeps nothing', { timeout: NPM_BUDGET_MS }, async () => {
    const cacheRoot = join(work, 'cache-mismatch')
    await expect(
      installHarness(PKG, { cacheRoot, spec: tarball('1.0.1'), useDevDependency: false, tty: false, log: () => {} }),
    ).rejects.toThrow(/fake-harness 1\.0\.1 installed under .*, pinned 1\.0\.0/)
    expect(findInstalled(PKG, { cacheRoot, useDevDependency: false })).toBeNull()
    expect(existsSync(harnessCacheDir(PKG, cacheRoot))).toBe(false)
  })

  it('uses the repo devDependency copy only when its version matches', () => {
    const repoRoot = join(work, 'repo')
    const pkgDir = join(repoRoot, 'node_modules/fake-harness')
    mkdirSync(pkgDir, { recursive: true })
    mkdirSync(join(repoRoot, 'node_modules/.bin'), { recursive: true })
    writeFileSync(join(pkgDir, 'cli.js'), '')
    symlinkSync('../fake-harness/cli.js', join(repoRoot, 'node_modules/.bin/fake-harness'))
    const cacheRoot = join(work, 'cache-empty')
    writeFileSync(join(pkgDir, 'package.json'), JSON.stringify({ name: 'fake-harness', version: '1.0.0' }))
    expect(findInstalled(PKG, { cacheRoot, repoRoot })).toMatchObject({ source: 'devDependency', root: repoRoot })
    writeFileSync(join(pkgDir, 'package.json'), JSON.stringify({ name: 'fake-harness', version: '0.9.0' }))
    expect(findInstalled(PKG, { cacheRoot, repoRoot })).toBeNull()
  })

  it('finds the real devDependency copy of the default harness', async () => {
    const { HARNESSES, DEFAULT_HARNESS } = await import('../../../runner/harness/index.ts')
    const pkg = HARNESSES[DEFAULT_HARNESS]!.pkg!
    expect(findInstalled(pkg, { cacheRoot: join(work, 'cache-none') })).toMatchObject({ source: 'devDependency' })
  })
})
