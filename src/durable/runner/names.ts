/**
 * @module
 * Names of the singleton rollout Durable Objects (one runner hub and one generation gate per
 * deployment; a future sharding by runner pool would key these by pool).
 */

export const RUNNER_HUB_NAME = 'default'
export const INFERENCE_GATE_NAME = 'default'
