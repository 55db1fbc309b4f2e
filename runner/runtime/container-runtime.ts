/**
 * @module
 * What the container backends (docker, apptainer) share beyond the lifecycle: the spec checks, the
 * network mode (`none`: loopback plus the forwarded edge port; `host`: the edge URL as is), the process
 * limit, and copying in and out — a host-side copy under the session mount (plain host files), else a tar
 * stream through the backend's `putArchive` / `getArchive`.
 */
import { mkdir } from 'node:fs/promises'
import { dirname, posix } from 'node:path'
import type { Readable, Writable } from 'node:stream'
import type { RuntimeSpec } from '../../src/contract/rollout.ts'
import { forwardedEdgeUrl } from './edge-relay.ts'
import { RuntimeLifecycle } from './lifecycle.ts'
import { hostCopy, insidePath, sessionHostPath } from './paths.ts'
import { type ContainerRuntimeOptions, type Runtime, type RuntimeCapabilities, type RuntimeContext, SESSION_MOUNT } from './runtime.ts'
import { packAs, unpackAs } from './tar-transfer.ts'

/** Loopback port inside a container that reaches the edge, unless the runner names another. */
export const CONTAINER_EDGE_PORT = 8787

export const CONTAINER_CAPABILITIES: RuntimeCapabilities = {
  isolatesNetwork: true,
  cpuLimits: true,
  memoryLimits: true,
  storageLimits: false,
  gpus: true,
}

export abstract class ContainerRuntime extends RuntimeLifecycle implements Runtime {
  abstract readonly backend: string
  abstract readonly homeDir: string
  readonly capabilities = CONTAINER_CAPABILITIES
  readonly spec: RuntimeSpec
  readonly context: RuntimeContext
  readonly workDir: string
  protected readonly network: 'none' | 'host'
  protected readonly edgePort: number

  /** `needsImage` completes the error of a spec without an image (what the backend accepts). */
  constructor(backend: string, spec: RuntimeSpec, context: RuntimeContext, options: ContainerRuntimeOptions, needsImage = '') {
    super()
    if (!spec.image) throw new Error(`the ${backend} runtime needs runtime.image${needsImage}`)
    if (spec.storage_mb !== null) throw new Error(`the ${backend} runtime cannot limit storage (runtime.storage_mb must be null)`)
    this.spec = spec
    this.context = context
    this.network = options.network ?? 'none'
    this.edgePort = options.edgePort ?? CONTAINER_EDGE_PORT
    this.workDir = insidePath(spec.workdir ?? SESSION_MOUNT)
  }

  get edgeUrlInside(): string {
    if (this.network === 'host') return this.context.edgeUrl.replace(/\/+$/, '')
    return forwardedEdgeUrl(this.context.edgeUrl, this.edgePort)
  }

  /** Write a tar (top entry `posix.basename(inside)`) so that its top entry lands at `inside`. */
  protected abstract putArchive(inside: string, archive: Readable): Promise<void>
  /** Stream a tar of `inside` (top entry its basename) into `into`. */
  protected abstract getArchive(inside: string, into: Writable): Promise<void>

  async upload(source: string, target: string): Promise<void> {
    this.assertStarted()
    const inside = insidePath(target, this.workDir)
    const session = await sessionHostPath(this.context.sessionDir, inside)
    if (session !== null) return hostCopy(source, session)
    await this.putArchive(inside, await packAs(source, posix.basename(inside)))
  }

  async download(source: string, target: string): Promise<void> {
    this.assertStarted()
    const inside = insidePath(source, this.workDir)
    const session = await sessionHostPath(this.context.sessionDir, inside)
    if (session !== null) return hostCopy(session, target)
    await mkdir(dirname(target), { recursive: true })
    await this.getArchive(inside, unpackAs(target, posix.basename(inside)))
  }
}
