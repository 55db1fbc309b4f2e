/**
 * @module
 * Count a prompt with the engine's `POST /tokenize` (vLLM chat form: `messages` + `tools` +
 * `add_generation_prompt`), the exact and cheap answer to count-tokens calls (docs/wire-protocols.md §5.4).
 * Never a generation and never recorded. Harnesses use the count only as a hint, so when the engine
 * has no tokenizer endpoint the answer falls back to a character estimate and says so.
 */
import type { UpstreamConfig } from '../../durable/session/record.ts'
import type { TokenizeRequest } from '../../normalize/types.ts'

/** Tokenizing is fast; do not hold a harness for the inference read timeout. */
const TOKENIZE_TIMEOUT_MS = 30_000
/** Rough characters per token for the fallback estimate (English prose and code, BPE tokenizers). */
const CHARS_PER_TOKEN = 4

export interface PromptTokenCount {
  inputTokens: number
  /** `tokenize` when the engine counted, `estimate` when it could not. */
  source: 'tokenize' | 'estimate'
}

export function tokenizeUrl(upstreamUrl: string): string {
  return `${upstreamUrl.replace(/\/+$/, '').replace(/\/v1$/, '')}/tokenize`
}

export async function countPromptTokens(
  upstream: UpstreamConfig,
  body: TokenizeRequest,
  options: { apiKey: string | null; fetch?: typeof fetch },
): Promise<PromptTokenCount> {
  const request: TokenizeRequest = upstream.served_model ? { ...body, model: upstream.served_model } : body
  if (upstream.kind !== 'openai') {
    const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json' }
    if (options.apiKey) headers.authorization = `Bearer ${options.apiKey}`
    try {
      const response = await (options.fetch ?? fetch)(tokenizeUrl(upstream.url), {
        method: 'POST',
        headers,
        body: JSON.stringify(request),
        signal: AbortSignal.timeout(TOKENIZE_TIMEOUT_MS),
      })
      if (response.ok) {
        const json = (await response.json()) as { count?: unknown; tokens?: unknown }
        if (typeof json.count === 'number') return { inputTokens: json.count, source: 'tokenize' }
        if (Array.isArray(json.tokens)) return { inputTokens: json.tokens.length, source: 'tokenize' }
      } else {
        await response.body?.cancel()
      }
    } catch {
      // Fall through to the estimate.
    }
  }
  const characters = JSON.stringify(request.messages).length + (request.tools ? JSON.stringify(request.tools).length : 0)
  return { inputTokens: Math.ceil(characters / CHARS_PER_TOKEN), source: 'estimate' }
}
