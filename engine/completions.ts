/**
 * @module engine/completions
 * `POST /v1/completions`: string or token-list prompts (`int[]`, or lists of either for a
 * batch), vLLM completion choices (`text`, `prompt_token_ids`, `token_ids`, `stop_reason`,
 * `logprobs{text_offset, token_logprobs, tokens, top_logprobs}`), streaming included. No tool or
 * reasoning parsing, like vLLM. A prompt that is a rendered chat is turned back into messages
 * so the policy still answers like an agent.
 */

import { isRecord } from './chat-template-input.ts'
import { checkModel } from './chat-request.ts'
import { randomHex, usageJson } from './chat-response.ts'
import { DONE_FRAME, sseFrame, tokenPieces } from './chat-stream.ts'
import type { EngineContext, ResponseMeta } from './engine-context.ts'
import { badRequest } from './errors.ts'
import { createPrompt, type GeneratedChoice, type Prompt, resolveMaxTokens, sampleChoices } from './generation.ts'
import { completionLogprobs } from './logprob-format.ts'
import { toToolSpecs } from './policy/assistant-text.ts'
import type { Qwen3 } from './qwen3.ts'
import { MAX_TOP_LOGPROBS, readBoolean, readInteger, readSamplingFields, type SamplingFields } from './request-fields.ts'
import { parseTranscript } from './transcript.ts'

export interface CompletionRequest extends SamplingFields {
  prompts: Array<number[] | string>
  /** Completions `logprobs` is the number of alternatives (0 = sampled token only). */
  logprobs: number | null
  echo: boolean
}

export interface CompletionGeneration {
  prompts: Prompt[]
  /** One entry per prompt × n, in choice-index order. */
  choices: Array<GeneratedChoice & { promptIndex: number }>
}

export function parseCompletionRequest(body: unknown, context: EngineContext): CompletionRequest {
  if (!isRecord(body)) throw badRequest('Request body must be a JSON object')
  checkModel(body, context)
  return {
    ...readSamplingFields(body),
    prompts: readPrompts(body.prompt),
    logprobs: readInteger(body, 'logprobs', { min: 0, max: MAX_TOP_LOGPROBS }),
    echo: readBoolean(body, 'echo', false),
  }
}

function readPrompts(prompt: unknown): Array<number[] | string> {
  const isIds = (value: unknown): value is number[] =>
    Array.isArray(value) && value.length > 0 && value.every((entry) => Number.isInteger(entry))
  if (typeof prompt === 'string') return [prompt]
  if (isIds(prompt)) return [prompt]
  if (Array.isArray(prompt) && prompt.length > 0) {
    if (prompt.every((entry) => typeof entry === 'string')) return prompt as string[]
    if (prompt.every(isIds)) return prompt
  }
  throw badRequest("'prompt' must be a string, a list of token ids, or a list of either", 'prompt')
}

export function generateCompletion(context: EngineContext, request: CompletionRequest): CompletionGeneration {
  const { qwen3 } = context
  const prompts: Prompt[] = []
  const choices: CompletionGeneration['choices'] = []
  request.prompts.forEach((raw, promptIndex) => {
    const ids = typeof raw === 'string' ? qwen3.encode(raw) : checkIds(qwen3, raw)
    const prompt = createPrompt(ids)
    prompts.push(prompt)
    const maxTokens = resolveMaxTokens(ids.length, request.maxTokens, context.maxModelLen)
    const promptText = typeof raw === 'string' ? raw : qwen3.decode(ids)
    const transcript = parseTranscript(promptText)
    const sampled = sampleChoices(context, {
      prompt,
      policyInput:
        transcript === null
          ? {
              messages: [{ role: 'user', content: promptText }],
              tools: [],
              enableThinking: false,
              responseFormat: null,
            }
          : {
              messages: transcript.messages,
              tools: toToolSpecs(transcript.tools),
              enableThinking: transcript.enableThinking,
              responseFormat: null,
            },
      n: request.n,
      seed: request.seed ?? context.seed,
      rules: { ...request, maxTokens },
      topLogprobs: request.logprobs,
      parse: null,
    })
    for (const choice of sampled) {
      choices.push({ ...choice, index: choices.length, promptIndex })
    }
  })
  return { prompts, choices }
}

