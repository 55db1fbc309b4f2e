/**
 * @module
 * The bubblewrap argv of one local-runtime exec (pure; the runtime passes it to `bwrap --args 3` through a
 * pipe, so environment values such as the session token never appear in a process list).
 *
 * Layout inside: the session's private root (a host dir kept for the whole session, so every exec sees
 * the files of the previous ones anywhere: HOME=/root, /tmp, the work dir, /tests, /app, …) with the host's
 * system dirs bound read-only over it, a fresh `/proc` with `/proc/sys` read-only, a minimal `/dev`, the
 * session dir at `/polar/session` and the runner's helpers read-only under `/run/rollgate` (edge socket,
 * launcher, and the runner's own Node — the pinned Node 22 — alone in `/run/rollgate/bin`, which the
 * launcher puts first on PATH after the login shell's profile, so a harness that spawns `node` gets it). Symlinked system dirs (`/bin -> usr/bin`) are plain symlinks in the private root,
 * kept in place by the runtime. New PID, IPC, UTS, cgroup and network namespaces (only `lo`); as root every
 * capability is dropped, otherwise a user namespace without capabilities and with further user namespaces
 * disabled. Whatever the sandbox leaves in its root (symlinks included) only shapes its own mount
 * namespace: bind sources are host paths the runner chose, never paths inside the private root.
 */
import { SESSION_MOUNT } from '../runtime.ts'

/** Inside paths of the runner's helpers. */
export const CONTROL_MOUNT = '/run/rollgate'
export const EDGE_SOCKET_INSIDE = `${CONTROL_MOUNT}/edge.sock`
/** Holds only the runner's Node binary; first on every exec's PATH. */
export const NODE_BIN_INSIDE = `${CONTROL_MOUNT}/bin`
export const NODE_INSIDE = `${NODE_BIN_INSIDE}/node`
export const LAUNCHER_INSIDE = `${CONTROL_MOUNT}/launcher.mjs`

/** A host system dir as the sandbox sees it: read-only bind, or the same symlink (`/bin -> usr/bin`). */
export interface SystemDir {
  path: string
  symlinkTarget?: string
}

export interface Bind {
  source: string
  target: string
}

export interface BwrapPlan {
  /** The session's private root (host dir), writable, bound at `/`. */
  rootDir: string
  sessionDir: string
  /** The runner's end of the edge relay (host path). */
  edgeSocket: string
  nodeBinary: string
  launcher: string
  systemDirs: SystemDir[]
  readOnlyBinds: Bind[]
  /** The runner is root: drop every capability instead of entering a user namespace. */
  privileged: boolean
  env: Record<string, string>
  cwd: string
  command: string
  /** Loopback port inside relayed to the edge socket; null = no relay. */
  edgePort: number | null
}

/** Host proc entries that would let root-without-capabilities change the host (sysctls, sysrq). */
const PROC_READ_ONLY = ['/proc/sys', '/proc/sysrq-trigger', '/proc/irq', '/proc/bus']

/**
 * `options` go through `--args FD` (they carry the environment); `command` stays on the command line
 * (bwrap only takes the command from there).
 */
export function bwrapArgs(plan: BwrapPlan): { options: string[]; command: string[] } {
  const args: string[] = ['--bind', plan.rootDir, '/']
  for (const dir of plan.systemDirs) if (dir.symlinkTarget === undefined) args.push('--ro-bind', dir.path, dir.path)
  args.push('--proc', '/proc')
  for (const path of PROC_READ_ONLY) args.push('--ro-bind-try', path, path)
  args.push('--dev', '/dev', '--tmpfs', '/dev/shm')
  args.push('--bind', plan.sessionDir, SESSION_MOUNT)
  args.push('--ro-bind', plan.edgeSocket, EDGE_SOCKET_INSIDE)
  // The Node binary alone in a read-only dir (a tmpfs made read-only once it is in): nothing else on PATH.
  args.push('--tmpfs', NODE_BIN_INSIDE, '--ro-bind', plan.nodeBinary, NODE_INSIDE, '--remount-ro', NODE_BIN_INSIDE)
  args.push('--ro-bind', plan.launcher, LAUNCHER_INSIDE)
  for (const bind of plan.readOnlyBinds) args.push('--ro-bind', bind.source, bind.target)
  args.push('--unshare-pid', '--unshare-ipc', '--unshare-uts', '--unshare-net', '--unshare-cgroup-try')
  if (plan.privileged) args.push('--cap-drop', 'ALL')
  else args.push('--unshare-user', '--disable-userns')
  args.push('--hostname', 'rollgate-sandbox', '--die-with-parent', '--new-session', '--clearenv')
  for (const [key, value] of Object.entries(plan.env)) args.push('--setenv', key, value)
  args.push('--chdir', plan.cwd)
  const command = [NODE_INSIDE, LAUNCHER_INSIDE, 'run', '--path-prefix', NODE_BIN_INSIDE]
  if (plan.edgePort !== null) command.push('--port', String(plan.edgePort), '--socket', EDGE_SOCKET_INSIDE)
  command.push('--', plan.command)
  return { options: args, command }
}

/** NUL-separated, as `bwrap --args FD` reads them. */
export function encodeArgs(args: string[]): Buffer {
  for (const arg of args) if (arg.includes('\0')) throw new Error('argument contains a NUL byte')
  return Buffer.from(args.map((arg) => `${arg}\0`).join(''), 'utf8')
}
