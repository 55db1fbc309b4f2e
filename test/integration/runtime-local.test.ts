/**
 * The local (bubblewrap) runtime against real sandboxes: the forwarded edge port is the only way out,
 * execs share files but not processes, env/cwd, uploads/downloads (symlink escapes refused), time limits,
 * cancel mid-exec kills the whole process tree, memory limits, stop/cancel idempotence.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { createServer, type IncomingMessage, type Server } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { runtimeSpecSchema } from '../../src/contract/rollout.ts'
import { createRuntime } from '../../runner/runtime/index.ts'
import type { Runtime } from '../../runner/runtime/runtime.ts'

interface StandIn {
  server: Server
  port: number
  requests: IncomingMessage[]
  /** Resolves with the first request whose path is `path`. */
  waitFor(path: string): Promise<IncomingMessage>
}

async function standIn(name: string): Promise<StandIn> {
  const requests: IncomingMessage[] = []
  const waiters: Array<{ path: string; resolve: (request: IncomingMessage) => void }> = []
  const server = createServer((request, response) => {
    requests.push(request)
    for (const waiter of waiters.filter((entry) => entry.path === request.url)) waiter.resolve(request)
    response.end(`${name} ${request.method} ${request.url}`)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const port = (server.address() as { port: number }).port
  return {
    server,
    port,
    requests,
    waitFor(path) {
      const seen = requests.find((request) => request.url === path)
      if (seen) return Promise.resolve(seen)
      return new Promise((resolve) => waiters.push({ path, resolve }))
    },
  }
}

let edge: StandIn
let other: StandIn
let base: string
const runtimes: Runtime[] = []

beforeAll(async () => {
  edge = await standIn('edge')
  other = await standIn('other')
  base = await mkdtemp(join(tmpdir(), 'rollgate-local-test-'))
})

afterEach(async () => {
  await Promise.all(runtimes.splice(0).map((runtime) => runtime.cancel()))
})

afterAll(async () => {
  edge.server.close()
  other.server.close()
  await rm(base, { recursive: true, force: true })
})

let counter = 0
async function startRuntime(spec: Record<string, unknown> | null = null): Promise<{ runtime: Runtime; sessionDir: string }> {
  const sessionDir = join(base, `session-${++counter}`)
  await mkdir(join(sessionDir, 'logs', 'agent'), { recursive: true })
  const runtime = createRuntime(
    spec ? runtimeSpecSchema.parse(spec) : null,
    { sessionId: `rs_local_${counter}`, sessionDir, edgeUrl: `http://127.0.0.1:${edge.port}` },
    { defaultBackend: 'local' },
  )
  runtimes.push(runtime)
  await runtime.start()
  return { runtime, sessionDir }
}

/** Host processes whose command line contains `marker`. */
function processesWith(marker: string): number[] {
  const found: number[] = []
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes(marker)) found.push(Number(entry))
    } catch {
      // exited meanwhile
    }
  }
  return found
}

