/**
 * @module engine/chat-stream
 * Streaming `chat.completion.chunk` frames like vLLM's: a role chunk first (carrying
 * `prompt_token_ids` with `return_token_ids`), then one chunk per sampled token with its
 * `token_ids` delta and logprobs, deltas split into `reasoning` / `content` / `tool_calls`
 * (a tool call is sent whole when its `</tool_call>` token arrives), `finish_reason` on the last
 * token, an optional usage chunk, and `data: [DONE]`. Token text comes from an incremental UTF-8
 * decode of each token's bytes, so multi-byte characters split across tokens arrive whole.
 */

import type { ChatGeneration } from './chat-generation.ts'
import type { ChatRequest } from './chat-request.ts'
import { toolCallId, usageJson } from './chat-response.ts'
import type { ResponseMeta } from './engine-context.ts'
import type { GeneratedChoice } from './generation.ts'
import { chatLogprobContent } from './logprob-format.ts'
import type { TextRange } from './output-parser.ts'
import type { Qwen3 } from './qwen3.ts'

export const DONE_FRAME = 'data: [DONE]\n\n'

export function sseFrame(json: string): string {
  return `data: ${json}\n\n`
}

/** Text each token adds, decoding bytes incrementally; `null` if it disagrees with `text`. */
export function tokenPieces(qwen3: Qwen3, ids: readonly number[], text: string, skipSpecialTokens: boolean): string[] | null {
  const decoder = new TextDecoder('utf-8')
  const pieces = ids.map((id, index) => decoder.decode(qwen3.tokenBytes(id, skipSpecialTokens), { stream: index < ids.length - 1 }))
  return pieces.join('') === text ? pieces : null
}

function overlap(text: string, range: TextRange | null, start: number, end: number): string {
  if (range === null) return ''
  const from = Math.max(start, range.start)
  const to = Math.min(end, range.end)
  return to > from ? text.slice(from, to) : ''
}

export function chatStreamFrames(qwen3: Qwen3, generation: ChatGeneration, request: ChatRequest, meta: ResponseMeta): string[] {
  const head = `{"id":${JSON.stringify(meta.id)},"object":"chat.completion.chunk","created":${meta.created},"model":${JSON.stringify(meta.model)}`
  const promptTokens = generation.prompt.ids.length
  const frames: string[] = []
  let completionTokens = 0
  const chunk = (choice: Record<string, unknown>, extra = ''): string => {
    const usage = request.continuousUsage ? `,"usage":${usageJson(promptTokens, completionTokens, false)}` : ''
    return sseFrame(`${head},"choices":[${JSON.stringify(choice)}]${usage}${extra}}`)
  }

  generation.choices.forEach((choice, choiceNumber) => {
    const first = choiceNumber === 0 && request.returnTokenIds
    frames.push(
      chunk(
        {
          index: choice.index,
          delta: { role: 'assistant', content: '' },
          logprobs: null,
          finish_reason: null,
        },
        first ? `,"prompt_token_ids":${generation.prompt.json()}` : '',
      ),
    )
    for (const frame of tokenFrames(qwen3, choice, request)) {
      completionTokens += frame.tokenCount
      frames.push(chunk(frame.choice))
    }
  })
  if (request.includeUsage) {
    frames.push(sseFrame(`${head},"choices":[],"usage":${usageJson(promptTokens, completionTokens, false)}}`))
  }
  frames.push(DONE_FRAME)
  return frames
}

interface TokenFrame {
  choice: Record<string, unknown>
  tokenCount: number
}

function tokenFrames(qwen3: Qwen3, choice: GeneratedChoice, request: ChatRequest): TokenFrame[] {
  const { ids, text } = choice
  const parsed = choice.parsed
  // Fallback (never expected): attribute all text to the last token.
  const pieces = tokenPieces(qwen3, ids, text, request.skipSpecialTokens) ?? ids.map((_, index) => (index === ids.length - 1 ? text : ''))
  const logprobs = choice.logprobs === null ? null : chatLogprobContent(qwen3, choice.logprobs, request.returnTokensAsTokenIds)
  const toolCalls = parsed?.toolCalls ?? []
  const frames: TokenFrame[] = []
  let pendingIds: number[] = []
  let pendingLogprobs: unknown[] = []
  let offset = 0
  ids.forEach((id, position) => {
    const start = offset
    offset += pieces[position]?.length ?? 0
    const last = position === ids.length - 1
    const delta: Record<string, unknown> = {}
    if (parsed === null) {
      if (offset > start) delta.content = text.slice(start, offset)
    } else {
      const content = overlap(text, parsed.contentRange, start, offset)
      if (content !== '') delta.content = content
      const reasoning = overlap(text, parsed.reasoningRange, start, offset)
      if (reasoning !== '' && request.includeReasoning) delta.reasoning = reasoning
      const finished = toolCalls
        .map((call, index) => ({ call, index }))
        .filter(({ call }) => (call.range.end > start && call.range.end <= offset) || (last && call.range.end > offset))
      if (finished.length > 0) {
        delta.tool_calls = finished.map(({ call, index }) => ({
          index,
          id: toolCallId(),
          type: 'function',
          function: { name: call.name, arguments: call.arguments },
        }))
      }
    }
    pendingIds.push(id)
    const entry = logprobs?.[position]
    if (entry !== undefined) pendingLogprobs.push(entry)
    const visible = Object.keys(delta).length > 0
    // Without token ids or logprobs to carry, vLLM skips tokens that produce no delta.
    if (!visible && !last && !request.returnTokenIds && logprobs === null) return
    const frame: Record<string, unknown> = {
      index: choice.index,
      delta,
      logprobs: logprobs === null ? null : { content: pendingLogprobs },
      finish_reason: last ? choice.finishReason : null,
    }
    if (last) frame.stop_reason = choice.stopReason
    if (request.returnTokenIds) frame.token_ids = pendingIds
    frames.push({ choice: frame, tokenCount: pendingIds.length })
    pendingIds = []
    pendingLogprobs = []
  })
  return frames
}
