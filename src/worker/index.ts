/**
 * @module
 * Worker entry: the hono app plus the Durable Object classes wrangler binds.
 */
import { app } from './app.ts'

export { SessionObject } from '../durable/session/index.ts'
export { TaskObject } from '../durable/task/index.ts'
export { RunnerHub } from '../durable/runner/index.ts'
export { InferenceGate } from '../durable/gate/index.ts'

export default {
  fetch: app.fetch,
} satisfies ExportedHandler<Env>
