/**
 * @module
 * Per-host install of a pinned harness CLI (never per session). Each `<pkg>@<version>` gets its own npm
 * prefix under the cache root — `~/.cache/rollgate/harnesses/<pkg>@<version>/node_modules/…`, root
 * overridable by `ROLLGATE_HARNESS_CACHE` — installed with plain `npm install` into a staging dir, its
 * version verified, then renamed into place, so a reader never sees a half-installed tree.
 *
 * - Idempotent: a verified install is reused at once.
 * - Concurrent-safe: one installer per package and version at a time across processes (a lock file
 *   kept fresh while npm runs; a holder that died is taken over once its lock is stale); the others
 *   wait, then reuse its result.
 * - The repo's own devDependency copy is used when its version matches (the demo's default harness
 *   needs no extra step after `npm install`).
 * - Progress: a bar on a TTY (bytes on disk against the package's expected size), plain lines otherwise.
 */
import { spawn, spawnSync } from 'node:child_process'
import { createWriteStream, existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { homedir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import cliProgress from 'cli-progress'
import lockfile from 'proper-lockfile'
import type { HarnessPackage } from './harness.ts'

/** The repository root (where `node_modules` holds the devDependency copies). */
export const REPO_ROOT = join(dirname(fileURLToPath(import.meta.url)), '../..')

export interface InstalledHarness {
  pkg: HarnessPackage
  /** The npm prefix: `<root>/node_modules/<pkg>` is the package (mount this dir into a runtime). */
  root: string
  /** Absolute path of the CLI's executable (`<root>/node_modules/.bin/<bin>`). */
  bin: string
  source: 'devDependency' | 'cache' | 'installed'
}

export interface InstallOptions {
  /** Default: `ROLLGATE_HARNESS_CACHE`, else `~/.cache/rollgate/harnesses`. */
  cacheRoot?: string
  /** Use the repo's devDependency copy when its version matches (default true). */
  useDevDependency?: boolean
  /** Progress bar (true) or plain lines (false); default: stderr is a TTY. */
  tty?: boolean
  /** Plain-line output (default: stderr). */
  log?: (line: string) => void
  /** How long to wait for another process's install of the same package (default 15 min). */
  lockWaitMs?: number
  /** Repository root whose `node_modules` may hold a devDependency copy (tests). */
  repoRoot?: string
  /** What npm installs (default `<name>@<version>`): e.g. a mirrored tarball on an offline host. Verified all the same. */
  spec?: string
}

export function harnessCacheRoot(env: NodeJS.ProcessEnv = process.env): string {
  return env.ROLLGATE_HARNESS_CACHE || join(homedir(), '.cache/rollgate/harnesses')
}

/** `<cacheRoot>/<pkg>@<version>` (scoped names keep their scope folder). */
export function harnessCacheDir(pkg: HarnessPackage, cacheRoot = harnessCacheRoot()): string {
  return join(cacheRoot, `${pkg.name}@${pkg.version}`)
}

function versionIn(root: string, pkg: HarnessPackage): string | null {
  try {
    const manifest = JSON.parse(readFileSync(join(root, 'node_modules', pkg.name, 'package.json'), 'utf8')) as { version?: string }
    return manifest.version ?? null
  } catch {
    return null
  }
}

/** The install under `root` holds exactly the pinned version and its executable. */
export function verifyInstall(root: string, pkg: HarnessPackage): { ok: true } | { ok: false; reason: string } {
  const version = versionIn(root, pkg)
  if (version === null) return { ok: false, reason: `${pkg.name} is not installed under ${root}` }
  if (version !== pkg.version) return { ok: false, reason: `${pkg.name} ${version} installed under ${root}, pinned ${pkg.version}` }
  const bin = join(root, 'node_modules/.bin', pkg.bin)
  if (!existsSync(bin)) return { ok: false, reason: `${bin} is missing` }
  return { ok: true }
}

function installed(root: string, pkg: HarnessPackage, source: InstalledHarness['source']): InstalledHarness {
  return { pkg, root, bin: join(root, 'node_modules/.bin', pkg.bin), source }
}

/** The install to use if one exists already (devDependency copy or verified cache), else null. No side effects. */
export function findInstalled(pkg: HarnessPackage, options: InstallOptions = {}): InstalledHarness | null {
  const repoRoot = options.repoRoot ?? REPO_ROOT
  if (options.useDevDependency !== false && verifyInstall(repoRoot, pkg).ok) return installed(repoRoot, pkg, 'devDependency')
  const dir = harnessCacheDir(pkg, options.cacheRoot ?? harnessCacheRoot())
  if (existsSync(join(dir, '.rollgate-complete')) && verifyInstall(dir, pkg).ok) return installed(dir, pkg, 'cache')
  return null
}

/** Install `pkg` (pinned) into the per-host cache unless a usable copy exists; returns where it is. */
export async function installHarness(pkg: HarnessPackage, options: InstallOptions = {}): Promise<InstalledHarness> {
  const found = findInstalled(pkg, options)
  if (found) return found
  const cacheRoot = options.cacheRoot ?? harnessCacheRoot()
  const dir = harnessCacheDir(pkg, cacheRoot)
  mkdirSync(dirname(dir), { recursive: true })
  const log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`))
  const lockWaitMs = options.lockWaitMs ?? 15 * 60_000
  const release = await lockfile
    .lock(dir, {
      realpath: false,
      lockfilePath: `${dir}.lock`,
      stale: 30_000,
      update: 5_000,
      retries: { retries: Math.ceil(lockWaitMs / 1000), factor: 1, minTimeout: 1000, maxTimeout: 1000 },
      onCompromised: (error) => log(`harness install lock for ${pkg.name}@${pkg.version} compromised: ${error.message}`),
    })
    .catch((error: Error) => {
      throw new Error(`could not lock ${dir}.lock within ${lockWaitMs} ms: ${error.message}`)
    })
  try {
    // Another process may have finished it while we waited.
    const again = findInstalled(pkg, options)
    if (again) return again
    await npmInstall(pkg, options.spec ?? `${pkg.name}@${pkg.version}`, dir, options.tty ?? process.stderr.isTTY === true, log)
    return installed(dir, pkg, 'installed')
  } finally {
    await release().catch(() => {})
  }
}

const pending = new Map<string, Promise<InstalledHarness>>()

/**
 * {@link installHarness} once per package and version per process (concurrent callers share one install;
 * a failed install is retried by the next caller). What a runner calls before running a harness.
 */
export function ensureHarnessInstalled(pkg: HarnessPackage, options: InstallOptions = {}): Promise<InstalledHarness> {
  const key = `${options.cacheRoot ?? harnessCacheRoot()}\0${pkg.name}@${pkg.version}`
  let install = pending.get(key)
  if (!install) {
    install = installHarness(pkg, options)
    install.catch(() => pending.delete(key))
    pending.set(key, install)
  }
  return install
}

function megabytes(bytes: number): string {
  return (bytes / 1e6).toFixed(0)
}

function diskBytes(dir: string): number {
  const result = spawnSync('du', ['-sb', dir], { encoding: 'utf8' })
  return Number.parseInt(result.stdout ?? '', 10) || 0
}

async function npmInstall(pkg: HarnessPackage, spec: string, dir: string, tty: boolean, log: (line: string) => void): Promise<void> {
  const staging = `${dir}.staging-${process.pid}`
  rmSync(staging, { recursive: true, force: true })
  rmSync(dir, { recursive: true, force: true })
  mkdirSync(staging, { recursive: true })
  writeFileSync(join(staging, 'package.json'), '{"name":"rollgate-harness","private":true}\n')
  const logPath = `${dir}.install.log`
  const total = pkg.approxBytes ?? 100e6
  const started = Date.now()

  const bar = tty
    ? new cliProgress.SingleBar(
        {
          format: `${pkg.name}@${pkg.version} [{bar}] {percentage}% | {mb}/{total_mb} MB | {duration}s`,
          hideCursor: true,
          clearOnComplete: false,
        },
        cliProgress.Presets.shades_classic,
      )
    : null
  if (bar) bar.start(total, 0, { mb: '0', total_mb: megabytes(total) })
  else log(`installing ${spec} into ${dir} (about ${megabytes(total)} MB)`)
  let lastLine = Date.now()
  const poll = setInterval(() => {
    const bytes = diskBytes(staging)
    if (bar) bar.update(Math.min(bytes, total * 0.99), { mb: megabytes(bytes) })
    else if (Date.now() - lastLine >= 10_000) {
      lastLine = Date.now()
      log(`  … ${spec}: ${megabytes(bytes)} MB after ${Math.round((Date.now() - started) / 1000)} s`)
    }
  }, 1000)

  const out = createWriteStream(logPath)
  const status = await new Promise<number | null>((resolve, reject) => {
    const child = spawn('npm', ['install', '--no-audit', '--no-fund', '--no-save', '--prefix', staging, spec], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, NO_UPDATE_NOTIFIER: '1', npm_config_update_notifier: 'false' },
    })
    child.stdout.pipe(out, { end: false })
    child.stderr.pipe(out, { end: false })
    child.once('error', reject)
    child.once('close', (code) => resolve(code))
  }).finally(() => {
    clearInterval(poll)
    out.end()
  })
  const seconds = Math.round((Date.now() - started) / 100) / 10
  if (status !== 0) {
    bar?.stop()
    rmSync(staging, { recursive: true, force: true })
    const tail = existsSync(logPath) ? readFileSync(logPath, 'utf8').slice(-1500) : ''
    throw new Error(`npm install ${spec} failed (exit ${status}); log ${logPath}\n${tail}`)
  }
  const verified = verifyInstall(staging, pkg)
  if (!verified.ok) {
    bar?.stop()
    rmSync(staging, { recursive: true, force: true })
    throw new Error(`npm install ${spec}: ${verified.reason}`)
  }
  writeFileSync(join(staging, '.rollgate-complete'), `${JSON.stringify({ spec, seconds, at: new Date().toISOString() })}\n`)
  renameSync(staging, dir)
  const bytes = diskBytes(dir)
  if (bar) {
    bar.setTotal(Math.max(bytes, 1))
    bar.update(Math.max(bytes, 1), { mb: megabytes(bytes), total_mb: megabytes(bytes) })
    bar.stop()
  }
  log(`installed ${spec} in ${seconds} s (${megabytes(bytes)} MB) at ${dir}`)
}
