/**
 * @module
 * `npm run build:images`: build the runner's images offline (no registry; Debian packages come from the
 * apt mirror through debootstrap, harness CLIs from the host's install cache).
 *
 * 1. `rollgate/debian-base:bookworm`: `debootstrap --variant=minbase` (bash, ca-certificates, curl, git,
 *    python3, python3-pytest, procps, patch, bubblewrap), cached under `--out`, then `docker import`.
 * 2. `rollgate/harness-base:<version>` (`runner/docker/harness-base.Dockerfile`): + Node 22 (the runner's own binary) and
 *    the pinned CLIs of `runner/harness/*.ts` (`--harnesses all|none|name,…`), each on PATH.
 * 3. `rollgate/runner:<version>` (`runner/docker/runner.Dockerfile`): + the runner code with production dependencies.
 *
 * Uses `DOCKER_HOST` / `/var/run/docker.sock` when a daemon answers there, else starts a private one (no
 * bridge, no iptables) for the build and saves the images as `docker load` tarballs under `--out`. Each
 * image is smoke-tested with `--network none`. Last stdout line: one JSON summary.
 */
import { spawn } from 'node:child_process'
import { existsSync, readFileSync, realpathSync } from 'node:fs'
import { cp, mkdir, rename, rm, symlink, writeFile } from 'node:fs/promises'
import { join, resolve } from 'node:path'
import { PassThrough } from 'node:stream'
import { parseArgs } from './lib/cli-args.ts'
import Dockerode from 'dockerode'
import { HARNESSES } from '../runner/harness/index.ts'
import { installHarness } from '../runner/harness/install.ts'
import { dockerSocketPath } from '../runner/runtime/docker/docker-runtime.ts'
import { startDockerd, type TestDockerd } from './lib/dockerd.ts'

const REPO = resolve(import.meta.dirname, '..')
const DOCKERFILES = join(REPO, 'runner/docker')
const BASE_TAG = 'rollgate/debian-base:bookworm'
const PACKAGES = ['bash', 'ca-certificates', 'curl', 'git', 'python3', 'python3-pytest', 'procps', 'patch', 'bubblewrap']
const MIRROR = 'http://deb.debian.org/debian'

const { values } = parseArgs({
  options: {
    out: { type: 'string', default: join(REPO, '.cache/images') },
    harnesses: { type: 'string', default: 'all' },
    version: { type: 'string' },
    'skip-runner': { type: 'boolean', default: false },
    'skip-harness': { type: 'boolean', default: false },
    save: { type: 'boolean' },
  },
})

const out = resolve(values.out!)
const version = values.version ?? (JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as { version: string }).version
const log = (line: string) => process.stderr.write(`build-images: ${line}\n`)

function run(command: string, args: string[], options: { cwd?: string } = {}): Promise<void> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(command, args, { cwd: options.cwd, stdio: ['ignore', 'inherit', 'inherit'] })
    child.on('error', reject)
    child.on('close', (code) => (code === 0 ? resolvePromise() : reject(new Error(`${command} ${args.join(' ')} exited ${code}`))))
  })
}

/** A tar stream of `dir` made by the system tar (device nodes, hard links and symlinks kept). */
function tarOf(dir: string): NodeJS.ReadableStream {
  const child = spawn('tar', ['-C', dir, '-c', '.'], { stdio: ['ignore', 'pipe', 'inherit'] })
  return child.stdout
}

async function follow(docker: Dockerode, stream: NodeJS.ReadableStream): Promise<void> {
  await new Promise<void>((resolvePromise, reject) =>
    docker.modem.followProgress(
      stream,
      (error: Error | null, events: Array<{ error?: string; errorDetail?: { message?: string } }>) => {
        const failed = events?.find((event) => event.error || event.errorDetail)
        if (error || failed) reject(error ?? new Error(failed?.errorDetail?.message ?? failed?.error))
        else resolvePromise()
      },
      (event: { stream?: string }) => {
        if (event.stream?.trim()) log(event.stream.trim())
      },
    ),
  )
}

