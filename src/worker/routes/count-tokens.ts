/**
 * @module
 * Count-tokens routes: Anthropic `POST /v1/messages/count_tokens` (`{input_tokens}`) and Gemini
 * `POST /v1beta/models/{model}:countTokens` (`{totalTokens}`), answered from the engine's `/tokenize`.
 * Never a generation, never recorded (Polar runs and captures a generation here). A rollout session
 * answers only while RUNNING (like model calls, no lease) and counts with the engine that serves it
 * (its runner's, through the tunnel); a finalized or ended session's token is refused. Mounted in
 * `proxy.ts` before the catch-all proxy route; any other path falls through to it.
 */
import { type Context, Hono, type Next } from 'hono'
import { detectAdapter } from '../../normalize/registry.ts'
import { edgeConfig, upstreamKeyFor } from '../config.ts'
import { countPromptTokens } from '../pipeline/count-prompt-tokens.ts'
import { parseJsonBody, readBodyText } from '../pipeline/read-body.ts'
import { resolveLookupTarget } from '../pipeline/call-target.ts'
import { authenticateSession } from '../pipeline/session-access.ts'

type AppEnv = { Bindings: Env }

export interface CountTokensDeps {
  /** Injected for tests; defaults to the global `fetch`. */
  fetch?: typeof fetch
}

export function createCountTokensRoutes(deps: CountTokensDeps = {}): Hono<AppEnv> {
  const routes = new Hono<AppEnv>()
  const handle = async (c: Context<AppEnv>, next: Next) => {
    const url = new URL(c.req.url)
    const counter = detectAdapter(url, c.req.raw.headers)?.countTokens
    if (!counter?.matches(url)) return next()
    const config = edgeConfig(c.env)
    const path = { token: c.req.param('token') || undefined, agent: c.req.param('agent') || undefined }
    const access = await authenticateSession(c.env, config, c.req.raw, url, path)
    const target = await resolveLookupTarget(c.env, config, access)
    const body = counter.parseRequest(parseJsonBody(await readBodyText(c.req.raw, config.maxBodyBytes)), url)
    const count = await countPromptTokens(target.upstream, body, {
      apiKey: target.fetch ? null : upstreamKeyFor(config, target.upstream.url),
      ...(target.fetch ? { fetch: target.fetch } : deps.fetch ? { fetch: deps.fetch } : {}),
    })
    return c.json(counter.buildResponse(count.inputTokens) as Record<string, unknown>, 200, {
      'x-rollgate-token-count': count.source,
    })
  }
  routes.post('/v1/messages/count_tokens', handle)
  // The model may contain `/` (`Qwen/Qwen3-8B`), so the rest of the path is matched, and the adapter decides.
  routes.post('/:version/models/*', handle)
  return routes
}

export const countTokens = createCountTokensRoutes()
