/**
 * @module
 * The generation gate Durable Object (one per deployment): a thin RPC shell over `GenerationGate`.
 * RUNNING rollout sessions subscribe / unsubscribe; the admin routes pause, resume and read it.
 */
import { DurableObject } from 'cloudflare:workers'
import { Sql } from '../session/sql.ts'
import { type GateStatus, type GateSubscriber, type GateView, GenerationGate, type PolicyVersion } from './generation-gate.ts'

export interface InferenceGateRpc {
  subscribe(sessionId: string): Promise<GateView>
  unsubscribe(sessionId: string): Promise<void>
  pause(timeoutMs: number, policyVersion?: PolicyVersion): Promise<{ drained: boolean; status: GateStatus }>
  resume(policyVersion?: PolicyVersion): Promise<GateStatus>
  status(): Promise<GateStatus>
}

export class InferenceGate extends DurableObject<Env> implements InferenceGateRpc {
  readonly #gate: GenerationGate

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env)
    this.#gate = new GenerationGate(
      new Sql(ctx.storage.sql),
      (sessionId) => env.SESSIONS.get(env.SESSIONS.idFromName(sessionId)) as unknown as GateSubscriber,
    )
  }

  async subscribe(sessionId: string): Promise<GateView> {
    return this.#gate.subscribe(sessionId)
  }

  async unsubscribe(sessionId: string): Promise<void> {
    this.#gate.unsubscribe(sessionId)
  }

  pause(timeoutMs: number, policyVersion?: PolicyVersion): Promise<{ drained: boolean; status: GateStatus }> {
    return this.#gate.pause(timeoutMs, policyVersion)
  }

  resume(policyVersion?: PolicyVersion): Promise<GateStatus> {
    return this.#gate.resume(policyVersion)
  }

  status(): Promise<GateStatus> {
    return this.#gate.status()
  }
}
