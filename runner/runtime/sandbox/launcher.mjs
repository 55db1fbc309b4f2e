/**
 * @module
 * The one helper that runs INSIDE a sandbox (bind-mounted read-only, run by the runner's own Node binary,
 * so it needs nothing from the image). Plain JavaScript: it starts on every exec, and skipping Node's
 * type stripping saves ~0.3 s per exec on a loaded host.
 *
 * Modes:
 * - `run --port P --socket S [--pidfile F] [--path-prefix D] -- <command>`: listen on `127.0.0.1:P` (when
 *   `--port` is given) and relay every connection to the unix socket S (the runner's end of the edge
 *   relay), then run `bash -lc <command>` (`sh -lc` when the image has no bash) in its own process group,
 *   forward its exit status and, on SIGTERM/SIGINT/SIGHUP, kill the whole group. The port is up before the
 *   command starts. `--path-prefix`: D goes first on PATH after the login profile (which resets PATH).
 * - `serve --port P --socket S [--ready F]`: only the relay, until killed (a container's main process);
 *   writes F once listening.
 * - `idle [--ready F]`: wait until killed (a container's main process when nothing is relayed).
 * - `kill <pidfile>`: SIGKILL the process group recorded in a pidfile (cancel of a `docker exec`).
 */
import { spawn } from 'node:child_process'
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { connect, createServer } from 'node:net'

/** @param {string[]} args @returns {{ flags: Map<string, string>, rest: string[] }} */
function parseFlags(args) {
  const flags = new Map()
  let index = 0
  while (index < args.length && args[index] !== '--') {
    const key = args[index]
    const value = args[index + 1]
    if (!key?.startsWith('--') || value === undefined) throw new Error(`bad argument ${key}`)
    flags.set(key.slice(2), value)
    index += 2
  }
  return { flags, rest: args.slice(index + 1) }
}

/** @param {number} port @param {string} socketPath @returns {Promise<import('node:net').Server>} */
function relay(port, socketPath) {
  const server = createServer((inbound) => {
    const outbound = connect(socketPath)
    inbound.pipe(outbound)
    outbound.pipe(inbound)
    inbound.on('error', () => outbound.destroy())
    outbound.on('error', () => inbound.destroy())
  })
  return new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, '127.0.0.1', () => resolve(server))
  })
}

function shell() {
  for (const candidate of ['/bin/bash', '/usr/bin/bash', '/usr/local/bin/bash']) if (existsSync(candidate)) return candidate
  return '/bin/sh'
}

/** @param {string} value */
function shellQuote(value) {
  return `'${value.replaceAll("'", `'\\''`)}'`
}

/** @param {string[]} args */
async function run(args) {
  const { flags, rest } = parseFlags(args)
  const command = rest[0]
  if (command === undefined) throw new Error('run needs -- <command>')
  const port = flags.get('port')
  const socketPath = flags.get('socket')
  if (port && socketPath) await relay(Number(port), socketPath)
  const prefix = flags.get('path-prefix')
  const script = prefix ? `PATH=${shellQuote(prefix)}:"$PATH"; export PATH\n${command}` : command
  const child = spawn(shell(), ['-lc', script], { stdio: 'inherit', detached: true })
  const pidfile = flags.get('pidfile')
  if (pidfile && child.pid) writeFileSync(pidfile, String(child.pid))
  const killGroup = () => {
    try {
      if (child.pid) process.kill(-child.pid, 'SIGKILL')
    } catch {
      // already gone
    }
  }
  for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP']) process.on(signal, killGroup)
  child.on('error', (error) => {
    process.stderr.write(`rollgate launcher: ${error.message}\n`)
    process.exit(127)
  })
  child.on('exit', (code, signal) => {
    killGroup() // leftovers of the command's group (background jobs) end with it
    process.exit(code ?? 128 + signalNumber(signal))
  })
}

/** @param {string | null} signal */
function signalNumber(signal) {
  /** @type {Record<string, number>} */
  const numbers = { SIGHUP: 1, SIGINT: 2, SIGQUIT: 3, SIGKILL: 9, SIGSEGV: 11, SIGPIPE: 13, SIGTERM: 15 }
  return (signal && numbers[signal]) || 0
}

/** @param {string[]} argv */
async function main(argv) {
  const [mode, ...args] = argv
  if (mode === 'run') return run(args)
  if (mode === 'serve' || mode === 'idle') {
    const { flags } = parseFlags(args)
    if (mode === 'serve') await relay(Number(flags.get('port')), String(flags.get('socket')))
    else setInterval(() => {}, 1 << 30)
    for (const signal of ['SIGTERM', 'SIGINT']) process.on(signal, () => process.exit(0))
    const ready = flags.get('ready')
    if (ready) writeFileSync(ready, String(process.pid))
    return
  }
  if (mode === 'kill') {
    const pid = Number(readFileSync(String(args[0]), 'utf8'))
    if (pid > 1) {
      try {
        process.kill(-pid, 'SIGKILL')
      } catch {
        // already gone
      }
    }
    return
  }
  throw new Error(`unknown mode ${mode}`)
}

main(process.argv.slice(2)).catch((error) => {
  process.stderr.write(`rollgate launcher: ${error instanceof Error ? error.message : String(error)}\n`)
  process.exit(125)
})
