import { describe, expect, it } from 'vitest'
import { applyTextDelta } from '../../../src/durable/session/text-delta.ts'
import {
  buildEngineRequest,
  clampedBudgets,
  clampWarning,
  engineRequestSplice,
  engineRequestText,
} from '../../../src/normalize/engine/engine-request.ts'
import type { ChatRequest } from '../../../src/normalize/types.ts'

const text = JSON.stringify({ model: 'claude', messages: [{ role: 'user', content: 'x'.repeat(3000) }], max_tokens: 128000, stream: true })
const request = JSON.parse(text) as ChatRequest

describe('engine request', () => {
  it('clamps an output budget that cannot fit the engine window, bounding the prompt by its size', () => {
    const options = { kind: 'vllm' as const, servedModel: 'Qwen/Qwen3-8B', maxModelLen: 32768, promptChars: text.length }
    const body = buildEngineRequest(request, options)
    const room = 32768 - Math.ceil(text.length / 3) - 1024
    expect(body.max_tokens).toBe(room)
    expect(clampedBudgets(request, body)).toEqual({ max_tokens: room })
    // The warning carries the requested value as well as the new one.
    expect(clampWarning(request, body, 32768)).toEqual({
      code: 'max_tokens_clamped',
      message: `output budget clamped to fit the engine's 32768-token window: max_tokens 128000 → ${room}`,
    })
    expect(clampWarning(request, { ...body, max_tokens: 128000 }, 32768)).toBeNull()
    // The spliced upstream text carries the clamp as a trailing override (last duplicate key wins).
    const sent = JSON.parse(engineRequestText(body, { request, body: request, text }, options)) as Record<string, unknown>
    expect(sent).toMatchObject({ max_tokens: room, stream: false, model: 'Qwen/Qwen3-8B', return_token_ids: true })
  })

  it('leaves budgets alone when they fit or the window is unknown', () => {
    const small = { ...request, max_tokens: 1000 }
    expect(buildEngineRequest(small, { kind: 'vllm', servedModel: null, maxModelLen: 32768, promptChars: text.length }).max_tokens).toBe(
      1000,
    )
    expect(buildEngineRequest(request, { kind: 'vllm', servedModel: null }).max_tokens).toBe(128000)
  })

  it('says how a spliced text was made: the original cut at `at` plus `insert` (the delta the session stores)', () => {
    const options = { kind: 'vllm' as const, servedModel: 'Qwen/Qwen3-8B' }
    const padded = `${text}\n  `
    const body = buildEngineRequest(request, options)
    const { text: sent, splice } = engineRequestSplice(body, { request, body: request, text: padded }, options)
    expect(splice).not.toBeNull()
    if (!splice) return
    expect(sent).toBe(engineRequestText(body, { request, body: request, text: padded }, options))
    expect(applyTextDelta(padded, { prefix: splice.at, suffix: 0, middle: splice.insert })).toBe(sent)
    expect(splice.insert.length).toBeLessThan(200)
    // A body that had to change (here: a different messages array) is re-serialized, no splice.
    const changed = { ...body, messages: [...body.messages] }
    expect(engineRequestSplice(changed, { request, body: request, text }, options)).toEqual({ text: JSON.stringify(changed), splice: null })
  })
})
