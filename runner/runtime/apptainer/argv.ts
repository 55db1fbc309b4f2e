/**
 * @module
 * The Apptainer CLI argv of every runtime operation (pure, so it is tested without the binary, which
 * does not exist on these machines). Follows Polar's rootless backend: `instance start --overlay
 * <session_dir>/overlay --bind <session_dir>:/polar/session … <image> <name>`, `exec instance://<name>
 * env K=V … <command>`, `instance stop <name>`. Rollgate additions: `--containall` (own PID/IPC, no host
 * HOME or /tmp, clean environment), `--net --network none` plus the forwarded edge port (the launcher,
 * run with the runner's own Node and loader bind-mounted read-only, listens inside the instance's network
 * namespace), cgroup limits (`--memory`, `--cpus`, `--pids-limit`), and each exec through the launcher in
 * its own process group so a timeout or cancel kills the whole group.
 */
import { createHash } from 'node:crypto'
import { type ReadOnlyBind, SESSION_MOUNT } from '../runtime.ts'
import { HELPER_CONTROL_DIR, type HostFile, helperCommand } from '../sandbox/host-node.ts'

export const APPTAINER_HOME = '/polar/home'
export const APPTAINER_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'

/** Polar's naming: a readable prefix of the session id plus a hash, within Apptainer's name limits. */
export function instanceName(sessionId: string): string {
  const readable = sessionId.replace(/[^A-Za-z0-9_.-]/g, '_').slice(0, 30)
  const hash = createHash('sha256').update(sessionId).digest('hex').slice(0, 8)
  return `rollgate-${readable}-${hash}`
}

export interface InstanceStartInput {
  image: string
  name: string
  /** Host dirs. */
  sessionDir: string
  overlayDir: string
  controlDir: string
  homeDir: string
  /** Runner helper files (Node, loader, libraries, launcher), bound read-only. */
  helperMounts: HostFile[]
  readOnlyBinds: ReadOnlyBind[]
  network: 'none' | 'host'
  gpus: number
  memoryMb: number | null
  cpus: number | null
  pidsLimit: number | null
}

export function instanceStartArgv(input: InstanceStartInput): string[] {
  const argv = ['instance', 'start', '--containall', '--overlay', input.overlayDir]
  if (input.gpus > 0) argv.push('--nv')
  if (input.network === 'none') argv.push('--net', '--network', 'none')
  if (input.memoryMb) argv.push('--memory', `${input.memoryMb}M`)
  if (input.cpus) argv.push('--cpus', String(input.cpus))
  if (input.pidsLimit) argv.push('--pids-limit', String(input.pidsLimit))
  argv.push('--bind', `${input.sessionDir}:${SESSION_MOUNT}`)
  argv.push('--bind', `${input.homeDir}:${APPTAINER_HOME}`)
  argv.push('--bind', `${input.controlDir}:${HELPER_CONTROL_DIR}`)
  for (const mount of input.helperMounts) argv.push('--bind', `${mount.source}:${mount.target}:ro`)
  for (const bind of input.readOnlyBinds) argv.push('--bind', `${bind.source}:${bind.target}:ro`)
  argv.push(input.image, input.name)
  return argv
}

/** The edge relay, a long-lived `exec` in the instance's network namespace. */
export function relayArgv(name: string, port: number): string[] {
  return [
    'exec',
    `instance://${name}`,
    ...helperCommand([
      'serve',
      '--port',
      String(port),
      '--socket',
      `${HELPER_CONTROL_DIR}/edge.sock`,
      '--ready',
      `${HELPER_CONTROL_DIR}/ready`,
    ]),
  ]
}

export interface ExecInput {
  name: string
  cwd: string
  env: Record<string, string>
  command: string
  /** Inside path of the pidfile the launcher writes. */
  pidfile: string
}

/** Polar exports HOME and PATH explicitly (`--containall` starts from a clean environment). */
export function execArgv(input: ExecInput): string[] {
  const env: Record<string, string> = { HOME: APPTAINER_HOME, PATH: APPTAINER_PATH, ...input.env }
  const assignments = Object.entries(env).map(([key, value]) => {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(key)) throw new Error(`invalid environment variable name ${JSON.stringify(key)}`)
    return `${key}=${value}`
  })
  return [
    'exec',
    '--pwd',
    input.cwd,
    `instance://${input.name}`,
    'env',
    ...assignments,
    ...helperCommand(['run', '--pidfile', input.pidfile, '--', input.command]),
  ]
}

export function killArgv(name: string, pidfile: string): string[] {
  return ['exec', `instance://${name}`, ...helperCommand(['kill', pidfile])]
}

/** Unpack a tar stream (stdin) into `dir`, creating it. */
export function untarArgv(name: string, dir: string): string[] {
  return ['exec', `instance://${name}`, 'sh', '-c', 'mkdir -p "$1" && exec tar -x -f - -C "$1"', 'sh', dir]
}

/** Pack `entry` of `dir` as a tar stream on stdout. */
export function tarArgv(name: string, dir: string, entry: string): string[] {
  return ['exec', `instance://${name}`, 'tar', '-c', '-f', '-', '-C', dir, entry]
}

export function instanceStopArgv(name: string): string[] {
  return ['instance', 'stop', name]
}
