/**
 * @module
 * The generation gate's control plane (admin token; Polar gateway `/admin/inference/*`, §3.2):
 * `POST /admin/inference/pause?timeout_seconds=300` blocks new generations and waits for the ones in
 * flight (504 when they do not drain in time; the gate stays paused), `POST /admin/inference/resume`
 * unblocks, `GET /admin/inference/status`. Both POSTs take an optional `{policy_version}`: the version
 * recorded on completions from then on. The gate applies to rollout sessions (bare capture sessions
 * are never paused): RUNNING sessions hold its view and count their own calls in flight.
 */
import { Hono } from 'hono'
import { z } from 'zod'
import type { GateStatus } from '../../durable/gate/generation-gate.ts'
import { parseOrThrow } from '../../normalize/zod-issues.ts'
import { edgeConfig } from '../config.ts'
import { GatewayError } from '../errors.ts'
import { parseJsonBody, readBodyText } from '../pipeline/read-body.ts'
import { numberParam } from '../query.ts'
import { gateStub, hubStub } from '../pipeline/rollout-stubs.ts'
import { requireAdmin } from './require-admin.ts'

/** Polar's default drain wait. */
const DEFAULT_PAUSE_TIMEOUT_SECONDS = 300
const MAX_PAUSE_TIMEOUT_SECONDS = 3_600
const MAX_BODY_BYTES = 64 * 1024

type AppEnv = { Bindings: Env }

export const gateBodySchema = z.object({ policy_version: z.union([z.string(), z.number()]).nullable().optional() })

async function gateBody(request: Request) {
  const text = await readBodyText(request, MAX_BODY_BYTES)
  return parseOrThrow(gateBodySchema, text.trim() ? parseJsonBody(text) : {})
}

function describe(env: Env, status: GateStatus) {
  const config = edgeConfig(env)
  return { ...status, base_url: config.upstreamUrl, engine: config.upstreamKind }
}

export const inferenceAdmin = new Hono<AppEnv>()

inferenceAdmin.get('/admin/inference/status', requireAdmin, async (c) => c.json(describe(c.env, await gateStub(c.env).status())))

inferenceAdmin.post('/admin/inference/pause', requireAdmin, async (c) => {
  // Strict (`query.ts`): empty is the default, never 0; `0x10`, ` `, `1e2` are a 400 naming the parameter.
  const seconds = numberParam(c.req.query('timeout_seconds'), 'timeout_seconds', DEFAULT_PAUSE_TIMEOUT_SECONDS, {
    min: 0,
    max: MAX_PAUSE_TIMEOUT_SECONDS,
  })
  const body = await gateBody(c.req.raw)
  const { drained, status } = await gateStub(c.env).pause(Math.round(seconds * 1000), body.policy_version)
  const at = new Date().toISOString()
  c.executionCtx.waitUntil(
    hubStub(c.env)
      .publish({ type: 'inference.paused', policy_version: status.policy_version, at })
      .catch(() => {}),
  )
  if (!drained) {
    throw new GatewayError(504, 'timeout', `inference paused, but ${status.inflight} generation(s) still in flight after ${seconds} s`)
  }
  return c.json(describe(c.env, status))
})

inferenceAdmin.post('/admin/inference/resume', requireAdmin, async (c) => {
  const body = await gateBody(c.req.raw)
  const status = await gateStub(c.env).resume(body.policy_version)
  const at = new Date().toISOString()
  c.executionCtx.waitUntil(
    hubStub(c.env)
      .publish({ type: 'inference.resumed', policy_version: status.policy_version, at })
      .catch(() => {}),
  )
  return c.json(describe(c.env, status))
})
