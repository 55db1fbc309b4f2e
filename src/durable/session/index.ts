/** @module Session Durable Object and its plain classes. */
export { SessionObject } from './session-object.ts'
export type { SessionRpc, SessionSummary } from './session-object.ts'
export type { CompletionInput, SessionConfig, UpstreamConfig } from './record.ts'
