/**
 * @module
 * Edge configuration read from the Worker's env (vars in wrangler.toml, secrets via `wrangler secret`).
 */
import { upstreamKindSchema, type UpstreamKind } from '../contract/completion-record.ts'

/** Default cap on a harness request body; Workers accept 100 MB, a 50-turn agent sends ~2 MB. */
const DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024
/** Polar's inference read timeout (polar-compat.md §5). */
const DEFAULT_UPSTREAM_TIMEOUT_MS = 900_000
/** Keep-alive cadence for synthetic streams while the engine works (harness idle timeouts). */
const DEFAULT_HEARTBEAT_MS = 5_000

export interface EdgeConfig {
  adminToken: string | null
  signingKey: string | null
  upstreamUrl: string
  upstreamKind: UpstreamKind
  upstreamApiKey: string | null
  servedModel: string | null
  maxBodyBytes: number
  upstreamTimeoutMs: number
  heartbeatMs: number
}

function positiveInt(value: string | undefined, fallback: number): number {
  const parsed = value ? Number(value) : Number.NaN
  return Number.isInteger(parsed) && parsed > 0 ? parsed : fallback
}

let cached: { env: Env; config: EdgeConfig } | null = null

export function edgeConfig(env: Env): EdgeConfig {
  if (cached?.env === env) return cached.config
  const kind = upstreamKindSchema.safeParse(env.ROLLGATE_UPSTREAM_KIND)
  const config: EdgeConfig = {
    adminToken: env.ROLLGATE_ADMIN_TOKEN || null,
    signingKey: env.ROLLGATE_SIGNING_KEY || env.ROLLGATE_ADMIN_TOKEN || null,
    upstreamUrl: (env.ROLLGATE_UPSTREAM_URL || 'http://127.0.0.1:8000').replace(/\/+$/, ''),
    upstreamKind: kind.success ? kind.data : 'vllm',
    upstreamApiKey: env.ROLLGATE_UPSTREAM_API_KEY || null,
    servedModel: env.ROLLGATE_SERVED_MODEL || null,
    maxBodyBytes: positiveInt(env.ROLLGATE_MAX_BODY_BYTES, DEFAULT_MAX_BODY_BYTES),
    upstreamTimeoutMs: positiveInt(env.ROLLGATE_UPSTREAM_TIMEOUT_MS, DEFAULT_UPSTREAM_TIMEOUT_MS),
    heartbeatMs: positiveInt(env.ROLLGATE_HEARTBEAT_MS, DEFAULT_HEARTBEAT_MS),
  }
  cached = { env, config }
  return config
}
