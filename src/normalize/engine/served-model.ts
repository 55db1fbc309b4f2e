/**
 * @module
 * What an OpenAI-compatible engine serves, read from its `GET /v1/models`: the first model's id and
 * its context window (vLLM's `max_model_len`). Used by bare sessions (`POST /v1/sessions`), rollout
 * sessions (the task coordinator's dispatch) and the runner (reported in its `register` frame), so
 * every session knows the window its output budgets are lowered to (`engine-request.ts`).
 *
 * An engine that does not answer in time, answers non-2xx or without `max_model_len` gives nulls: the
 * window is then unknown and output budgets are passed on unchanged (the engine may refuse them).
 * Answers are cached per engine URL for `SERVED_MODEL_TTL_MS`; failures are not cached.
 */

export interface ServedModel {
  /** The first served model's id; null when the engine did not say. */
  id: string | null
  /** The engine's context window in tokens; null when unknown. */
  maxModelLen: number | null
}

/** How long one engine's answer is reused (a restarted engine with another window is seen after this). */
export const SERVED_MODEL_TTL_MS = 60_000
const UNKNOWN: ServedModel = { id: null, maxModelLen: null }
const cache = new Map<string, { at: number; model: ServedModel }>()

/** The `/v1/models` answer's first model, or nulls when the body does not say. */
export function parseServedModels(body: unknown): ServedModel {
  const model = (body as { data?: { id?: unknown; max_model_len?: unknown }[] } | null)?.data?.[0]
  const id = typeof model?.id === 'string' && model.id ? model.id : null
  const len = model?.max_model_len
  const maxModelLen = typeof len === 'number' && Number.isInteger(len) && len > 0 ? len : null
  return { id, maxModelLen }
}

/**
 * The engine at `upstreamUrl` (with or without its `/v1` suffix): its served model and window, or nulls
 * when it cannot be read within `timeoutMs` (`onFailure` says why).
 */
export async function discoverServedModel(
  upstreamUrl: string,
  options: {
    timeoutMs: number
    fetch?: typeof fetch
    now?: () => number
    onFailure?: (reason: string) => void
    /** Ask the engine even when a cached answer is fresh (a runner re-reading its engine after a restart). */
    fresh?: boolean
  },
): Promise<ServedModel> {
  const base = upstreamUrl.replace(/\/+$/, '').replace(/\/v1$/, '')
  const now = (options.now ?? Date.now)()
  const hit = cache.get(base)
  if (hit && !options.fresh && now - hit.at < SERVED_MODEL_TTL_MS) return hit.model
  try {
    const response = await (options.fetch ?? fetch)(`${base}/v1/models`, { signal: AbortSignal.timeout(options.timeoutMs) })
    if (!response.ok) {
      await response.body?.cancel()
      options.onFailure?.(`GET ${base}/v1/models answered ${response.status}`)
      return UNKNOWN
    }
    const model = parseServedModels(await response.json())
    if (model.id === null) options.onFailure?.(`GET ${base}/v1/models names no model`)
    else cache.set(base, { at: now, model })
    return model
  } catch (error) {
    options.onFailure?.(`GET ${base}/v1/models failed: ${(error as Error).message}`)
    return UNKNOWN
  }
}

/** Forget cached answers (tests). */
export function clearServedModelCache(): void {
  cache.clear()
}
