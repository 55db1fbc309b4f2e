/**
 * @module engine/logprob-format
 * Logprobs in vLLM's wire shapes: chat `logprobs.content[] {token, logprob, bytes, top_logprobs}`
 * (one entry per sampled id, `bytes` = UTF-8 of the token string) and completions
 * `{text_offset, token_logprobs, tokens, top_logprobs}` (`top_logprobs` = sampled token + N
 * alternatives keyed by token text).
 */

import type { LogprobCandidate, TokenLogprob } from './logprobs.ts'
import type { Qwen3 } from './qwen3.ts'

export interface ChatLogprobEntry {
  token: string
  logprob: number
  bytes: number[]
  top_logprobs: Array<{ token: string; logprob: number; bytes: number[] }>
}

export interface CompletionLogprobs {
  text_offset: number[]
  token_logprobs: number[]
  tokens: string[]
  top_logprobs: Array<Record<string, number>>
}

export function tokenLabel(qwen3: Qwen3, id: number, asTokenIds: boolean): string {
  return asTokenIds ? `token_id:${id}` : qwen3.tokenText(id)
}

function candidateEntry(qwen3: Qwen3, candidate: LogprobCandidate, asTokenIds: boolean) {
  const token = tokenLabel(qwen3, candidate.id, asTokenIds)
  return { token, logprob: candidate.logprob, bytes: [...Buffer.from(token, 'utf8')] }
}

export function chatLogprobContent(qwen3: Qwen3, logprobs: readonly TokenLogprob[], asTokenIds: boolean): ChatLogprobEntry[] {
  return logprobs.map((entry) => ({
    ...candidateEntry(qwen3, entry, asTokenIds),
    top_logprobs: entry.top.map((candidate) => candidateEntry(qwen3, candidate, asTokenIds)),
  }))
}

export function completionLogprobs(
  qwen3: Qwen3,
  logprobs: readonly TokenLogprob[],
  topCount: number,
  asTokenIds: boolean,
  initialOffset = 0,
): CompletionLogprobs {
  const result: CompletionLogprobs = {
    text_offset: [],
    token_logprobs: [],
    tokens: [],
    top_logprobs: [],
  }
  let offset = initialOffset
  for (const entry of logprobs) {
    const token = tokenLabel(qwen3, entry.id, asTokenIds)
    result.text_offset.push(offset)
    offset += [...token].length
    result.tokens.push(token)
    result.token_logprobs.push(entry.logprob)
    const top: Record<string, number> = { [token]: entry.logprob }
    for (const candidate of entry.top) {
      if (Object.keys(top).length > topCount) break
      const label = tokenLabel(qwen3, candidate.id, asTokenIds)
      if (!(label in top)) top[label] = candidate.logprob
    }
    result.top_logprobs.push(top)
  }
  return result
}
