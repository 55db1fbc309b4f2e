/**
 * @module
 * Which process listens on a loopback TCP port (Linux `/proc`), so "port 8787 is already in use" can name what to
 * stop: an edge left running by an earlier `npm run dev` whose parent was killed holds the port with no terminal
 * to Ctrl-C. Best effort: `null` when `/proc` does not say (another OS, another user's process, a race).
 */
import { readdirSync, readFileSync, readlinkSync } from 'node:fs'

export interface PortHolder {
  pid: number
  /** Its command line, shortened for one line of output. */
  command: string
}

/** Socket inodes listening on `port` (IPv4 and IPv6). */
function listeningInodes(port: number): Set<string> {
  const inodes = new Set<string>()
  const hexPort = port.toString(16).toUpperCase().padStart(4, '0')
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text = ''
    try {
      text = readFileSync(table, 'utf8')
    } catch {
      continue
    }
    for (const line of text.split('\n').slice(1)) {
      const fields = line.trim().split(/\s+/)
      // local_address is "ADDR:PORT" in hex; state 0A is LISTEN; the inode is the tenth field.
      if (fields[1]?.endsWith(`:${hexPort}`) && fields[3] === '0A' && fields[9] && fields[9] !== '0') inodes.add(fields[9])
    }
  }
  return inodes
}

function commandLine(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean).join(' ')
  } catch {
    return ''
  }
}

/** A command line for one line of output: the program's base name, long paths by their last parts. */
function shortCommand(command: string): string {
  const short = command
    .split(' ')
    .map((arg, index) => {
      if (!arg.startsWith('/')) return arg
      const parts = arg.split('/')
      return index === 0 ? (parts.at(-1) ?? arg) : parts.length > 4 ? `…/${parts.slice(-3).join('/')}` : arg
    })
    .join(' ')
  return short.length > 100 ? `${short.slice(0, 99)}…` : short
}

function parentPid(pid: number): number {
  try {
    return Number(/^PPid:\s+(\d+)$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0)
  } catch {
    return 0
  }
}

/**
 * The process listening on `port`; for a workerd under `wrangler dev`, the topmost wrangler above it (stopping that
 * stops the edge whole).
 */
export function portHolder(port: number): PortHolder | null {
  const inodes = listeningInodes(port)
  if (inodes.size === 0) return null
  let entries: string[] = []
  try {
    entries = readdirSync('/proc').filter((name) => /^\d+$/.test(name))
  } catch {
    return null
  }
  for (const entry of entries) {
    const pid = Number(entry)
    let fds: string[] = []
    try {
      fds = readdirSync(`/proc/${pid}/fd`)
    } catch {
      continue
    }
    const holds = fds.some((fd) => {
      try {
        return inodes.has(/^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`))?.[1] ?? '')
      } catch {
        return false
      }
    })
    if (!holds) continue
    let top = pid
    for (let parent = parentPid(top); parent > 1 && /wrangler/.test(commandLine(parent)); parent = parentPid(parent)) top = parent
    return { pid: top, command: shortCommand(commandLine(top)) }
  }
  return null
}

/** `"pid N: <command>; "` for a message about a taken port, or `""` when the holder is unknown. */
export function describePortHolder(port: number): string {
  const holder = portHolder(port)
  return holder ? `pid ${holder.pid}: ${holder.command}; ` : ''
}
