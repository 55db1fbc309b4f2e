/**
 * The docker runtime against a real daemon (a private dockerd started by the test: no bridge, no
 * iptables) and an offline busybox image (no bash, no node: the runtime brings its own helper):
 * create, forwarded edge port as the only way out, exec env/cwd, upload/download, limits visible inside,
 * time limit and cancel mid-exec (the exec's process group dies), stop idempotence, host network mode.
 * If dockerd cannot start, the suite fails with the reason (it never skips).
 */
import { existsSync } from 'node:fs'
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { createServer, type IncomingMessage, type Server } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { runtimeSpecSchema } from '../../src/contract/rollout.ts'
import type { DockerRuntimeOptions } from '../../runner/runtime/docker/docker-runtime.ts'
import { createRuntime } from '../../runner/runtime/index.ts'
import type { Runtime } from '../../runner/runtime/runtime.ts'
import { importBusyboxImage, startDockerd, type TestDockerd } from '../support/dockerd.ts'

interface StandIn {
  server: Server
  port: number
  requests: IncomingMessage[]
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
  return {
    server,
    port: (server.address() as { port: number }).port,
    requests,
    waitFor(path) {
      const seen = requests.find((request) => request.url === path)
      return seen ? Promise.resolve(seen) : new Promise((resolve) => waiters.push({ path, resolve }))
    },
  }
}

let daemon: TestDockerd
let image: string
let edge: StandIn
let other: StandIn
let base: string
const runtimes: Runtime[] = []

beforeAll(async () => {
  daemon = await startDockerd()
  image = await importBusyboxImage(daemon.docker)
  edge = await standIn('edge')
  other = await standIn('other')
  base = await mkdtemp(join(tmpdir(), 'rollgate-docker-test-'))
})

afterEach(async () => {
  await Promise.all(runtimes.splice(0).map((runtime) => runtime.cancel()))
})

afterAll(async () => {
  await Promise.all(runtimes.splice(0).map((runtime) => runtime.cancel()))
  await daemon?.stop()
  edge?.server.close()
  other?.server.close()
  if (base) await rm(base, { recursive: true, force: true })
})

let counter = 0
async function startRuntime(spec: Record<string, unknown> = {}, options: DockerRuntimeOptions = {}) {
  const sessionDir = join(base, `session-${++counter}`)
  await mkdir(sessionDir, { recursive: true })
  const runtime = createRuntime(
    runtimeSpecSchema.parse({ backend: 'docker', image, ...spec }),
    { sessionId: `rs_docker_${counter}`, sessionDir, edgeUrl: `http://127.0.0.1:${edge.port}` },
    { docker: { docker: daemon.docker, ...options } },
  )
  runtimes.push(runtime)
  await runtime.start()
  return { runtime, sessionDir, containerId: (runtime as unknown as { containerId: string }).containerId }
}

