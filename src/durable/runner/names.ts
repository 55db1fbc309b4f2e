/**
 * @module
 * Names of the rollout Durable Objects: one runner hub and one generation gate per deployment (a
 * future sharding by runner pool would key these by pool), and one `RunnerLink` per runner id.
 */

export const RUNNER_HUB_NAME = 'default'
export const INFERENCE_GATE_NAME = 'default'

/** What a runner id may look like (it names the runner's `RunnerLink`). */
export const RUNNER_ID = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$/
export const RUNNER_ID_MESSAGE = 'runner_id must match ^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$'
