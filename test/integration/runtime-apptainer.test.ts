/**
 * The apptainer backend's process flow against a stand-in `apptainer` CLI (`test/support/fake-apptainer.mjs`:
 * no Apptainer binary exists here; the fake runs each `exec` under bubblewrap with the instance's binds over
 * a shared root, host network only): instance start, exec env/cwd and exit codes, files shared between execs,
 * uploads/downloads as tar streams through `exec … tar` (and host copies under the session mount), time
 * limit and cancel killing the exec's process group through the launcher's pidfile, stop idempotence and
 * `instance stop`. The argv itself is unit-tested (`test/unit/runner/runtime-apptainer.test.ts`).
 */
import { existsSync, readFileSync } from 'node:fs'
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { ApptainerRuntime } from '../../runner/runtime/apptainer/apptainer-runtime.ts'
import { runtimeSpecSchema } from '../../src/contract/rollout.ts'

const FAKE = fileURLToPath(new URL('../support/fake-apptainer.mjs', import.meta.url))

let base: string
let state: string
const runtimes: ApptainerRuntime[] = []

beforeAll(async () => {
  base = await mkdtemp(join(tmpdir(), 'rollgate-apptainer-test-'))
  state = join(base, 'fake-state')
  await mkdir(state)
  process.env.FAKE_APPTAINER_STATE = state
})

afterEach(async () => {
  await Promise.all(runtimes.splice(0).map((runtime) => runtime.cancel()))
})

afterAll(async () => {
  delete process.env.FAKE_APPTAINER_STATE
  if (base) await rm(base, { recursive: true, force: true })
})

let counter = 0
async function startRuntime(spec: Record<string, unknown> = {}) {
  const sessionDir = join(base, `session-${++counter}`)
  await mkdir(sessionDir, { recursive: true })
  const runtime = new ApptainerRuntime(
    runtimeSpecSchema.parse({ backend: 'apptainer', image: 'docker-daemon:rollgate/test:1', ...spec }),
    { sessionId: `rs_apptainer_${counter}`, sessionDir, edgeUrl: 'http://127.0.0.1:9/edge' },
    { bin: FAKE, network: 'host', stateDir: base },
  )
  runtimes.push(runtime)
  await runtime.start()
  return { runtime, sessionDir }
}

function calls(): string[][] {
  return readFileSync(join(state, 'calls.log'), 'utf8')
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as string[])
}

/** Whether the process whose pid (in the instance) a command left in `/polar/session/bg.pid` still runs. */
async function backgroundAlive(runtime: ApptainerRuntime): Promise<boolean> {
  const probe = await runtime.exec({
    command:
      'p=$(cat /polar/session/bg.pid); if [ -e /proc/$p ] && ! grep -q "^State:.*Z" /proc/$p/status; then echo alive; else echo gone; fi',
  })
  return probe.stdout.trim() === 'alive'
}

