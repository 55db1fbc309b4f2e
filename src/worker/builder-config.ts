/**
 * @module
 * Builder configs enter at the routes (trajectory, finalize, task submit): checked once there, so a bad key is a
 * 400 naming it (`param: config.<key>`), never a failure inside a Durable Object after the work is done.
 */
import type { BuilderName } from '../contract/trajectory.ts'
import { BuilderConfigError, type CheckedBuilderConfig, checkBuilderConfig } from '../reconstruct/index.ts'
import { GatewayError } from './errors.ts'

/** `paramPrefix` locates the config in the request (`config` for session routes, `builder.config` for tasks). */
export function builderConfigOrThrow(builder: BuilderName, config: unknown, paramPrefix = 'config'): CheckedBuilderConfig {
  try {
    return checkBuilderConfig(builder, config)
  } catch (error) {
    if (!(error instanceof BuilderConfigError)) throw error
    const param = error.key ? `${paramPrefix}.${error.key}` : paramPrefix
    const detail = error.message.replace(/^config\b/, paramPrefix)
    throw new GatewayError(400, 'invalid_request', `invalid ${builder} builder config: ${detail}`, param)
  }
}
