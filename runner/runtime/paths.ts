/**
 * @module
 * Inside-path handling shared by the backends: normalisation, the session mount (whose files are plain host
 * files, so uploads/downloads under it are host-side copies) and host-side copying.
 */
import { cp, mkdir, realpath, stat } from 'node:fs/promises'
import { dirname, posix, join } from 'node:path'
import { SESSION_MOUNT } from './runtime.ts'

/** Normalises an absolute inside path; relative paths are resolved against `cwd` (default the session mount). */
export function insidePath(path: string, cwd: string = SESSION_MOUNT): string {
  if (!path) throw new Error('empty path')
  if (path.includes('\0')) throw new Error('path contains a NUL byte')
  const absolute = path.startsWith('/') ? path : posix.join(cwd, path)
  const normalized = posix.normalize(absolute)
  return normalized.length > 1 && normalized.endsWith('/') ? normalized.slice(0, -1) : normalized
}

/** `true` when `path` is `root` or below it. */
export function isUnder(path: string, root: string): boolean {
  return path === root || path.startsWith(root === '/' ? '/' : `${root}/`)
}

/** The host path of an inside path under the session mount (checked against symlinks), else null. */
export async function sessionHostPath(sessionDir: string, path: string): Promise<string | null> {
  const inside = insidePath(path)
  if (!isUnder(inside, SESSION_MOUNT)) return null
  return hostPathWithin(sessionDir, posix.relative(SESSION_MOUNT, inside))
}

/** Copy a host file or directory to a host path (directories merge into the target). */
export async function hostCopy(source: string, target: string): Promise<void> {
  await stat(source) // a clear ENOENT for a missing source
  await mkdir(dirname(target), { recursive: true })
  await cp(source, target, { recursive: true, force: true, verbatimSymlinks: true })
}

/**
 * `join(hostRoot, relative)`, refused when a symlink on the way (left by the sandbox) leads out of
 * `hostRoot`: the deepest existing ancestor must resolve inside it. The final component may be a symlink
 * (copies keep symlinks as they are, never follow them).
 */
export async function hostPathWithin(hostRoot: string, relative: string): Promise<string> {
  const target = join(hostRoot, relative)
  if (target === join(hostRoot, '.')) return target
  const root = await realpath(hostRoot)
  let probe = dirname(target)
  for (;;) {
    try {
      const resolved = await realpath(probe)
      if (resolved !== root && !resolved.startsWith(`${root}/`)) throw new Error(`${relative} leads outside the sandbox`)
      return target
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error
      const parent = dirname(probe)
      if (parent === probe) throw error
      probe = parent
    }
  }
}
