/**
 * @module
 * A private Docker daemon for tests and image builds: its own data root, exec root, pidfile and unix socket
 * under a temp dir, no bridge, no iptables/masquerading/forwarding (containers get `--network none` or
 * `host` only). Start-up failures throw with the reason and dockerd's log tail (tests fail loudly, never
 * skip). Stopping unmounts what dockerd left below its dir before deleting it.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Dockerode from 'dockerode'

export interface TestDockerd {
  socketPath: string
  docker: Dockerode
  stop(): Promise<void>
}

const READY_TIMEOUT_MS = 60_000

export function which(binary: string): Promise<string | null> {
  return new Promise((resolve) => {
    const child = spawn('sh', ['-c', `command -v ${binary}`], { stdio: ['ignore', 'pipe', 'ignore'] })
    let out = ''
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString()
    })
    child.on('close', (code) => resolve(code === 0 ? out.trim() : null))
  })
}

function exited(child: ChildProcess): Promise<void> {
  return child.exitCode !== null || child.signalCode !== null
    ? Promise.resolve()
    : new Promise((resolve) => child.once('exit', () => resolve()))
}

/** Mount points at or below `dir` (dockerd leaves e.g. `exec/netns/default` after a host-network container). */
async function mountsUnder(dir: string): Promise<string[]> {
  const info = await readFile('/proc/self/mountinfo', 'utf8')
  return info
    .split('\n')
    .map((line) => line.split(' ')[4] ?? '')
    .map((point) => point.replace(/\\040/g, ' '))
    .filter((point) => point === dir || point.startsWith(`${dir}/`))
    .sort((a, b) => b.length - a.length)
}

function run(command: string, args: string[]): Promise<number> {
  return new Promise((resolve) => {
    const child = spawn(command, args, { stdio: 'ignore' })
    child.on('error', () => resolve(-1))
    child.on('close', (code) => resolve(code ?? -1))
  })
}

/**
 * Unmount what dockerd left below its dir, then delete it. Never `rm -rf` across a mount point (that
 * would walk into bind mounts of host files): if one cannot be unmounted, the dir stays and we say so.
 */
async function removeDaemonDir(dir: string): Promise<void> {
  for (const point of await mountsUnder(dir)) {
    if ((await run('umount', [point])) !== 0) await run('umount', ['-l', point])
  }
  const left = await mountsUnder(dir)
  if (left.length > 0) {
    process.stderr.write(`test dockerd: leaving ${dir}, still mounted: ${left.join(', ')}\n`)
    return
  }
  await rm(dir, { recursive: true, force: true, maxRetries: 3 }).catch(() => {})
}

export async function startDockerd(): Promise<TestDockerd> {
  const dockerd = await which('dockerd')
  if (!dockerd) throw new Error('dockerd is not installed (apt-get install docker.io); the docker runtime tests need a real daemon')
  if (process.getuid?.() !== 0)
    throw new Error('dockerd needs root here (rootless dockerd is not set up); run the docker runtime tests as root')
  // Short base path: the socket path must fit in sockaddr_un (108 bytes).
  const dir = await mkdtemp(join(tmpdir(), 'rgdock-'))
  const socketPath = join(dir, 'docker.sock')
  const args = [
    '--data-root',
    join(dir, 'data'),
    '--exec-root',
    join(dir, 'exec'),
    '--pidfile',
    join(dir, 'dockerd.pid'),
    '-H',
    `unix://${socketPath}`,
    '--bridge=none',
    '--iptables=false',
    '--ip-masq=false',
    '--ip-forward=false',
    '--userland-proxy=false',
    '--shutdown-timeout=2',
  ]
  // The daemon's own scratch files (runc writes a `runc-process*` spec per `docker exec` to TMPDIR and leaves it
  // when the exec is cut short) stay in its dir, which `stop` removes, not in the caller's temp dir.
  const scratch = join(dir, 'tmp')
  await mkdir(scratch)
  const child = spawn(dockerd, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, TMPDIR: scratch } })
  let log = ''
  const keep = (chunk: Buffer) => {
    log = (log + chunk.toString()).slice(-20_000)
  }
  child.stdout?.on('data', keep)
  child.stderr?.on('data', keep)
  const docker = new Dockerode({ socketPath })
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM')
      const timer = setTimeout(() => child.kill('SIGKILL'), 20_000)
      await exited(child)
      clearTimeout(timer)
    }
    await removeDaemonDir(dir)
  }
  const deadline = Date.now() + READY_TIMEOUT_MS
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      await stop()
      throw new Error(`dockerd exited (${child.exitCode ?? child.signalCode}) before answering:\n${log.slice(-4000)}`)
    }
    try {
      await docker.ping()
      return { socketPath, docker, stop }
    } catch {
      if (Date.now() > deadline) {
        await stop()
        throw new Error(`dockerd did not answer on ${socketPath} within ${READY_TIMEOUT_MS} ms:\n${log.slice(-4000)}`)
      }
      // Readiness has no event to wait on but the socket answering; poll it, bounded by the deadline.
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
  }
}