function checkIds(qwen3: Qwen3, ids: number[]): number[] {
  for (const id of ids) {
    if (id < 0 || id >= qwen3.vocabSize) {
      throw badRequest(`Token id ${id} is out of vocabulary`, 'prompt')
    }
  }
  return ids
}

function choiceLogprobs(qwen3: Qwen3, choice: GeneratedChoice, request: CompletionRequest) {
  if (choice.logprobs === null || request.logprobs === null) return null
  return completionLogprobs(qwen3, choice.logprobs, request.logprobs, request.returnTokensAsTokenIds)
}

export function renderCompletion(qwen3: Qwen3, generation: CompletionGeneration, request: CompletionRequest, meta: ResponseMeta): string {
  const choices = generation.choices.map((choice) => {
    const prompt = generation.prompts[choice.promptIndex]
    const echoed = request.echo && prompt !== undefined ? qwen3.decode(prompt.ids, { skipSpecialTokens: request.skipSpecialTokens }) : ''
    return {
      index: choice.index,
      text: echoed + choice.text,
      logprobs: choiceLogprobs(qwen3, choice, request),
      finish_reason: choice.finishReason,
      stop_reason: choice.stopReason,
      token_ids: request.returnTokenIds ? choice.ids : null,
      prompt_logprobs: null,
      prompt_token_ids: request.returnTokenIds && prompt !== undefined ? prompt.ids : null,
    }
  })
  return JSON.stringify({
    id: meta.id,
    object: 'text_completion',
    created: meta.created,
    model: meta.model,
    choices,
    service_tier: null,
    system_fingerprint: null,
    usage: JSON.parse(usageJson(promptTokens(generation, request), completionTokens(generation), true)),
    kv_transfer_params: null,
  })
}

function promptTokens(generation: CompletionGeneration, request: CompletionRequest): number {
  return generation.prompts.reduce((sum, prompt) => sum + prompt.ids.length, 0) * request.n
}

function completionTokens(generation: CompletionGeneration): number {
  return generation.choices.reduce((sum, choice) => sum + choice.ids.length, 0)
}

export function completionStreamFrames(
  qwen3: Qwen3,
  generation: CompletionGeneration,
  request: CompletionRequest,
  meta: ResponseMeta,
): string[] {
  const head = `{"id":${JSON.stringify(meta.id)},"object":"text_completion","created":${meta.created},"model":${JSON.stringify(meta.model)}`
  const frames: string[] = []
  for (const choice of generation.choices) {
    const prompt = generation.prompts[choice.promptIndex]
    const pieces =
      tokenPieces(qwen3, choice.ids, choice.text, request.skipSpecialTokens) ??
      choice.ids.map((_, index) => (index === choice.ids.length - 1 ? choice.text : ''))
    const logprobs = choiceLogprobs(qwen3, choice, request)
    choice.ids.forEach((id, position) => {
      const last = position === choice.ids.length - 1
      const body: Record<string, unknown> = {
        index: choice.index,
        text: pieces[position] ?? '',
        logprobs:
          logprobs === null
            ? null
            : {
                text_offset: logprobs.text_offset.slice(position, position + 1),
                token_logprobs: logprobs.token_logprobs.slice(position, position + 1),
                tokens: logprobs.tokens.slice(position, position + 1),
                top_logprobs: logprobs.top_logprobs.slice(position, position + 1),
              },
        finish_reason: last ? choice.finishReason : null,
        stop_reason: last ? choice.stopReason : null,
      }
      if (request.returnTokenIds) {
        body.token_ids = [id]
        if (position === 0 && prompt !== undefined) body.prompt_token_ids = prompt.ids
      }
      frames.push(sseFrame(`${head},"choices":[${JSON.stringify(body)}]}`))
    })
  }
  if (request.includeUsage) {
    const usage = usageJson(promptTokens(generation, request), completionTokens(generation), false)
    frames.push(sseFrame(`${head},"choices":[],"usage":${usage}}`))
  }
  frames.push(DONE_FRAME)
  return frames
}

export function completionId(): string {
  return `cmpl-${randomHex()}`
}
