/**
 * @module
 * Where one model call goes, decided at the start of the call:
 * - bare capture sessions (`POST /v1/sessions`): their configured upstream, no extra round trip
 *   (rollout session ids carry a prefix, `isRolloutSessionId`);
 * - rollout sessions: one cheap RPC to the SessionObject (`admit`) — refused with a 403 in the
 *   caller's format unless the session is RUNNING; it also is the generation gate (waits while
 *   inference is paused, 503 when that lasts longer than the upstream timeout) and hands out the
 *   lease the record returns (`recordAdmitted`). When the route is `runner`, the call is tunnelled
 *   over the assigned runner's WebSocket (sticky for the session) and recorded as `runner:<id>`.
 */
import type { UpstreamConfig } from '../../durable/session/record.ts'
import type { PolicyVersion } from '../../durable/session/session-gate.ts'
import type { Admission, SessionRolloutRpc } from '../../durable/session/session-rollout.ts'
import type { EdgeConfig } from '../config.ts'
import { isRolloutSessionId } from '../../contract/rollout.ts'
import { GatewayError } from '../errors.ts'
import { runnerTunnelFetch } from './runner-tunnel.ts'
import type { SessionAccess } from './session-access.ts'

/** A lease outlives the engine call by this much (record included); a lost record frees it after that. */
const LEASE_MARGIN_MS = 60_000

export interface CallTarget {
  upstream: UpstreamConfig
  /** `direct`, or `runner:<id>` for tunnelled calls (`provenance.route`). */
  route: string
  /** The tunnel, when the call goes through a runner. */
  fetch?: typeof fetch
  /** Generation-gate lease of a rollout call (returned with its record), null for bare sessions. */
  ticket: string | null
  /** The gate's policy version, recorded on the completion when set. */
  policyVersion: PolicyVersion
}

const ENDED = ['COMPLETED', 'ERROR', 'TIMEOUT']

/** A tunnelled call's upstream: the runner's engine, with the window the runner reported (budgets are lowered to it). */
function runnerUpstream(
  runnerId: string,
  upstream: { model: string; kind: UpstreamConfig['kind']; max_model_len?: number },
): UpstreamConfig {
  return { url: `runner://${runnerId}`, kind: upstream.kind, served_model: upstream.model, max_model_len: upstream.max_model_len ?? null }
}

/** Why a rollout session refuses a call: paused (503), ended — its token is revoked (401) — or not RUNNING (403). */
export function admissionRefusal(admission: Extract<Admission, { ok: false }>): GatewayError {
  if (admission.paused) return new GatewayError(503, 'overloaded', 'inference is paused (weight update); retry later')
  if (ENDED.includes(admission.status))
    return new GatewayError(401, 'authentication', `session token revoked: session ended ${admission.status}`)
  return new GatewayError(403, 'permission', `session is ${admission.status}: model calls are accepted only while the session is RUNNING`)
}

/**
 * Where a call that never generates (count_tokens) goes: the status gate without a lease. A rollout
 * session must be RUNNING; a runner-routed one is answered by its runner's engine through the tunnel.
 */
export async function resolveLookupTarget(
  env: Env,
  config: EdgeConfig,
  access: SessionAccess,
): Promise<Omit<CallTarget, 'ticket' | 'policyVersion'>> {
  const bare = { upstream: access.config.upstream, route: 'direct' }
  if (!isRolloutSessionId(access.sessionId)) {
    await access.stillValid()
    return bare
  }
  const admission = await (access.stub as unknown as Pick<SessionRolloutRpc, 'peek'>).peek()
  if (!admission.ok) throw admissionRefusal(admission)
  if (admission.managed && admission.route === 'runner') {
    return {
      upstream: runnerUpstream(admission.runner_id, admission.upstream),
      route: `runner:${admission.runner_id}`,
      fetch: runnerTunnelFetch(env, admission.runner_id, config.upstreamTimeoutMs),
    }
  }
  return bare
}

export async function resolveCallTarget(env: Env, config: EdgeConfig, access: SessionAccess): Promise<CallTarget> {
  const bare: CallTarget = { upstream: access.config.upstream, route: 'direct', ticket: null, policyVersion: null }
  if (!isRolloutSessionId(access.sessionId)) return bare
  const admission = await (access.stub as unknown as Pick<SessionRolloutRpc, 'admit'>).admit(
    config.upstreamTimeoutMs + LEASE_MARGIN_MS,
    config.upstreamTimeoutMs,
  )
  if (!admission.ok) throw admissionRefusal(admission)
  if (!admission.managed) return bare
  const gated = { ticket: admission.ticket, policyVersion: admission.policy_version }
  if (admission.route === 'runner') {
    return {
      upstream: runnerUpstream(admission.runner_id, admission.upstream),
      route: `runner:${admission.runner_id}`,
      fetch: runnerTunnelFetch(env, admission.runner_id, config.upstreamTimeoutMs),
      ...gated,
    }
  }
  return { ...bare, ...gated }
}
