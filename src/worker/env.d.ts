/** Secrets and optional tunables are not in wrangler.toml, so `wrangler types` cannot see them. */
interface Env {
  ROLLGATE_ADMIN_TOKEN?: string
  ROLLGATE_SIGNING_KEY?: string
  ROLLGATE_UPSTREAM_API_KEY?: string
  /** Extra origins (comma-separated) the upstream API key may be sent to, besides ROLLGATE_UPSTREAM_URL's. */
  ROLLGATE_UPSTREAM_KEY_ORIGINS?: string
  ROLLGATE_MAX_BODY_BYTES?: string
  /** Captured bytes a session may hold (default 2 GiB); past it, model calls get a 413 naming the limit. */
  ROLLGATE_MAX_SESSION_BYTES?: string
  /** Lifetime of bare sessions' tokens in seconds (default 86400); rollout tokens live for their session's budget. */
  ROLLGATE_SESSION_TOKEN_TTL_SECONDS?: string
  ROLLGATE_UPSTREAM_TIMEOUT_MS?: string
  ROLLGATE_HEARTBEAT_MS?: string
  /** Credential runners present on `GET /runners/connect` (a separate kind from admin and session tokens). */
  ROLLGATE_RUNNER_TOKEN?: string
  /** Expected runner heartbeat cadence (default 10000); a runner is unhealthy after 2.5 intervals. */
  ROLLGATE_RUNNER_HEARTBEAT_MS?: string
  /** How long a disconnected or silent runner keeps its sessions (default 2.5 heartbeat intervals). */
  ROLLGATE_RUNNER_GRACE_MS?: string
  /** First trainer-callback retry delay (doubles per attempt; default 1000). */
  ROLLGATE_CALLBACK_BASE_DELAY_MS?: string
  /** Trainer-callback attempts before giving up (default 10). */
  ROLLGATE_CALLBACK_MAX_ATTEMPTS?: string
  /** Public origin harnesses use to reach the edge (default: the origin of the submit request). */
  ROLLGATE_PUBLIC_URL?: string
}