describe('local runtime: network', () => {
  it('reaches the edge through the forwarded port and nothing else', async () => {
    const { runtime } = await startRuntime()
    expect(runtime.backend).toBe('local')
    expect(runtime.capabilities.isolatesNetwork).toBe(true)
    const result = await runtime.exec({
      command: [
        'curl -sS -m 5 "$EDGE/forwarded"; echo " edge=$?"',
        `curl -sS -m 3 http://127.0.0.1:${other.port}/other; echo " loopback=$?"`,
        `curl -sS -m 3 http://127.0.0.1:${edge.port}/direct; echo " edgeport=$?"`,
        'curl -sS -m 3 http://192.0.2.1/outside; echo " outside=$?"',
        `python3 -c "import socket; socket.create_connection(('127.0.0.1', ${other.port}), 2)" 2>/dev/null; echo "py=$?"`,
        'ip -o link | cut -d: -f2 | tr -d " " | paste -sd,',
      ].join('; '),
      env: { EDGE: runtime.edgeUrlInside },
    })
    expect(result.exitCode).toBe(0)
    expect(result.stdout).toContain('edge GET /forwarded edge=0')
    expect(result.stdout).toMatch(/ loopback=7\b/)
    expect(result.stdout).toMatch(/ edgeport=7\b/)
    expect(result.stdout).not.toMatch(/ outside=0\b/)
    expect(result.stdout).toContain('py=1')
    expect(result.stdout.trim().split('\n').at(-1)).toBe('lo')
    expect(other.requests).toHaveLength(0)
    expect(edge.requests.map((request) => request.url)).toContain('/forwarded')
    expect(edge.requests.map((request) => request.url)).not.toContain('/direct')
  })

  it('keeps the edge URL path and has the port up for every exec', async () => {
    const { runtime } = await startRuntime()
    for (const round of [1, 2, 3]) {
      const result = await runtime.exec({ command: `curl -sS -m 5 ${runtime.edgeUrlInside}/round/${round}` })
      expect(result.stdout).toBe(`edge GET /round/${round}`)
    }
  })

  it('runs without capabilities: no mounts, read-only system dirs and /proc/sys', async () => {
    const { runtime } = await startRuntime()
    const result = await runtime.exec({
      command: [
        'grep CapEff /proc/self/status',
        'mount -t tmpfs none /tmp 2>/dev/null; echo "mount=$?"',
        'touch /usr/rollgate-probe 2>/dev/null; echo "usr=$?"',
        // rewriting the current value is harmless even if the guard were missing
        'cat /proc/sys/kernel/core_pattern > /tmp/cp; (cat /tmp/cp > /proc/sys/kernel/core_pattern) 2>/dev/null; echo "sysctl=$?"',
        'echo pid=$$',
      ].join('; '),
    })
    expect(result.stdout).toContain('CapEff:\t0000000000000000')
    expect(result.stdout).toMatch(/mount=[1-9]/)
    expect(result.stdout).not.toContain('usr=0')
    expect(result.stdout).not.toContain('sysctl=0')
    expect(existsSync('/usr/rollgate-probe')).toBe(false)
    // own PID namespace: the shell is a small pid (bwrap's init is 1, the launcher 2)
    expect(Number(/pid=(\d+)/.exec(result.stdout)?.[1])).toBeLessThan(10)
  })
})

