/** @module Generation gate Durable Object and its plain class. */
export { InferenceGate } from './inference-gate.ts'
export type { InferenceGateRpc } from './inference-gate.ts'
export type { GateStatus, GateView, PolicyVersion } from './generation-gate.ts'
