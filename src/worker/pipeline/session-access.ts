/**
 * @module
 * Authenticate a harness call to its session and reach the session's Durable Object.
 * Session config is immutable after creation, so each isolate caches it after the first read.
 */
import type { SessionConfig } from '../../durable/session/record.ts'
import type { SessionRpc } from '../../durable/session/session-object.ts'
import { presentedCredential } from '../auth/credentials.ts'
import { checkSessionToken } from '../../contract/session-token.ts'
import type { EdgeConfig } from '../config.ts'
import { GatewayError } from '../errors.ts'

const AGENT_LABEL = /^[A-Za-z0-9_.:-]{1,64}$/
const CACHE_LIMIT = 10_000
const configCache = new Map<string, SessionConfig>()
/** Verified token → its claims: an HMAC check per call is wasted work once a token has verified (expiry is re-checked). */
const verifiedTokens = new Map<string, { sid: string; exp: number }>()
let verifiedUnderKey: string | null = null

async function sessionIdOf(credential: string, signingKey: string): Promise<string> {
  if (verifiedUnderKey !== signingKey) {
    verifiedTokens.clear()
    verifiedUnderKey = signingKey
  }
  const known = verifiedTokens.get(credential)
  if (known && Date.now() < known.exp * 1000) return known.sid
  const check = await checkSessionToken(credential, signingKey)
  if (!check.ok) {
    // Stryker disable next-line CallExpression: only an expired entry is here, and the expiry check already refuses it; this frees it early
    verifiedTokens.delete(credential)
    throw new GatewayError(401, 'authentication', check.reason === 'expired' ? 'session token expired' : 'invalid session token')
  }
  if (verifiedTokens.size >= CACHE_LIMIT) verifiedTokens.clear()
  verifiedTokens.set(credential, check.claims)
  return check.claims.sid
}

export interface SessionAccess {
  sessionId: string
  agent: string
  stub: SessionRpc
  config: SessionConfig
  /**
   * Resolves while the session's token is not revoked (finalized / ended session), else rejects with a
   * 401. The check starts at authentication, so its round trip overlaps reading the body; await it
   * before any upstream call.
   */
  stillValid(): Promise<void>
}

/** Session id → its object's id (`idFromName` hashes the name on every call); bounded like the caches above. */
const objectIds = new Map<string, DurableObjectId>()
let objectIdsOf: DurableObjectNamespace | null = null

export function sessionStub(env: Env, sessionId: string): SessionRpc {
  const namespace = env.SESSIONS as unknown as DurableObjectNamespace
  if (objectIdsOf !== namespace) {
    objectIds.clear()
    objectIdsOf = namespace
  }
  let id = objectIds.get(sessionId)
  if (!id) {
    id = namespace.idFromName(sessionId)
    if (objectIds.size >= CACHE_LIMIT) objectIds.clear()
    objectIds.set(sessionId, id)
  }
  return namespace.get(id) as unknown as SessionRpc
}

export async function authenticateSession(
  env: Env,
  config: EdgeConfig,
  request: Request,
  url: URL,
  path: { token?: string; agent?: string },
): Promise<SessionAccess> {
  const credential = presentedCredential(request, url, path.token)
  if (!credential) throw new GatewayError(401, 'authentication', 'missing session token: send it as the API key')
  if (!config.signingKey) throw new GatewayError(503, 'internal', 'edge has no signing key configured')
  const sessionId = await sessionIdOf(credential, config.signingKey)
  const agent = path.agent ?? request.headers.get('x-rollgate-agent') ?? 'main'
  if (!AGENT_LABEL.test(agent)) {
    throw new GatewayError(400, 'invalid_request', 'agent label must match [A-Za-z0-9_.:-]{1,64}', 'x-rollgate-agent')
  }
  const stub = sessionStub(env, sessionId)
  let sessionConfig = configCache.get(sessionId)
  if (!sessionConfig) {
    const stored = await stub.config()
    if (!stored) throw new GatewayError(401, 'authentication', 'session does not exist')
    sessionConfig = stored
    if (configCache.size >= CACHE_LIMIT) configCache.clear()
    configCache.set(sessionId, sessionConfig)
  }
  const revocation = stub.revoked().then((reason) => {
    if (reason) throw new GatewayError(401, 'authentication', `session token revoked: ${reason}`)
  })
  revocation.catch(() => {}) // awaited by the caller (`stillValid`); never an unhandled rejection meanwhile
  return { sessionId, agent, stub, config: sessionConfig, stillValid: () => revocation }
}
