/**
 * @module
 * Edge configuration read from the Worker's env (vars in wrangler.toml, secrets via `wrangler secret`).
 */
import { upstreamKindSchema, type UpstreamKind } from '../contract/completion-record.ts'
import { DEFAULT_SESSION_TOKEN_TTL_SECONDS } from '../contract/session-token.ts'
import { withoutCredentials } from '../contract/upstream-url.ts'

/** Default cap on a harness request body; Workers accept 100 MB, a 50-turn agent sends ~2 MB. */
const DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024
const DEFAULT_MAX_SESSION_BYTES = 2 * 1024 * 1024 * 1024
/** Polar's inference read timeout (`docs/polar-compat.md` §5). */
const DEFAULT_UPSTREAM_TIMEOUT_MS = 900_000
/** Keep-alive cadence for synthetic streams while the engine works (harness idle timeouts). */
const DEFAULT_HEARTBEAT_MS = 5_000

export interface EdgeConfig {
  adminToken: string | null
  signingKey: string | null
  upstreamUrl: string
  upstreamKind: UpstreamKind
  upstreamApiKey: string | null
  /** Origins the upstream API key may be sent to: the configured upstream's, plus `ROLLGATE_UPSTREAM_KEY_ORIGINS`. */
  upstreamKeyOrigins: readonly string[]
  servedModel: string | null
  maxBodyBytes: number
  /** Captured bytes a session may hold before it takes no more model calls. */
  maxSessionBytes: number
  upstreamTimeoutMs: number
  heartbeatMs: number
  /** Lifetime of the tokens of bare sessions (`POST /v1/sessions` may ask for another). */
  sessionTokenTtlSeconds: number
}

function positiveInt(value: string | undefined, fallback: number): number {
  const parsed = value ? Number(value) : Number.NaN
  return Number.isInteger(parsed) && parsed > 0 ? parsed : fallback
}

function originOf(url: string): string | null {
  try {
    const origin = new URL(url).origin
    return origin === 'null' ? null : origin
  } catch {
    return null
  }
}

function keyOrigins(env: Env): string[] {
  const listed = (env.ROLLGATE_UPSTREAM_KEY_ORIGINS ?? '').split(',').map((entry) => entry.trim())
  const origins = [env.ROLLGATE_UPSTREAM_URL || 'http://127.0.0.1:8000', ...listed].map((entry) => (entry ? originOf(entry) : null))
  return [...new Set(origins.filter((origin): origin is string => origin !== null))]
}

/**
 * The upstream API key for a call to `url`, or null: the key goes only to the configured upstream's
 * origin (and the origins an operator listed), never to a URL that arrived in a request body.
 */
export function upstreamKeyFor(config: EdgeConfig, url: string): string | null {
  if (!config.upstreamApiKey) return null
  const origin = originOf(url)
  return origin !== null && config.upstreamKeyOrigins.includes(origin) ? config.upstreamApiKey : null
}

let cached: { env: Env; config: EdgeConfig } | null = null

export function edgeConfig(env: Env): EdgeConfig {
  if (cached?.env === env) return cached.config
  const kind = upstreamKindSchema.safeParse(env.ROLLGATE_UPSTREAM_KIND)
  const config: EdgeConfig = {
    adminToken: env.ROLLGATE_ADMIN_TOKEN || null,
    signingKey: env.ROLLGATE_SIGNING_KEY || env.ROLLGATE_ADMIN_TOKEN || null,
    upstreamUrl: withoutCredentials(env.ROLLGATE_UPSTREAM_URL || 'http://127.0.0.1:8000').replace(/\/+$/, ''),
    upstreamKind: kind.success ? kind.data : 'vllm',
    upstreamApiKey: env.ROLLGATE_UPSTREAM_API_KEY || null,
    upstreamKeyOrigins: keyOrigins(env),
    servedModel: env.ROLLGATE_SERVED_MODEL || null,
    maxBodyBytes: positiveInt(env.ROLLGATE_MAX_BODY_BYTES, DEFAULT_MAX_BODY_BYTES),
    maxSessionBytes: positiveInt(env.ROLLGATE_MAX_SESSION_BYTES, DEFAULT_MAX_SESSION_BYTES),
    upstreamTimeoutMs: positiveInt(env.ROLLGATE_UPSTREAM_TIMEOUT_MS, DEFAULT_UPSTREAM_TIMEOUT_MS),
    heartbeatMs: positiveInt(env.ROLLGATE_HEARTBEAT_MS, DEFAULT_HEARTBEAT_MS),
    sessionTokenTtlSeconds: positiveInt(env.ROLLGATE_SESSION_TOKEN_TTL_SECONDS, DEFAULT_SESSION_TOKEN_TTL_SECONDS),
  }
  cached = { env, config }
  return config
}
