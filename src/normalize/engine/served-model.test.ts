/** The shared `/v1/models` lookup: window and model, cached per upstream, failures asked again. */
import { beforeEach, describe, expect, it } from 'vitest'
import { clearServedModelCache, discoverServedModel, SERVED_MODEL_TTL_MS } from './served-model.ts'

/** A scripted `/v1/models` that counts its calls. */
function engine(answers: (() => Response)[]) {
  const urls: string[] = []
  const fetcher = (async (input: string | URL | Request) => {
    urls.push(String(input))
    const next = answers.shift()
    if (!next) throw new Error('connection refused')
    return next()
  }) as typeof fetch
  return { urls, fetcher }
}

const models = (maxModelLen: unknown) => () => Response.json({ data: [{ id: 'Qwen/Qwen3-8B', max_model_len: maxModelLen }] })

beforeEach(() => clearServedModelCache())

describe('discoverServedModel', () => {
  it('reads the first model and its window, once per upstream within the TTL (with or without /v1)', async () => {
    const { urls, fetcher } = engine([models(32_768), models(40_960)])
    let now = 1_000
    const options = { timeoutMs: 100, fetch: fetcher, now: () => now }
    expect(await discoverServedModel('http://e.test/v1', options)).toEqual({ id: 'Qwen/Qwen3-8B', maxModelLen: 32_768 })
    expect(await discoverServedModel('http://e.test/', options)).toEqual({ id: 'Qwen/Qwen3-8B', maxModelLen: 32_768 })
    expect(urls).toEqual(['http://e.test/v1/models'])
    now += SERVED_MODEL_TTL_MS
    expect((await discoverServedModel('http://e.test', options)).maxModelLen).toBe(40_960)
    expect(urls).toHaveLength(2)
  })

  it('an engine that fails or does not say gives nulls, says why, and is asked again next time', async () => {
    const reasons: string[] = []
    const { urls, fetcher } = engine([() => new Response('loading', { status: 503 }), models(8192), models('big')])
    const options = { timeoutMs: 100, fetch: fetcher, onFailure: (reason: string) => reasons.push(reason) }
    expect(await discoverServedModel('http://e.test', options)).toEqual({ id: null, maxModelLen: null })
    expect(await discoverServedModel('http://e.test', options)).toEqual({ id: 'Qwen/Qwen3-8B', maxModelLen: 8192 })
    // A window that is not a positive integer is unknown (the model is still named).
    expect(await discoverServedModel('http://other.test', options)).toEqual({ id: 'Qwen/Qwen3-8B', maxModelLen: null })
    expect(urls).toHaveLength(3)
    expect(reasons[0]).toContain('answered 503')
    expect(await discoverServedModel('http://down.test', options)).toEqual({ id: null, maxModelLen: null })
    expect(reasons.at(-1)).toContain('failed: connection refused')
  })
})