async function rootfs(): Promise<string> {
  const dir = join(out, 'rootfs-bookworm')
  if (existsSync(join(dir, '.rollgate-complete'))) {
    log(`reusing ${dir}`)
    return dir
  }
  const staging = `${dir}.tmp`
  await rm(staging, { recursive: true, force: true })
  log(`debootstrap bookworm → ${staging}`)
  await run('debootstrap', ['--variant=minbase', `--include=${PACKAGES.join(',')}`, 'bookworm', staging, MIRROR])
  await run('sh', ['-c', `rm -rf "${staging}"/var/cache/apt/archives/*.deb "${staging}"/var/lib/apt/lists/*`])
  await rm(dir, { recursive: true, force: true })
  await rename(staging, dir)
  await writeFile(join(dir, '.rollgate-complete'), new Date().toISOString())
  return dir
}

async function connect(): Promise<{ docker: Dockerode; daemon: TestDockerd | null }> {
  const docker = new Dockerode({ socketPath: dockerSocketPath() })
  try {
    await docker.ping()
    log(`using the daemon at ${dockerSocketPath()}`)
    return { docker, daemon: null }
  } catch {
    log('no Docker daemon answers: starting a private one for this build')
    const daemon = await startDockerd()
    return { docker: daemon.docker, daemon }
  }
}

async function imageExists(docker: Dockerode, tag: string): Promise<boolean> {
  try {
    await docker.getImage(tag).inspect()
    return true
  } catch {
    return false
  }
}

async function build(docker: Dockerode, context: string, tag: string): Promise<void> {
  log(`docker build ${tag}`)
  const stream = await docker.buildImage(tarOf(context), {
    t: tag,
    dockerfile: 'Dockerfile',
    buildargs: { BASE: BASE_TAG },
    networkmode: 'none',
    rm: true,
  })
  await follow(docker, stream)
}

/** Run `cmd` in `image` with no network; returns its output, throws on a non-zero exit. */
async function smoke(docker: Dockerode, image: string, cmd: string[], entrypoint?: string[]): Promise<string> {
  const output = new PassThrough()
  let text = ''
  output.on('data', (chunk: Buffer) => {
    text += chunk.toString()
  })
  const [result, container] = (await docker.run(image, cmd, output, {
    ...(entrypoint ? { Entrypoint: entrypoint } : {}),
    HostConfig: { NetworkMode: 'none' },
  })) as [{ StatusCode: number }, Dockerode.Container]
  await container.remove({ force: true })
  if (result.StatusCode !== 0) throw new Error(`smoke test of ${image} (${cmd.join(' ')}) exited ${result.StatusCode}: ${text}`)
  return text
}

async function stageHarnessBase(names: string[]): Promise<{ context: string; bins: string[] }> {
  const context = join(out, 'context-harness-base')
  await rm(context, { recursive: true, force: true })
  await mkdir(join(context, 'harnesses'), { recursive: true })
  await mkdir(join(context, 'bin'), { recursive: true })
  await cp(realpathSync(process.execPath), join(context, 'node'))
  await cp(join(DOCKERFILES, 'harness-base.Dockerfile'), join(context, 'Dockerfile'))
  const bins: string[] = []
  for (const name of names) {
    const harness = HARNESSES[name]
    if (!harness) throw new Error(`unknown harness ${name} (known: ${Object.keys(HARNESSES).join(', ')})`)
    if (!harness.pkg) continue
    // a prefix of its own (never the repo's devDependency copy, whose root is the whole repository)
    const installed = await installHarness(harness.pkg, { log, useDevDependency: false })
    const folder = `${harness.pkg.name.replace('/', '__')}@${harness.pkg.version}`
    log(`staging ${harness.pkg.name}@${harness.pkg.version} from ${installed.root}`)
    // hard links when the cache is on the same file system, else a copy
    await run('sh', ['-c', 'cp -al "$1" "$2" 2>/dev/null || cp -a "$1" "$2"', 'sh', installed.root, join(context, 'harnesses', folder)])
    await symlink(`/opt/rollgate/harnesses/${folder}/node_modules/.bin/${harness.pkg.bin}`, join(context, 'bin', harness.pkg.bin))
    bins.push(harness.pkg.bin)
  }
  return { context, bins }
}