describe('local runtime: exec, files', () => {
  it('applies env and cwd, defaults cwd to the session mount and shares files between execs', async () => {
    const { runtime, sessionDir } = await startRuntime({ backend: 'local', workdir: '/testbed' })
    expect(runtime.workDir).toBe('/testbed')
    expect(runtime.homeDir).toBe('/root')
    const first = await runtime.exec({
      command:
        'pwd; echo "$GREETING"; echo "$HOME"; echo one > here.txt; echo home > ~/h.txt; echo tmp > /tmp/t.txt; echo s > /polar/session/s.txt',
      env: { GREETING: 'hello world' },
    })
    expect(first.exitCode).toBe(0)
    expect(first.stdout).toBe('/testbed\nhello world\n/root\n')
    const second = await runtime.exec({
      command: 'pwd; cat /testbed/here.txt /root/h.txt /tmp/t.txt s.txt; echo "[$GREETING]"',
      cwd: '/polar/session',
    })
    expect(second.stdout).toBe('/polar/session\none\nhome\ntmp\ns\n[]\n')
    expect(await readFile(join(sessionDir, 's.txt'), 'utf8')).toBe('s\n')
    const failing = await runtime.exec({ command: 'echo out; echo err >&2; exit 3' })
    expect(failing).toMatchObject({ exitCode: 3, stdout: 'out\n', stderr: 'err\n', timedOut: false, cancelled: false })
  })

  it("puts the runner's own Node first on PATH, also after a login profile that resets PATH", async () => {
    const { runtime } = await startRuntime()
    // The host's /etc/profile (bound read-only) sets PATH for the login shell; a harness spawning `node`
    // must still get the runner's pinned Node (≥ 22), not whatever the host has in /usr/bin.
    const result = await runtime.exec({
      command: 'command -v node; node -p process.version; echo "$PATH"',
      env: { PATH: '/usr/bin:/bin' },
    })
    expect(result.stderr).toBe('')
    const [path, version, pathVar] = result.stdout.trim().split('\n')
    expect(path).toBe('/run/rollgate/bin/node')
    expect(version).toBe(process.version)
    expect(pathVar?.split(':')[0]).toBe('/run/rollgate/bin')
    const readOnly = await runtime.exec({ command: 'touch /run/rollgate/bin/x 2>&1; ls /run/rollgate/bin' })
    expect(readOnly.stdout.trim().split('\n').at(-1)).toBe('node')
  })
  it('creates a work dir under the session mount at start; an upload fills it (the fix-stats task layout)', async () => {
    const { runtime, sessionDir } = await startRuntime({ backend: 'local', workdir: '/polar/session/workspace' })
    const source = join(base, 'workspace-src')
    await mkdir(source, { recursive: true })
    await writeFile(join(source, 'a.txt'), 'a\n')
    await runtime.upload(source, '/polar/session/workspace')
    const listed = await runtime.exec({ command: 'pwd; cat a.txt' })
    expect(listed).toMatchObject({ exitCode: 0, stdout: '/polar/session/workspace\na\n' })
    expect(await readFile(join(sessionDir, 'workspace', 'a.txt'), 'utf8')).toBe('a\n')
  })

  it('tees output to log files', async () => {
    const { runtime, sessionDir } = await startRuntime()
    const stdoutPath = join(sessionDir, 'logs', 'agent', 'step.00.stdout.log')
    const stderrPath = join(sessionDir, 'logs', 'agent', 'step.00.stderr.log')
    await runtime.exec({ command: 'seq 1 3; echo warn >&2', stdoutPath, stderrPath })
    expect(await readFile(stdoutPath, 'utf8')).toBe('1\n2\n3\n')
    expect(await readFile(stderrPath, 'utf8')).toBe('warn\n')
  })

  it('uploads and downloads files and directories, refusing read-only paths and symlink escapes', async () => {
    const { runtime, sessionDir } = await startRuntime({ backend: 'local', workdir: '/work/repo' })
    const source = join(base, 'upload-src')
    await mkdir(join(source, 'pkg'), { recursive: true })
    await writeFile(join(source, 'pkg', 'a.py'), 'print("a")\n')
    await writeFile(join(source, 'single.txt'), 'single\n')
    await runtime.upload(source, '/work/repo')
    await runtime.upload(join(source, 'single.txt'), '/root/config/single.txt')
    await runtime.upload(join(source, 'single.txt'), '/polar/session/artifacts/in.txt')
    const listed = await runtime.exec({
      command: 'python3 pkg/a.py; cat /root/config/single.txt; cat /polar/session/artifacts/in.txt; echo made > /work/repo/out.txt',
    })
    expect(listed.stdout).toBe('a\nsingle\nsingle\n')
    expect(await readFile(join(sessionDir, 'artifacts', 'in.txt'), 'utf8')).toBe('single\n')

    const out = join(base, 'download-out')
    await runtime.download('/work/repo', join(out, 'repo'))
    await runtime.download('/work/repo/out.txt', join(out, 'out.txt'))
    await runtime.download('/etc/hostname', join(out, 'hostname'))
    expect(await readFile(join(out, 'repo', 'pkg', 'a.py'), 'utf8')).toBe('print("a")\n')
    expect(await readFile(join(out, 'out.txt'), 'utf8')).toBe('made\n')
    expect(existsSync(join(out, 'hostname'))).toBe(true)

    await expect(runtime.upload(join(source, 'single.txt'), '/usr/evil.txt')).rejects.toThrow(/not writable/)
    await expect(runtime.upload(join(source, 'single.txt'), '/proc/evil')).rejects.toThrow(/not a file path/)
    // anywhere else is the session's private root, as in a container (Harbor's /tests, /logs/verifier)
    await runtime.upload(source, '/tests')
    await runtime.exec({ command: 'mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt' })
    const harbor = await runtime.exec({ command: 'cat /tests/single.txt /logs/verifier/reward.txt' })
    expect(harbor.stdout).toBe('single\n1\n')
    await runtime.download('/logs/verifier/reward.txt', join(out, 'reward.txt'))
    expect(await readFile(join(out, 'reward.txt'), 'utf8')).toBe('1\n')
    // a symlink planted inside must not lead host-side copies out of the sandbox
    await runtime.exec({ command: 'ln -s /etc /root/escape && ln -s /etc /polar/session/escape && rm /bin && mkdir /bin' })
    await expect(runtime.upload(join(source, 'single.txt'), '/root/escape/evil.txt')).rejects.toThrow(/outside the sandbox/)
    await expect(runtime.download('/polar/session/escape/passwd', join(out, 'passwd'))).rejects.toThrow(/outside the sandbox/)
    expect(existsSync('/etc/evil.txt')).toBe(false)
    expect(existsSync(join(out, 'passwd'))).toBe(false)
    // a replaced /bin symlink is put back before the next exec
    expect((await runtime.exec({ command: 'ls /bin/sh' })).exitCode).toBe(0)
  })
})

