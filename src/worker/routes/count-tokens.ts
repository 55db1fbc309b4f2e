/**
 * @module
 * Count-tokens routes: Anthropic `POST /v1/messages/count_tokens` (`{input_tokens}`) and Gemini
 * `POST /v1beta/models/{model}:countTokens` (`{totalTokens}`), answered from the engine's `/tokenize`
 * for the prompt a generation with the same body would send: the same preparation (`prepareEngineBody`:
 * replayed tool inputs and turns restored to their sampled form, reasoning renamed for vLLM).
 * Never a generation, never recorded (Polar runs and captures a generation here). A rollout session
 * answers only while RUNNING (like model calls, no lease) and counts with the engine that serves it
 * (its runner's, through the tunnel); a finalized or ended session's token is refused. Mounted in
 * `proxy.ts` before the catch-all proxy route; any other path falls through to it.
 */
import { type Context, Hono, type Next } from 'hono'
import { detectAdapter } from '../../normalize/registry.ts'
import { edgeConfig, upstreamKeyFor } from '../config.ts'
import { tokenizeRequestFor } from '../../normalize/warnings.ts'
import { countPromptTokens } from '../pipeline/count-prompt-tokens.ts'
import { prepareEngineBody } from '../pipeline/prepare-engine-body.ts'
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
    const adapter = detectAdapter(url, c.req.raw.headers)
    const counter = adapter?.countTokens
    if (!adapter || !counter?.matches(url)) return next()
    const config = edgeConfig(c.env)
    const path = { token: c.req.param('token') || undefined, agent: c.req.param('agent') || undefined }
    const access = await authenticateSession(c.env, config, c.req.raw, url, path)
    const target = await resolveLookupTarget(c.env, config, access)
    const text = await readBodyText(c.req.raw, config.maxBodyBytes)
    const upstream = target.upstream
    // The same preparation as a generation (restores included), so the count is the next prompt's length.
    const { engineBody } = await prepareEngineBody(
      adapter.id,
      parseJsonBody(text),
      (wire) => {
        const { add_generation_prompt: _, ...request } = counter.parseRequest(wire, url)
        return { request, warnings: [] }
      },
      access,
      { kind: upstream.kind, servedModel: upstream.served_model, maxModelLen: upstream.max_model_len ?? null, promptChars: text.length },
    )
    const body = tokenizeRequestFor(engineBody.model, {
      messages: engineBody.messages,
      ...(engineBody.tools ? { tools: engineBody.tools } : {}),
      ...(engineBody.chat_template_kwargs ? { chat_template_kwargs: engineBody.chat_template_kwargs as Record<string, unknown> } : {}),
    })
    const count = await countPromptTokens(upstream, body, {
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
