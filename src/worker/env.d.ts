/** Secrets and optional tunables are not in wrangler.toml, so `wrangler types` cannot see them. */
interface Env {
  ROLLGATE_ADMIN_TOKEN?: string
  ROLLGATE_SIGNING_KEY?: string
  ROLLGATE_UPSTREAM_API_KEY?: string
  ROLLGATE_MAX_BODY_BYTES?: string
  ROLLGATE_UPSTREAM_TIMEOUT_MS?: string
  ROLLGATE_HEARTBEAT_MS?: string
}
