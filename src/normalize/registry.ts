/**
 * @module
 * Every provider adapter, one line each. Detection walks this list in order.
 */
import type { ProviderAdapter } from './adapter.ts'
import { anthropic } from './providers/anthropic/index.ts'
import { google } from './providers/google/index.ts'
import { openaiChat } from './providers/openai-chat/index.ts'
import { openaiResponses } from './providers/openai-responses/index.ts'

export const adapters = [anthropic, openaiChat, openaiResponses, google] as const satisfies readonly ProviderAdapter[]

/** Path first, then headers (`docs/polar-compat.md` §8); null when no adapter claims the request. */
export function detectAdapter(url: URL, headers: Headers): ProviderAdapter | null {
  for (const adapter of adapters) if (adapter.matches(url, headers)) return adapter
  return null
}

export function adapterById(id: string): ProviderAdapter | null {
  return adapters.find((adapter) => adapter.id === id) ?? null
}