describe('docker runtime', () => {
  it('creates a labelled container with no network but the forwarded edge port', async () => {
    const { runtime, containerId } = await startRuntime()
    const info = await daemon.docker.getContainer(containerId).inspect()
    expect(info.HostConfig.NetworkMode).toBe('none')
    expect(info.Config.Labels['rollgate.session']).toMatch(/^rs_docker_/)
    expect(info.State.Running).toBe(true)
    const result = await runtime.exec({
      command: [
        'wget -qO- "$EDGE/forwarded"; echo " edge=$?"',
        `wget -qO- http://127.0.0.1:${other.port}/other 2>/dev/null; echo " loopback=$?"`,
        'wget -qO- http://192.0.2.1/outside 2>/dev/null; echo " outside=$?"',
        'ls /sys/class/net | tr "\\n" ,',
      ].join('; '),
      env: { EDGE: runtime.edgeUrlInside },
    })
    expect(result.exitCode).toBe(0)
    expect(result.stdout).toContain('edge GET /forwarded edge=0')
    expect(result.stdout).toMatch(/ loopback=[1-9]/)
    expect(result.stdout).toMatch(/ outside=[1-9]/)
    expect(result.stdout.trim().split('\n').at(-1)).toBe('lo,')
    expect(other.requests).toHaveLength(0)
  })

  it('runs commands with env and cwd (default: the session mount), sharing files between execs', async () => {
    const { runtime, sessionDir } = await startRuntime({ workdir: '/work/repo' })
    expect(runtime.workDir).toBe('/work/repo')
    const first = await runtime.exec({ command: 'pwd; echo "$GREETING"; echo kept > here.txt', env: { GREETING: 'hello world' } })
    expect(first).toMatchObject({ exitCode: 0, stdout: '/work/repo\nhello world\n' })
    const second = await runtime.exec({
      command: 'pwd; cat /work/repo/here.txt; echo s > s.txt; echo "[$GREETING]"',
      cwd: '/polar/session',
    })
    expect(second.stdout).toBe('/polar/session\nkept\n[]\n')
    expect(await readFile(join(sessionDir, 's.txt'), 'utf8')).toBe('s\n')
    const failing = await runtime.exec({ command: 'echo out; echo err >&2; exit 4' })
    expect(failing).toMatchObject({ exitCode: 4, stdout: 'out\n', stderr: 'err\n', timedOut: false, cancelled: false })
  })

  it('uploads and downloads files and directories in and out of the container', async () => {
    const { runtime, sessionDir } = await startRuntime()
    const source = join(base, 'docker-upload')
    await mkdir(join(source, 'pkg'), { recursive: true })
    await writeFile(join(source, 'pkg', 'a.txt'), 'alpha\n')
    await writeFile(join(source, 'single.txt'), 'single\n')
    await runtime.upload(source, '/work/repo')
    await runtime.upload(join(source, 'single.txt'), '/etc/rollgate/config.txt')
    await runtime.upload(join(source, 'single.txt'), '/polar/session/artifacts/in.txt')
    const listed = await runtime.exec({
      command: 'cat /work/repo/pkg/a.txt /work/repo/single.txt /etc/rollgate/config.txt; echo made > /work/repo/out.txt',
    })
    expect(listed.stdout).toBe('alpha\nsingle\nsingle\n')
    expect(await readFile(join(sessionDir, 'artifacts', 'in.txt'), 'utf8')).toBe('single\n')
    const out = join(base, 'docker-download')
    await runtime.download('/work/repo', join(out, 'copy'))
    await runtime.download('/work/repo/out.txt', join(out, 'out.txt'))
    await runtime.download('/polar/session/artifacts/in.txt', join(out, 'in.txt'))
    expect(await readFile(join(out, 'copy', 'pkg', 'a.txt'), 'utf8')).toBe('alpha\n')
    expect(await readFile(join(out, 'copy', 'out.txt'), 'utf8')).toBe('made\n')
    expect(await readFile(join(out, 'out.txt'), 'utf8')).toBe('made\n')
    expect(await readFile(join(out, 'in.txt'), 'utf8')).toBe('single\n')
    await expect(runtime.download('/no/such/file', join(out, 'missing'))).rejects.toThrow()
  })

  it('applies memory, cpu and pids limits (visible inside)', async () => {
    const { runtime } = await startRuntime({ memory_mb: 64, cpus: 1, kwargs: { pids_limit: 40 } })
    const result = await runtime.exec({
      command:
        'cat /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/cpu/cpu.cfs_quota_us /sys/fs/cgroup/cpu/cpu.cfs_period_us /sys/fs/cgroup/pids/pids.max',
    })
    expect(result.stdout.trim().split('\n')).toEqual([String(64 * 1024 * 1024), '100000', '100000', '40'])
  })

  it('times out a command and kills its process group', async () => {
    const { runtime } = await startRuntime()
    const result = await runtime.exec({ command: 'sleep 300 & sleep 299', timeoutMs: 500 })
    expect(result).toMatchObject({ exitCode: -1, timedOut: true })
    const left = await runtime.exec({ command: 'ps -o args | grep -c "^sleep 29[9]\\|^sleep 30[0]" || true' })
    expect(left.stdout.trim()).toBe('0')
  })

  it('cancel mid-exec kills the running command tree', async () => {
    const { runtime } = await startRuntime()
    const controller = new AbortController()
    const running = runtime.exec({
      command: 'sleep 298 & (sleep 297 &) ; wget -qO- "$EDGE/started-cancel"; wait',
      env: { EDGE: runtime.edgeUrlInside },
      signal: controller.signal,
    })
    // the command announces itself through the edge port; if it ends first, fail instead of waiting forever
    await Promise.race([
      edge.waitFor('/started-cancel'),
      running.then((result) => Promise.reject(new Error(`exec ended early: ${JSON.stringify(result)}`))),
    ])
    const before = await runtime.exec({ command: 'ps -o args | grep -c "^sleep 29[78]" || true' })
    expect(before.stdout.trim()).toBe('2')
    controller.abort()
    expect(await running).toMatchObject({ exitCode: -1, cancelled: true, timedOut: false })
    const after = await runtime.exec({ command: 'ps -o args | grep -c "^sleep 29[78]" || true' })
    expect(after.stdout.trim()).toBe('0')
  })

  it('stop is idempotent and removes the container; exec after stop fails', async () => {
    const { runtime, containerId } = await startRuntime()
    const running = runtime.exec({ command: 'sleep 300' })
    await Promise.all([runtime.stop(), runtime.stop()])
    expect((await running).exitCode).not.toBe(0)
    await runtime.cancel()
    await expect(daemon.docker.getContainer(containerId).inspect()).rejects.toMatchObject({ statusCode: 404 })
    await expect(runtime.exec({ command: 'true' })).rejects.toThrow(/stopped/)
    const controlDir = (runtime as unknown as { controlDir: string }).controlDir
    expect(existsSync(controlDir)).toBe(false)
  })

  it('uses the host network only when the runner says so', async () => {
    const { runtime, containerId } = await startRuntime({}, { network: 'host' })
    expect((await daemon.docker.getContainer(containerId).inspect()).HostConfig.NetworkMode).toBe('host')
    expect(runtime.edgeUrlInside).toBe(`http://127.0.0.1:${edge.port}`)
    const result = await runtime.exec({ command: `wget -qO- ${runtime.edgeUrlInside}/hostnet` })
    expect(result.stdout).toBe('edge GET /hostnet')
  })
})
