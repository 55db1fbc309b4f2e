/**
 * The apptainer backend's CLI argv (no Apptainer binary exists here, so the argv is what is tested) and
 * the runtime registry's backend selection.
 */
import { describe, expect, it } from 'vitest'
import { runtimeSpecSchema } from '../../../src/contract/rollout.ts'
import { ApptainerRuntime } from '../../../runner/runtime/apptainer/apptainer-runtime.ts'
import {
  APPTAINER_HOME,
  execArgv,
  instanceName,
  instanceStartArgv,
  instanceStopArgv,
  killArgv,
  relayArgv,
  tarArgv,
  untarArgv,
} from '../../../runner/runtime/apptainer/argv.ts'
import { DockerRuntime } from '../../../runner/runtime/docker/docker-runtime.ts'
import { createRuntime, defaultRuntimeSpec, parseRuntimeBackend } from '../../../runner/runtime/index.ts'
import { LocalRuntime } from '../../../runner/runtime/local/local-runtime.ts'
import { HELPER_LAUNCHER, HELPER_LIB_DIR, HELPER_LOADER, HELPER_NODE } from '../../../runner/runtime/sandbox/host-node.ts'

const HELPER = [HELPER_LOADER, '--library-path', HELPER_LIB_DIR, HELPER_NODE, HELPER_LAUNCHER]

describe('apptainer argv', () => {
  it('names instances like Polar: a readable prefix of the session id plus a hash', () => {
    const name = instanceName('rs_0123456789abcdef0123456789abcdef/weird id')
    expect(name).toMatch(/^rollgate-rs_0123456789abcdef0123456789a-[0-9a-f]{8}$/)
    expect(instanceName('a')).not.toBe(instanceName('b'))
    expect(instanceName('same')).toBe(instanceName('same'))
  })

  it('starts an instance with overlay, binds, an isolated network and limits', () => {
    const argv = instanceStartArgv({
      image: 'docker-daemon:rollgate/harness-base:1',
      name: 'rollgate-x-12345678',
      sessionDir: '/srv/sessions/x',
      overlayDir: '/srv/sessions/x/overlay',
      controlDir: '/tmp/rgapp-1/ctl',
      homeDir: '/tmp/rgapp-1/home',
      helperMounts: [
        { source: '/opt/node/bin/node', target: HELPER_NODE },
        { source: '/usr/lib/x86_64-linux-gnu/libc.so.6', target: `${HELPER_LIB_DIR}/libc.so.6` },
      ],
      readOnlyBinds: [{ source: '/opt/harnesses', target: '/opt/harnesses' }],
      network: 'none',
      gpus: 2,
      memoryMb: 2048,
      cpus: 4,
      pidsLimit: 512,
    })
    expect(argv).toEqual([
      'instance',
      'start',
      '--containall',
      '--overlay',
      '/srv/sessions/x/overlay',
      '--nv',
      '--net',
      '--network',
      'none',
      '--memory',
      '2048M',
      '--cpus',
      '4',
      '--pids-limit',
      '512',
      '--bind',
      '/srv/sessions/x:/polar/session',
      '--bind',
      `/tmp/rgapp-1/home:${APPTAINER_HOME}`,
      '--bind',
      '/tmp/rgapp-1/ctl:/run/rollgate/ctl',
      '--bind',
      `/opt/node/bin/node:${HELPER_NODE}:ro`,
      '--bind',
      `/usr/lib/x86_64-linux-gnu/libc.so.6:${HELPER_LIB_DIR}/libc.so.6:ro`,
      '--bind',
      '/opt/harnesses:/opt/harnesses:ro',
      'docker-daemon:rollgate/harness-base:1',
      'rollgate-x-12345678',
    ])
  })

  it('keeps the host network and sets no limits when asked for none', () => {
    const argv = instanceStartArgv({
      image: '/images/task.sif',
      name: 'n',
      sessionDir: '/s',
      overlayDir: '/s/overlay',
      controlDir: '/c',
      homeDir: '/h',
      helperMounts: [],
      readOnlyBinds: [],
      network: 'host',
      gpus: 0,
      memoryMb: null,
      cpus: null,
      pidsLimit: null,
    })
    expect(argv).not.toContain('--net')
    expect(argv).not.toContain('--nv')
    expect(argv).not.toContain('--memory')
    expect(argv.slice(-2)).toEqual(['/images/task.sif', 'n'])
  })

  it('execs with env (HOME and PATH exported, overridable), cwd and the launcher in its own process group', () => {
    const argv = execArgv({
      name: 'n',
      cwd: '/testbed',
      env: { OPENAI_BASE_URL: 'http://127.0.0.1:8787/v1', PATH: '/opt/bin:/usr/bin', TRICKY: "a b'c$d" },
      command: 'echo "$OPENAI_BASE_URL" && pytest -q',
      pidfile: '/run/rollgate/ctl/exec-1.pid',
    })
    expect(argv).toEqual([
      'exec',
      '--pwd',
      '/testbed',
      'instance://n',
      'env',
      `HOME=${APPTAINER_HOME}`,
      'PATH=/opt/bin:/usr/bin',
      'OPENAI_BASE_URL=http://127.0.0.1:8787/v1',
      "TRICKY=a b'c$d",
      ...HELPER,
      'run',
      '--pidfile',
      '/run/rollgate/ctl/exec-1.pid',
      '--',
      'echo "$OPENAI_BASE_URL" && pytest -q',
    ])
    expect(() => execArgv({ name: 'n', cwd: '/', env: { 'BAD NAME': 'x' }, command: 'true', pidfile: '/p' })).toThrow(/invalid environment/)
  })

  it('relays the edge port, kills by pidfile, moves files with tar and stops the instance', () => {
    expect(relayArgv('n', 8787)).toEqual([
      'exec',
      'instance://n',
      ...HELPER,
      'serve',
      '--port',
      '8787',
      '--socket',
      '/run/rollgate/ctl/edge.sock',
      '--ready',
      '/run/rollgate/ctl/ready',
    ])
    expect(killArgv('n', '/run/rollgate/ctl/exec-1.pid')).toEqual([
      'exec',
      'instance://n',
      ...HELPER,
      'kill',
      '/run/rollgate/ctl/exec-1.pid',
    ])
    expect(untarArgv('n', '/work/repo')).toEqual([
      'exec',
      'instance://n',
      'sh',
      '-c',
      'mkdir -p "$1" && exec tar -x -f - -C "$1"',
      'sh',
      '/work/repo',
    ])
    expect(tarArgv('n', '/work', 'repo')).toEqual(['exec', 'instance://n', 'tar', '-c', '-f', '-', '-C', '/work', 'repo'])
    expect(instanceStopArgv('n')).toEqual(['instance', 'stop', 'n'])
  })

  it('reads the binary from ROLLGATE_APPTAINER_BIN / POLAR_APPTAINER_BIN and needs an image', () => {
    const context = { sessionId: 'rs_1', sessionDir: '/tmp/x', edgeUrl: 'http://127.0.0.1:8787/base/' }
    const runtime = new ApptainerRuntime(runtimeSpecSchema.parse({ backend: 'apptainer', image: 'x.sif' }), context, {
      bin: '/opt/apptainer/bin/apptainer',
    })
    expect(runtime.edgeUrlInside).toBe('http://127.0.0.1:8787/base')
    expect(runtime.homeDir).toBe(APPTAINER_HOME)
    expect(() => runtimeSpecSchema.parse({ backend: 'apptainer' })).toThrow(/image is required/)
  })
})

