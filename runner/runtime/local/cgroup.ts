/**
 * @module
 * Per-sandbox resource limits through cgroup v1 (memory, cpu, pids), nested under the runner's own cgroup
 * of each controller so the host's limits still apply. Only where the hierarchy is writable (root on a
 * cgroup v1 host); `createCgroup` returns null otherwise and the local runtime falls back to `prlimit`.
 * cgroup v2 is not used: the runner's own cgroup holds processes, so it cannot delegate controllers.
 */
import { access, constants, mkdir, readFile, rmdir, writeFile } from 'node:fs/promises'
import { join } from 'node:path'

const CGROUP_ROOT = '/sys/fs/cgroup'

export interface CgroupLimits {
  memoryBytes?: number | null
  /** Fractional CPUs (CFS quota over a 100 ms period). */
  cpus?: number | null
  pids?: number | null
}

export interface Cgroup {
  /** `cgroup.procs` files a new process must write its pid to (one per controller). */
  procsFiles: string[]
  controllers: string[]
  /** Kill what is left inside and remove the groups. Idempotent. */
  destroy(): Promise<void>
}

/** The runner's own cgroup v1 path per controller, from /proc/self/cgroup. */
async function ownPaths(): Promise<Map<string, string>> {
  const paths = new Map<string, string>()
  const text = await readFile('/proc/self/cgroup', 'utf8').catch(() => '')
  for (const line of text.split('\n')) {
    const [, controllers, path] = line.split(':')
    if (!controllers || path === undefined) continue
    for (const controller of controllers.split(',')) paths.set(controller, path)
  }
  return paths
}

async function writable(path: string): Promise<boolean> {
  try {
    await access(path, constants.W_OK)
    return true
  } catch {
    return false
  }
}

/** Whether cgroup v1 limits can be set here (for capability flags). */
export async function cgroupControllers(): Promise<string[]> {
  const own = await ownPaths()
  const available: string[] = []
  for (const controller of ['memory', 'cpu', 'pids']) {
    const path = own.get(controller)
    if (path === undefined) continue
    if (await writable(join(CGROUP_ROOT, controller, path))) available.push(controller)
  }
  return available
}

export async function createCgroup(name: string, limits: CgroupLimits): Promise<Cgroup | null> {
  const wanted: Array<[string, Array<[string, string]>]> = []
  if (limits.memoryBytes) {
    wanted.push(['memory', [['memory.limit_in_bytes', String(limits.memoryBytes)]]])
  }
  if (limits.cpus) {
    wanted.push([
      'cpu',
      [
        ['cpu.cfs_period_us', '100000'],
        ['cpu.cfs_quota_us', String(Math.max(1000, Math.round(limits.cpus * 100000)))],
      ],
    ])
  }
  if (limits.pids) wanted.push(['pids', [['pids.max', String(limits.pids)]]])
  if (wanted.length === 0) return null
  const own = await ownPaths()
  const created: string[] = []
  const destroy = async () => {
    for (const dir of created.splice(0)) await removeGroup(dir)
  }
  try {
    for (const [controller, settings] of wanted) {
      const parent = own.get(controller)
      if (parent === undefined) throw new Error(`no cgroup v1 ${controller} controller`)
      const dir = join(CGROUP_ROOT, controller, parent, `rollgate-${name}`)
      await mkdir(dir)
      created.push(dir)
      for (const [file, value] of settings) await writeFile(join(dir, file), value)
    }
  } catch (error) {
    await destroy()
    if (isPermissionOrMissing(error)) return null
    throw error
  }
  return { procsFiles: created.map((dir) => join(dir, 'cgroup.procs')), controllers: wanted.map(([c]) => c), destroy }
}

function isPermissionOrMissing(error: unknown): boolean {
  const code = (error as NodeJS.ErrnoException | null)?.code
  return code === 'EACCES' || code === 'EPERM' || code === 'ENOENT' || code === 'EROFS' || String(error).includes('no cgroup v1')
}

async function removeGroup(dir: string): Promise<void> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const pids = (await readFile(join(dir, 'cgroup.procs'), 'utf8').catch(() => '')).split('\n').filter(Boolean).map(Number)
    for (const pid of pids) {
      try {
        process.kill(pid, 'SIGKILL')
      } catch {
        // gone
      }
    }
    try {
      await rmdir(dir)
      return
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code
      if (code === 'ENOENT') return
      if (code !== 'EBUSY') throw error
    }
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  // Still busy after a second of SIGKILLs: leave it rather than throw from teardown.
}
