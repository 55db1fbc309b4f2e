/** The shared `/v1/models` lookup: window and model, cached per upstream, failures asked again. */
import { beforeEach, describe, expect, it } from 'vitest'
import { clearServedModelCache, discoverServedModel, parseServedModels, SERVED_MODEL_TTL_MS } from './served-model.ts'

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

  it('an answer naming no model gives nulls, says so and is not cached', async () => {
    const reasons: string[] = []
    const { urls, fetcher } = engine([
      () => Response.json({ data: [] }),
      () => Response.json({ data: [{ id: '', max_model_len: 4096 }] }),
      models(4096),
    ])
    const options = { timeoutMs: 100, fetch: fetcher, onFailure: (reason: string) => reasons.push(reason) }
    expect(await discoverServedModel('http://e.test/v1/', options)).toEqual({ id: null, maxModelLen: null })
    expect(await discoverServedModel('http://e.test//', options)).toEqual({ id: null, maxModelLen: 4096 })
    expect(await discoverServedModel('http://e.test', options)).toEqual({ id: 'Qwen/Qwen3-8B', maxModelLen: 4096 })
    expect(await discoverServedModel('http://e.test/v1', options)).toEqual({ id: 'Qwen/Qwen3-8B', maxModelLen: 4096 })
    expect(urls).toEqual(['http://e.test/v1/models', 'http://e.test/v1/models', 'http://e.test/v1/models'])
    expect(reasons).toEqual(['GET http://e.test/v1/models names no model', 'GET http://e.test/v1/models names no model'])
  })

  it('an engine that does not answer within the timeout gives nulls and says why', async () => {
    const reasons: string[] = []
    const fetcher = ((_input: string | URL | Request, init?: RequestInit) =>
      new Promise<Response>((_resolve, reject) => {
        const signal = init?.signal as AbortSignal
        signal.addEventListener('abort', () => reject(signal.reason as Error))
      })) as typeof fetch
    const model = await discoverServedModel('http://slow.test', {
      timeoutMs: 20,
      fetch: fetcher,
      onFailure: (reason) => reasons.push(reason),
    })
    expect(model).toEqual({ id: null, maxModelLen: null })
    expect(reasons).toEqual([expect.stringMatching(/^GET http:\/\/slow\.test\/v1\/models failed: .*time/i)])
  })

  it('a window is a positive integer; anything else is unknown', () => {
    const window = (value: unknown) => parseServedModels({ data: [{ id: 'm', max_model_len: value }] }).maxModelLen
    expect(window(1)).toBe(1)
    expect(window(131_072)).toBe(131_072)
    for (const value of [0, -1, 1.5, '4096', null, undefined]) expect(window(value)).toBeNull()
    expect(parseServedModels(null)).toEqual({ id: null, maxModelLen: null })
    expect(parseServedModels({})).toEqual({ id: null, maxModelLen: null })
    expect(parseServedModels({ data: [{ id: 7 }] })).toEqual({ id: null, maxModelLen: null })
    expect(parseServedModels({ data: [{ id: 'first' }, { id: 'second', max_model_len: 8 }] })).toEqual({ id: 'first', maxModelLen: null })
  })

  it('works without an onFailure callback, an answer without a body, and a /v1 that is not the suffix', async () => {
    const { urls, fetcher } = engine([
      () => new Response(null, { status: 503 }),
      () => Response.json({ data: [] }),
      () => Response.json({}),
      models(2048),
    ])
    const options = { timeoutMs: 100, fetch: fetcher }
    expect(await discoverServedModel('http://a.test', options)).toEqual({ id: null, maxModelLen: null })
    expect(await discoverServedModel('http://b.test', options)).toEqual({ id: null, maxModelLen: null })
    expect(await discoverServedModel('http://c.test', options)).toEqual({ id: null, maxModelLen: null })
    expect(await discoverServedModel('http://d.test/v1/engine', options)).toEqual({ id: 'Qwen/Qwen3-8B', maxModelLen: 2048 })
    expect(await discoverServedModel('http://e.test', options)).toEqual({ id: null, maxModelLen: null })
    expect(urls).toEqual([
      'http://a.test/v1/models',
      'http://b.test/v1/models',
      'http://c.test/v1/models',
      'http://d.test/v1/engine/v1/models',
      'http://e.test/v1/models',
    ])
    const reasons: string[] = []
    const bodiless = engine([() => new Response(null, { status: 502 })])
    await discoverServedModel('http://f.test', { timeoutMs: 100, fetch: bodiless.fetcher, onFailure: (reason) => reasons.push(reason) })
    expect(reasons).toEqual(['GET http://f.test/v1/models answered 502'])
  })
})