describe('runtime registry', () => {
  const context = { sessionId: 'rs_1', sessionDir: '/tmp/x', edgeUrl: 'http://127.0.0.1:8787' }

  it('runs a task without runtime on the runner default, and a named backend on that backend', () => {
    expect(createRuntime(null, context, { defaultBackend: 'local' })).toBeInstanceOf(LocalRuntime)
    expect(createRuntime(null, context, { defaultBackend: 'docker', defaultImage: 'img:1' })).toBeInstanceOf(DockerRuntime)
    expect(createRuntime(null, context, { defaultBackend: 'apptainer', defaultImage: 'x.sif' })).toBeInstanceOf(ApptainerRuntime)
    expect(createRuntime(runtimeSpecSchema.parse({ image: 'img:1' }), context, { defaultBackend: 'local' })).toBeInstanceOf(DockerRuntime)
    expect(createRuntime(runtimeSpecSchema.parse({ backend: 'local' }), context, { defaultBackend: 'docker' })).toBeInstanceOf(LocalRuntime)
  })

  it('explains what is missing', () => {
    expect(() => defaultRuntimeSpec({ defaultBackend: 'docker' })).toThrow(/needs an image/)
    expect(() => parseRuntimeBackend('podman')).toThrow(/expected docker, apptainer, local/)
    expect(() => createRuntime(runtimeSpecSchema.parse({ backend: 'local', import_path: 'my.mod:Runtime' }), context)).toThrow(
      /import_path/,
    )
  })
})
