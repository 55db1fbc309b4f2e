/**
 * @module
 * Running the runner's own Node binary inside any image (busybox included): the binary, its ELF loader
 * and the shared libraries it links are bind-mounted read-only under `/run/rollgate`, and the loader is
 * invoked explicitly with `--library-path`, so nothing from the image's libc is used and nothing leaks
 * into the environment of the commands the helper starts.
 */
import { spawnSync } from 'node:child_process'
import { realpathSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

export const HELPER_DIR = '/run/rollgate'
export const HELPER_LIB_DIR = `${HELPER_DIR}/lib`
export const HELPER_LOADER = `${HELPER_DIR}/ld.so`
export const HELPER_NODE = `${HELPER_DIR}/node`
export const HELPER_LAUNCHER = `${HELPER_DIR}/launcher.mjs`
/** Read-write dir shared with the runner (edge socket, pidfiles, ready marker). */
export const HELPER_CONTROL_DIR = `${HELPER_DIR}/ctl`

export const LAUNCHER_SOURCE = fileURLToPath(new URL('./launcher.mjs', import.meta.url))

export interface HostFile {
  source: string
  target: string
}

let cached: HostFile[] | null = null

/** Read-only file mounts (host path → inside path) that make `helperCommand()` runnable anywhere. */
export function helperMounts(): HostFile[] {
  if (cached) return cached
  const node = realpathSync(process.execPath)
  const ldd = spawnSync('ldd', [node], { encoding: 'utf8' })
  if (ldd.status !== 0) throw new Error(`ldd ${node} failed: ${ldd.stderr || ldd.error?.message}`)
  const mounts: HostFile[] = [
    { source: node, target: HELPER_NODE },
    { source: LAUNCHER_SOURCE, target: HELPER_LAUNCHER },
  ]
  for (const line of ldd.stdout.split('\n')) {
    const linked = /^\s*(\S+)\s+=>\s+(\/\S+)/.exec(line)
    if (linked) {
      mounts.push({ source: realpathSync(linked[2]!), target: `${HELPER_LIB_DIR}/${linked[1]}` })
      continue
    }
    const loader = /^\s*(\/\S*ld-linux\S*)\s+\(/.exec(line)
    if (loader) mounts.push({ source: realpathSync(loader[1]!), target: HELPER_LOADER })
  }
  if (!mounts.some((mount) => mount.target === HELPER_LOADER)) throw new Error(`no ELF loader found for ${node} (ldd: ${ldd.stdout})`)
  cached = mounts
  return mounts
}

/** argv running the launcher with `args` through the mounted loader. */
export function helperCommand(args: string[]): string[] {
  return [HELPER_LOADER, '--library-path', HELPER_LIB_DIR, HELPER_NODE, HELPER_LAUNCHER, ...args]
}