async function stageRunner(): Promise<string> {
  const context = join(out, 'context-runner')
  await rm(context, { recursive: true, force: true })
  const app = join(context, 'app')
  await mkdir(app, { recursive: true })
  await cp(realpathSync(process.execPath), join(context, 'node'))
  await cp(join(DOCKERFILES, 'runner.Dockerfile'), join(context, 'Dockerfile'))
  for (const entry of ['package.json', 'package-lock.json', 'cli', 'runner', 'src']) {
    await cp(join(REPO, entry), join(app, entry), { recursive: true, filter: (source) => !source.includes('/.cache/') })
  }
  log('npm install --omit=dev (runner production dependencies)')
  await run('npm', ['install', '--omit=dev', '--ignore-scripts', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: app })
  return context
}

async function save(docker: Dockerode, tag: string): Promise<string> {
  const file = join(out, `${tag.replace(/[/:]/g, '_')}.tar`)
  const stream = await docker.getImage(tag).get()
  const { createWriteStream } = await import('node:fs')
  const { pipeline } = await import('node:stream/promises')
  await pipeline(stream, createWriteStream(file))
  return file
}

async function main(): Promise<void> {
  const startedAt = Date.now()
  await mkdir(out, { recursive: true })
  const root = await rootfs()
  const { docker, daemon } = await connect()
  const summary: Record<string, unknown> = { version, images: [] as string[], saved: [] as string[] }
  try {
    if (!(await imageExists(docker, BASE_TAG))) {
      log(`docker import ${root} → ${BASE_TAG}`)
      await follow(docker, await docker.importImage(tarOf(root), { repo: BASE_TAG.split(':')[0], tag: BASE_TAG.split(':')[1] } as object))
    }
    ;(summary.images as string[]).push(BASE_TAG)
    const checks: Record<string, string> = {}
    checks.base = (await smoke(docker, BASE_TAG, ['sh', '-c', 'git --version && python3 -m pytest --version && bwrap --version'])).trim()
    if (!values['skip-harness']) {
      const names = values.harnesses === 'all' ? Object.keys(HARNESSES) : values.harnesses === 'none' ? [] : values.harnesses!.split(',')
      const { context, bins } = await stageHarnessBase(names)
      const tag = `rollgate/harness-base:${version}`
      await build(docker, context, tag)
      const probe = ['node --version', 'git --version', 'python3 -m pytest --version', ...bins.map((bin) => `${bin} --version`)].join(
        ' && ',
      )
      checks.harness = (await smoke(docker, tag, ['bash', '-lc', probe])).trim()
      ;(summary.images as string[]).push(tag)
      summary.harnesses = bins
      await rm(context, { recursive: true, force: true })
    }
    if (!values['skip-runner']) {
      const context = await stageRunner()
      const tag = `rollgate/runner:${version}`
      await build(docker, context, tag)
      checks.runner = (await smoke(docker, tag, ['runner', '--help'])).split('\n')[0] ?? ''
      ;(summary.images as string[]).push(tag)
      await rm(context, { recursive: true, force: true })
    }
    summary.checks = checks
    if (values.save ?? daemon !== null) {
      for (const tag of summary.images as string[]) (summary.saved as string[]).push(await save(docker, tag))
    }
  } finally {
    await daemon?.stop()
  }
  summary.seconds = Math.round((Date.now() - startedAt) / 1000)
  process.stdout.write(`${JSON.stringify(summary)}\n`)
}

main().catch((error: unknown) => {
  process.stderr.write(`build-images: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`)
  process.exit(1)
})
