/**
 * @module
 * Token text for people (the dashboard's trajectory view): segments of token ids turned into text by
 * the engine's `POST /detokenize` (vLLM and the stand-in engine: `{model?, tokens}` → `{prompt}`).
 * Display only: never recorded. When the engine cannot be reached (a runner-only deployment, an
 * `openai` upstream without the endpoint) the texts are null and the caller shows token counts instead.
 */
import type { UpstreamConfig } from '../../durable/session/record.ts'

const DETOKENIZE_TIMEOUT_MS = 15_000
/** Segments detokenized at once (each is one engine call). */
const CONCURRENCY = 8

export function detokenizeUrl(upstreamUrl: string): string {
  return `${upstreamUrl.replace(/\/+$/, '').replace(/\/v1$/, '')}/detokenize`
}

export async function detokenizeSegments(
  upstream: UpstreamConfig,
  segments: readonly (readonly number[])[],
  options: { apiKey: string | null; fetch?: typeof fetch },
): Promise<(string | null)[]> {
  const texts: (string | null)[] = segments.map(() => null)
  if (upstream.kind === 'openai' || !/^https?:/.test(upstream.url)) return texts
  const call = options.fetch ?? fetch
  const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json' }
  if (options.apiKey) headers.authorization = `Bearer ${options.apiKey}`
  let next = 0
  let unreachable = false
  const worker = async () => {
    while (next < segments.length && !unreachable) {
      const index = next++
      const tokens = segments[index] as readonly number[]
      if (tokens.length === 0) {
        texts[index] = ''
        continue
      }
      try {
        const response = await call(detokenizeUrl(upstream.url), {
          method: 'POST',
          headers,
          body: JSON.stringify({ ...(upstream.served_model ? { model: upstream.served_model } : {}), tokens }),
          signal: AbortSignal.timeout(DETOKENIZE_TIMEOUT_MS),
        })
        if (!response.ok) {
          await response.body?.cancel()
          unreachable = true
          continue
        }
        const body = (await response.json()) as { prompt?: unknown }
        texts[index] = typeof body.prompt === 'string' ? body.prompt : null
      } catch {
        unreachable = true
      }
    }
  }
  await Promise.all(Array.from({ length: Math.min(CONCURRENCY, segments.length) }, worker))
  return texts
}
