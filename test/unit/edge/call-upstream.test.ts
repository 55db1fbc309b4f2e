import { describe, expect, it } from 'vitest'
import { callUpstream } from '../../../src/worker/pipeline/call-upstream.ts'

const upstream = { url: 'http://127.0.0.1:9', kind: 'vllm' as const, served_model: null }
const ok = {
  id: 'chatcmpl-1',
  model: 'Qwen/Qwen3-8B',
  prompt_token_ids: [1, 2, 3],
  choices: [
    {
      index: 0,
      message: { role: 'assistant', content: 'hi', reasoning: 'think' },
      finish_reason: 'stop',
      stop_reason: null,
      token_ids: [5, 151645],
      logprobs: {
        content: [
          { token: 'hi', logprob: -0.5 },
          { token: '<|im_end|>', logprob: -0.25 },
        ],
      },
    },
  ],
  usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 },
}

function fetchReturning(response: Response | Error, delayMs = 0): typeof fetch {
  return (async (_url: RequestInfo | URL, init?: RequestInit) => {
    await new Promise((resolve, reject) => {
      const timer = setTimeout(resolve, delayMs)
      init?.signal?.addEventListener('abort', () => {
        clearTimeout(timer)
        reject(new DOMException('aborted', 'AbortError'))
      })
    })
    if (response instanceof Error) throw response
    return response
  }) as typeof fetch
}

describe('callUpstream', () => {
  it('normalizes a vLLM answer with token ids, aligned logprobs and reasoning', async () => {
    const outcome = await callUpstream({ upstream, body: '{}', apiKey: null, timeoutMs: 1000, fetch: fetchReturning(Response.json(ok)) })
    expect(outcome.ok).toBe(true)
    if (!outcome.ok) return
    expect(outcome.completion).toMatchObject({
      promptTokenIds: [1, 2, 3],
      responseTokenIds: [5, 151645],
      responseLogprobs: [-0.5, -0.25],
      message: { content: 'hi', reasoning_content: 'think' },
      finishReason: { unified: 'stop', raw: 'stop' },
    })
  })

  it('drops logprobs that do not align with the sampled ids instead of padding them', async () => {
    const misaligned = structuredClone(ok)
    misaligned.choices[0]!.logprobs.content.pop()
    const outcome = await callUpstream({
      upstream,
      body: '{}',
      apiKey: null,
      timeoutMs: 1000,
      fetch: fetchReturning(Response.json(misaligned)),
    })
    expect(outcome.ok && outcome.completion.responseLogprobs).toBeNull()
  })

  it('reads SGLang meta_info when the engine gives no token_ids', async () => {
    const sglang = structuredClone(ok) as Record<string, unknown> & { choices: Record<string, unknown>[] }
    delete sglang.prompt_token_ids
    const choice = sglang.choices[0]!
    delete choice.token_ids
    delete choice.logprobs
    choice.input_token_ids = [9, 8]
    choice.meta_info = {
      output_token_logprobs: [
        [-1.5, 5, 'hi'],
        [-0.75, 151645, null],
      ],
    }
    const outcome = await callUpstream({
      upstream,
      body: '{}',
      apiKey: null,
      timeoutMs: 1000,
      fetch: fetchReturning(Response.json(sglang)),
    })
    expect(outcome.ok && outcome.completion).toMatchObject({
      promptTokenIds: [9, 8],
      responseTokenIds: [5, 151645],
      responseLogprobs: [-1.5, -0.75],
    })
  })

  it('keeps retryable upstream statuses and their message', async () => {
    const outcome = await callUpstream({
      upstream,
      body: '{}',
      apiKey: null,
      timeoutMs: 1000,
      fetch: fetchReturning(Response.json({ error: { message: 'slow down' } }, { status: 429 })),
    })
    expect(outcome).toMatchObject({ ok: false, error: { status: 429, kind: 'rate_limit', message: 'slow down' } })
  })

  it('maps a timeout to 504, a transport failure and a garbled body to 502', async () => {
    const timeout = await callUpstream({ upstream, body: '{}', apiKey: null, timeoutMs: 50, fetch: fetchReturning(Response.json(ok), 500) })
    expect(timeout).toMatchObject({ ok: false, error: { status: 504, kind: 'timeout' } })
    const reset = await callUpstream({
      upstream,
      body: '{}',
      apiKey: null,
      timeoutMs: 1000,
      fetch: fetchReturning(new TypeError('socket hang up')),
    })
    expect(reset).toMatchObject({
      ok: false,
      error: { status: 502, kind: 'upstream', message: 'engine unreachable at http://127.0.0.1:9 (socket hang up)' },
      aborted: false,
    })
    const garbled = await callUpstream({
      upstream,
      body: '{}',
      apiKey: null,
      timeoutMs: 1000,
      fetch: fetchReturning(new Response('{"choices": [')),
    })
    expect(garbled).toMatchObject({ ok: false, error: { status: 502 } })
    const noChoices = await callUpstream({
      upstream,
      body: '{}',
      apiKey: null,
      timeoutMs: 1000,
      fetch: fetchReturning(Response.json({ choices: [] })),
    })
    expect(noChoices).toMatchObject({ ok: false, error: { status: 502, message: expect.stringContaining('choices[0]') } })
  })

  it('reports a client abort as aborted, not as an upstream failure', async () => {
    const controller = new AbortController()
    setTimeout(() => controller.abort(), 20)
    const outcome = await callUpstream({
      upstream,
      body: '{}',
      apiKey: null,
      timeoutMs: 5000,
      signal: controller.signal,
      fetch: fetchReturning(Response.json(ok), 1000),
    })
    expect(outcome).toMatchObject({ ok: false, aborted: true })
  })
})
