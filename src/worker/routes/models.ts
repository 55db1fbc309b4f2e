/**
 * @module
 * Model listings in the caller's shape: `GET /v1/models` as Anthropic's list (merged with OpenAI's
 * fields) when the request carries `anthropic-version` / `x-api-key` (Claude Code's discovery call),
 * and Gemini's `GET /v1beta/models` / `GET /v1beta/models/{model}`. Other `GET /v1/models` calls fall
 * through to the OpenAI listing in `proxy.ts`. Mounted there before it.
 */
import { type Context, Hono, type Next } from 'hono'
import { buildAnthropicModelList, wantsAnthropicModelList } from '../../normalize/providers/anthropic/anthropic-models.ts'
import { buildGoogleModelList, googleModel } from '../../normalize/providers/google/google-models.ts'
import { isGoogleClient } from '../../normalize/providers/google/index.ts'
import { edgeConfig } from '../config.ts'
import { GatewayError } from '../errors.ts'
import { authenticateSession } from '../pipeline/session-access.ts'

type AppEnv = { Bindings: Env }

export interface ModelRoutesDeps {
  /** Injected for tests; defaults to the global `fetch`. */
  fetch?: typeof fetch
}

interface ListedModel {
  id: string
  created: number
}

export function createModelRoutes(deps: ModelRoutesDeps = {}): Hono<AppEnv> {
  const routes = new Hono<AppEnv>()

  const served = async (c: Context<AppEnv>): Promise<ListedModel[]> => {
    const config = edgeConfig(c.env)
    const path = { token: c.req.param('token') || undefined, agent: c.req.param('agent') || undefined }
    const access = await authenticateSession(c.env, config, c.req.raw, new URL(c.req.url), path)
    const created = Math.floor(Date.parse(access.config.created_at) / 1000)
    const servedModel = access.config.upstream.served_model
    if (servedModel) return [{ id: servedModel, created }]
    const base = access.config.upstream.url.replace(/\/+$/, '').replace(/\/v1$/, '')
    const upstream = await (deps.fetch ?? fetch)(`${base}/v1/models`).catch(() => null)
    const body = upstream?.ok ? ((await upstream.json().catch(() => null)) as { data?: { id?: unknown }[] } | null) : null
    return (body?.data ?? []).flatMap((model) => (typeof model.id === 'string' ? [{ id: model.id, created }] : []))
  }

  routes.get('/v1/models', async (c: Context<AppEnv>, next: Next) => {
    if (wantsAnthropicModelList(c.req.raw.headers)) return c.json(buildAnthropicModelList(await served(c)))
    // `@google/genai` lists models at /v1/models with its key: answer in Google's shape, not OpenAI's.
    if (isGoogleClient(new URL(c.req.url), c.req.raw.headers)) return c.json(buildGoogleModelList(await served(c)))
    return next()
  })
  routes.get('/:version{v1beta|v1alpha}/models', async (c) => c.json(buildGoogleModelList(await served(c))))
  // A served id may contain `/` (`models/Qwen/Qwen3-8B`): the model is the rest of the path.
  const getModel = async (c: Context<AppEnv>, next: Next) => {
    const url = new URL(c.req.url)
    const match = /\/models\/([^:]+?)\/?$/.exec(url.pathname)
    if (!match?.[1] || (!/\/v1(beta|alpha)\//.test(url.pathname) && !isGoogleClient(url, c.req.raw.headers))) return next()
    const id = decodeURIComponent(match[1])
    const model = (await served(c)).find((entry) => entry.id === id)
    if (!model) throw new GatewayError(404, 'not_found', `models/${id} is not found`)
    return c.json(googleModel(model))
  }
  routes.get('/:version{v1beta|v1alpha|v1}/models/*', getModel)
  return routes
}

export const models = createModelRoutes()
