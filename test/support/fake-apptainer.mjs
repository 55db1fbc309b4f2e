#!/usr/bin/env node
/**
 * A stand-in for the `apptainer` CLI (no Apptainer binary exists on these machines), just enough of it for
 * the runner's apptainer backend to drive a real process flow: `instance start` keeps a bubblewrap sandbox
 * alive (its own PID and mount namespaces, bwrap's init as PID 1; root = the overlay dir with the host's system dirs read-only and
 * the `--bind`s), `exec [--pwd D] instance://NAME argv…` runs argv inside it through `nsenter` (so execs
 * share files and see each other's processes, as in an instance), `instance stop NAME` kills its PID 1,
 * which ends everything in it. Host network only (no `--net`); no limits.
 * State lives in `$FAKE_APPTAINER_STATE`; every call is appended to `calls.log` there.
 */
import { spawn } from 'node:child_process'
import { appendFileSync, existsSync, lstatSync, mkdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

const state = process.env.FAKE_APPTAINER_STATE
if (!state) {
  process.stderr.write('fake apptainer: FAKE_APPTAINER_STATE is not set\n')
  process.exit(2)
}
const argv = process.argv.slice(2)
appendFileSync(join(state, 'calls.log'), `${JSON.stringify(argv)}\n`)

const SYSTEM_DIRS = ['/usr', '/etc', '/opt', '/bin', '/sbin', '/lib', '/lib64']

function fail(message) {
  process.stderr.write(`fake apptainer: ${message}\n`)
  process.exit(255)
}

function instanceFile(name) {
  return join(state, `${name}.json`)
}

/**
 * `instance start`: a bubblewrap sandbox kept alive (`sleep infinity` as PID 1 of its own PID namespace)
 * whose root is the overlay dir with the host's system dirs read-only and the instance's `--bind`s.
 */
function start(args) {
  const binds = []
  let overlay = null
  let index = 0
  for (; index < args.length; index++) {
    const arg = args[index]
    if (arg === '--bind') binds.push(args[++index])
    else if (arg === '--overlay') overlay = args[++index]
    else if (arg === '--net' || arg === '--network') fail('the fake supports only the host network')
    else if (['--memory', '--cpus', '--pids-limit'].includes(arg)) index++
    else if (!arg.startsWith('--')) break
  }
  const [image, name] = args.slice(index)
  if (!image || !name || !overlay) fail(`instance start needs --overlay, an image and a name: ${args.join(' ')}`)
  if (existsSync(instanceFile(name))) fail(`instance ${name} already exists`)
  const root = join(overlay, 'root')
  mkdirSync(join(root, 'tmp'), { recursive: true, mode: 0o1777 })
  const bwrap = ['--bind', root, '/']
  for (const dir of SYSTEM_DIRS) {
    if (!existsSync(dir)) continue
    if (lstatSync(dir).isSymbolicLink()) bwrap.push('--symlink', readlinkSync(dir), dir)
    else bwrap.push('--ro-bind', dir, dir)
  }
  bwrap.push('--proc', '/proc', '--dev', '/dev')
  for (const spec of binds) {
    const [source, dest, mode] = spec.split(':')
    bwrap.push(mode === 'ro' ? '--ro-bind' : '--bind', source, dest)
  }
  // `ready` on stdout once bwrap has set the sandbox up (its child pid comes earlier, on the info fd)
  bwrap.push('--unshare-pid', '--info-fd', '3', '--', '/bin/sh', '-c', 'echo ready; exec sleep infinity')
  const holder = spawn('bwrap', bwrap, { stdio: ['ignore', 'pipe', 'ignore', 'pipe'], detached: true })
  let info = ''
  let ready = false
  const check = () => {
    const match = /"child-pid":\s*(\d+)/.exec(info)
    if (!match || !ready) return
    writeFileSync(instanceFile(name), JSON.stringify({ image, pid: Number(match[1]) }))
    holder.stdio[1].destroy()
    holder.stdio[3].destroy()
    holder.unref()
    process.exit(0)
  }
  holder.stdio[3].on('data', (chunk) => {
    info += chunk.toString()
    check()
  })
  holder.stdio[1].on('data', (chunk) => {
    ready ||= chunk.toString().includes('ready')
    check()
  })
  holder.once('exit', (code) => fail(`bwrap exited ${code} before the instance was up`))
}

/** Killing PID 1 of the instance's PID namespace ends every process in it. */
function stop(name) {
  if (!existsSync(instanceFile(name))) fail(`no instance ${name}`)
  const { pid } = JSON.parse(readFileSync(instanceFile(name), 'utf8'))
  rmSync(instanceFile(name), { force: true })
  try {
    process.kill(pid, 'SIGKILL')
  } catch {
    // gone already
  }
}

/** `exec`: argv inside the instance's mount and PID namespaces (nsenter), in `--pwd`. */
function exec(args) {
  let cwd = '/'
  let index = 0
  if (args[0] === '--pwd') {
    cwd = args[1]
    index = 2
  }
  const target = args[index] ?? ''
  if (!target.startsWith('instance://')) fail(`exec needs instance://NAME, got ${target}`)
  const name = target.slice('instance://'.length)
  if (!existsSync(instanceFile(name))) fail(`no instance ${name}`)
  const { pid } = JSON.parse(readFileSync(instanceFile(name), 'utf8'))
  const command = ['-t', String(pid), '-m', '-p', '-r', '--', '/bin/sh', '-c', 'cd "$1" && shift && exec "$@"', 'sh', cwd]
  const child = spawn('nsenter', [...command, ...args.slice(index + 1)], { stdio: 'inherit' })
  for (const signal of ['SIGTERM', 'SIGINT']) process.on(signal, () => child.kill('SIGKILL'))
  child.on('error', (error) => fail(error.message))
  child.on('close', (code, signal) => process.exit(code ?? (signal ? 137 : 1)))
}

const [verb, ...rest] = argv
if (verb === 'instance' && rest[0] === 'start') start(rest.slice(1))
else if (verb === 'instance' && rest[0] === 'stop') stop(rest[1])
else if (verb === 'exec') exec(rest)
else fail(`unsupported: ${argv.join(' ')}`)