describe('local runtime: limits and lifecycle', () => {
  it('times out a command, killing what it started', async () => {
    const { runtime } = await startRuntime()
    const marker = `rollgate-timeout-${process.pid}-${Date.now()}`
    const startedAt = Date.now()
    const result = await runtime.exec({ command: `bash -c 'exec -a ${marker} sleep 300' & sleep 300`, timeoutMs: 500 })
    expect(result).toMatchObject({ exitCode: -1, timedOut: true, cancelled: false })
    expect(Date.now() - startedAt).toBeLessThan(20_000)
    expect(processesWith(marker)).toEqual([])
  })

  it('cancel mid-exec kills the whole process tree', async () => {
    const { runtime } = await startRuntime()
    const marker = `rollgate-cancel-${process.pid}-${Date.now()}`
    const controller = new AbortController()
    const running = runtime.exec({
      command: `(bash -c 'exec -a ${marker} sleep 300' &) ; setsid bash -c 'exec -a ${marker}-setsid sleep 300' & curl -sS -m 5 "$EDGE/started-${marker}"; wait`,
      env: { EDGE: runtime.edgeUrlInside },
      signal: controller.signal,
    })
    await Promise.race([
      edge.waitFor(`/started-${marker}`),
      running.then((result) => Promise.reject(new Error(`exec ended early: ${JSON.stringify(result)}`))),
    ])
    expect(processesWith(marker).length).toBeGreaterThanOrEqual(2)
    controller.abort()
    const result = await running
    expect(result).toMatchObject({ exitCode: -1, cancelled: true, timedOut: false })
    expect(processesWith(marker)).toEqual([])
  })

  it('limits memory', async () => {
    const { runtime } = await startRuntime({ backend: 'local', memory_mb: 64 })
    const small = await runtime.exec({ command: 'python3 -c "a = bytearray(8 * 1024 * 1024); print(len(a))"' })
    expect(small.stdout.trim()).toBe(String(8 * 1024 * 1024))
    const big = await runtime.exec({
      command: "python3 -c \"a = bytearray(512 * 1024 * 1024); a[::4096] = b'x' * len(a[::4096]); print('survived')\"",
    })
    expect(big.exitCode).not.toBe(0)
    expect(big.stdout).not.toContain('survived')
  })

  it('stop is idempotent, ends running work and removes the private dirs; exec after stop fails', async () => {
    const { runtime } = await startRuntime()
    const stateDir = (runtime as unknown as { stateDir: string }).stateDir
    expect(existsSync(stateDir)).toBe(true)
    const running = runtime.exec({ command: 'sleep 300' })
    await Promise.all([runtime.stop(), runtime.stop()])
    expect((await running).exitCode).not.toBe(0)
    await runtime.stop()
    await runtime.cancel()
    expect(existsSync(stateDir)).toBe(false)
    await expect(runtime.exec({ command: 'true' })).rejects.toThrow(/stopped/)
  })

  it('cancel during start leaves nothing behind', async () => {
    const sessionDir = join(base, 'cancel-start')
    const runtime = createRuntime(null, { sessionId: 'rs_cancel_start', sessionDir, edgeUrl: `http://127.0.0.1:${edge.port}` })
    const starting = runtime.start()
    await runtime.cancel()
    await starting.catch(() => {})
    const stateDir = (runtime as unknown as { stateDir: string | null }).stateDir
    if (stateDir) expect(existsSync(stateDir)).toBe(false)
    await expect(runtime.exec({ command: 'true' })).rejects.toThrow()
  })

  it('rejects what it cannot do', () => {
    const context = { sessionId: 'x', sessionDir: base, edgeUrl: 'http://127.0.0.1:1' }
    expect(() => createRuntime(runtimeSpecSchema.parse({ backend: 'local', gpus: 1 }), context)).toThrow(/GPU/)
    expect(() => createRuntime(runtimeSpecSchema.parse({ backend: 'local', storage_mb: 10 }), context)).toThrow(/storage/)
    expect(() => createRuntime(runtimeSpecSchema.parse({ backend: 'local', workdir: '/usr/src' }), context)).toThrow(/read-only/)
    expect(() => createRuntime(runtimeSpecSchema.parse({ backend: 'local', workdir: '/proc/x' }), context)).toThrow(/not a file path/)
    expect(() => runtimeSpecSchema.parse({ backend: 'docker' })).toThrow(/image is required/)
  })
})
