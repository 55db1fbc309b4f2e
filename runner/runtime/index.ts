/**
 * @module
 * Runtime registry: `createRuntime(spec, context, options)` picks the backend named by the task's
 * `RuntimeSpec` (`runtime: null` → the runner's default, `rollgate runner --runtime local|docker|apptainer`)
 * and builds it with the runner-wide options of that backend.
 */
import { type RuntimeBackend, type RuntimeSpec, runtimeBackendSchema, runtimeSpecSchema } from '../../src/contract/rollout.ts'
import { ApptainerRuntime, type ApptainerRuntimeOptions } from './apptainer/apptainer-runtime.ts'
import { DockerRuntime, type DockerRuntimeOptions } from './docker/docker-runtime.ts'
import { LocalRuntime, type LocalRuntimeOptions } from './local/local-runtime.ts'
import type { ReadOnlyBind, Runtime, RuntimeContext } from './runtime.ts'

export type { Runtime, RuntimeContext } from './runtime.ts'

export interface RuntimeOptions {
  /** Backend of tasks that name no runtime (default `ROLLGATE_RUNTIME`, else `local`). */
  defaultBackend?: RuntimeBackend
  /** Image of tasks that name no runtime when the default backend needs one (docker, apptainer). */
  defaultImage?: string | null
  /** Host dirs mounted read-only at the given path on every backend (e.g. a host-cached harness CLI). */
  readOnlyBinds?: ReadOnlyBind[]
  local?: LocalRuntimeOptions
  docker?: DockerRuntimeOptions
  apptainer?: ApptainerRuntimeOptions
}

export const RUNTIME_BACKENDS = runtimeBackendSchema.options

/** Parses a `--runtime` value; a clear error names the accepted ones. */
export function parseRuntimeBackend(value: string): RuntimeBackend {
  const parsed = runtimeBackendSchema.safeParse(value)
  if (!parsed.success) throw new Error(`unknown runtime backend "${value}" (expected ${RUNTIME_BACKENDS.join(', ')})`)
  return parsed.data
}

export function defaultBackend(options: RuntimeOptions = {}): RuntimeBackend {
  if (options.defaultBackend) return options.defaultBackend
  const fromEnv = process.env.ROLLGATE_RUNTIME
  return fromEnv ? parseRuntimeBackend(fromEnv) : 'local'
}

/** The spec a task without `runtime` runs with. */
export function defaultRuntimeSpec(options: RuntimeOptions = {}): RuntimeSpec {
  const backend = defaultBackend(options)
  const image = options.defaultImage ?? undefined
  if (backend !== 'local' && !image) {
    throw new Error(`the task names no runtime and the default backend ${backend} needs an image (set the runner's default image)`)
  }
  return runtimeSpecSchema.parse({ backend, ...(image ? { image } : {}) })
}

export function createRuntime(spec: RuntimeSpec | null, context: RuntimeContext, options: RuntimeOptions = {}): Runtime {
  const resolved = spec ?? defaultRuntimeSpec(options)
  if (resolved.import_path) throw new Error('runtime.import_path (plugin runtimes) is not supported by this runner')
  const binds = options.readOnlyBinds ?? []
  const withBinds = <T extends { readOnlyBinds?: ReadOnlyBind[] }>(backend: T | undefined): T =>
    ({ ...backend, readOnlyBinds: [...(backend?.readOnlyBinds ?? []), ...binds] }) as T
  switch (resolved.backend) {
    case 'local':
      return new LocalRuntime(resolved, context, withBinds(options.local))
    case 'docker':
      return new DockerRuntime(resolved, context, withBinds(options.docker))
    case 'apptainer':
      return new ApptainerRuntime(resolved, context, withBinds(options.apptainer))
  }
}