describe('apptainer runtime (stand-in CLI)', () => {
  it('runs commands with env and cwd (default: the work dir), sharing files between execs', async () => {
    const { runtime, sessionDir } = await startRuntime({ workdir: '/work/repo' })
    expect(runtime.edgeUrlInside).toBe('http://127.0.0.1:9/edge')
    expect(runtime.homeDir).toBe('/polar/home')
    const first = await runtime.exec({ command: 'pwd; echo "$GREETING $HOME"; echo kept > here.txt', env: { GREETING: 'hello world' } })
    expect(first).toMatchObject({ exitCode: 0, stdout: '/work/repo\nhello world /polar/home\n', timedOut: false, cancelled: false })
    const second = await runtime.exec({
      command: 'pwd; cat /work/repo/here.txt; echo s > s.txt; echo "[$GREETING]"',
      cwd: '/polar/session',
    })
    expect(second.stdout).toBe('/polar/session\nkept\n[]\n')
    expect(await readFile(join(sessionDir, 's.txt'), 'utf8')).toBe('s\n')
    const failing = await runtime.exec({ command: 'echo out; echo err >&2; exit 4' })
    expect(failing).toMatchObject({ exitCode: 4, stdout: 'out\n', stderr: 'err\n', timedOut: false, cancelled: false })
    expect(calls().filter((argv) => argv[0] === 'instance' && argv[1] === 'start')).toHaveLength(1)
  })

  it('uploads and downloads files and directories (tar through exec outside the session mount)', async () => {
    const { runtime, sessionDir } = await startRuntime()
    const source = join(base, 'upload')
    await mkdir(join(source, 'pkg'), { recursive: true })
    await writeFile(join(source, 'pkg', 'a.txt'), 'alpha\n')
    await writeFile(join(source, 'single.txt'), 'single\n')
    const before = calls().length
    await runtime.upload(source, '/work/repo')
    await runtime.upload(join(source, 'single.txt'), '/srv/conf/config.txt')
    await runtime.upload(join(source, 'single.txt'), '/polar/session/artifacts/in.txt')
    expect(
      calls()
        .slice(before)
        .filter((argv) => argv.includes('tar') || argv.some((word) => word.includes('tar -x'))),
    ).toHaveLength(2)
    const listed = await runtime.exec({
      command: 'cat /work/repo/pkg/a.txt /work/repo/single.txt /srv/conf/config.txt; echo made > /work/repo/out.txt',
    })
    expect(listed.stdout).toBe('alpha\nsingle\nsingle\n')
    expect(await readFile(join(sessionDir, 'artifacts', 'in.txt'), 'utf8')).toBe('single\n')
    const out = join(base, 'download')
    await runtime.download('/work/repo', join(out, 'copy'))
    await runtime.download('/work/repo/out.txt', join(out, 'out.txt'))
    await runtime.download('/polar/session/artifacts/in.txt', join(out, 'in.txt'))
    expect(await readFile(join(out, 'copy', 'pkg', 'a.txt'), 'utf8')).toBe('alpha\n')
    expect(await readFile(join(out, 'copy', 'out.txt'), 'utf8')).toBe('made\n')
    expect(await readFile(join(out, 'out.txt'), 'utf8')).toBe('made\n')
    expect(await readFile(join(out, 'in.txt'), 'utf8')).toBe('single\n')
    await expect(runtime.download('/no/such/file', join(out, 'missing'))).rejects.toThrow(/download of \/no\/such\/file failed/)
  })

  it('times out a command and kills its process group', async () => {
    const { runtime } = await startRuntime()
    const result = await runtime.exec({ command: 'sleep 300 & echo $! > /polar/session/bg.pid; sleep 299', timeoutMs: 1_000 })
    expect(result).toMatchObject({ exitCode: -1, timedOut: true, cancelled: false })
    expect(await backgroundAlive(runtime)).toBe(false)
    expect(calls().some((argv) => argv.includes('kill'))).toBe(true)
  })

  it('cancel mid-exec kills the running command tree', async () => {
    const { runtime, sessionDir } = await startRuntime()
    const controller = new AbortController()
    const started = join(sessionDir, 'started')
    const running = runtime.exec({
      command: 'sleep 298 & echo $! > /polar/session/bg.pid; touch /polar/session/started; wait',
      signal: controller.signal,
    })
    while (!existsSync(started)) {
      const early = await Promise.race([running, new Promise<null>((resolve) => setTimeout(() => resolve(null), 50))])
      if (early) throw new Error(`exec ended early: ${JSON.stringify(early)}`)
    }
    expect(await backgroundAlive(runtime)).toBe(true)
    controller.abort()
    expect(await running).toMatchObject({ exitCode: -1, cancelled: true, timedOut: false })
    expect(await backgroundAlive(runtime)).toBe(false)
  })

  it('stop is idempotent, stops the instance once and ends running work; exec after stop fails', async () => {
    const { runtime } = await startRuntime()
    const running = runtime.exec({ command: 'sleep 300' })
    await Promise.all([runtime.stop(), runtime.stop()])
    expect((await running).exitCode).not.toBe(0)
    await runtime.cancel()
    expect(calls().filter((argv) => argv[0] === 'instance' && argv[1] === 'stop' && argv[2] === runtime.name)).toHaveLength(1)
    expect(existsSync(join(state, `${runtime.name}.json`))).toBe(false)
    await expect(runtime.exec({ command: 'true' })).rejects.toThrow(/stopped/)
    await expect(runtime.upload(base, '/x')).rejects.toThrow(/stopped/)
  })
})
