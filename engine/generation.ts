/**
 * @module engine/generation
 * The stand-in "forward pass": checks the context window, asks the policy for each choice's
 * text, turns it into sampled ids, applies stop rules, computes seeded logprobs and (for chat)
 * parses reasoning and tool calls. Pure apart from the policy; results are cacheable.
 */

import type { EngineContext } from './engine-context.ts'
import { badRequest, EngineError } from './errors.ts'
import { computeLogprobs, type TokenLogprob } from './logprobs.ts'
import { type ParsedOutput, parseAssistantOutput } from './output-parser.ts'
import type { PolicyInput } from './policy/policy.ts'
import { combineHashes, createRng, hashIds } from './rng.ts'
import { finishSample, type StopRules } from './sampling.ts'

export type FinishReason = 'stop' | 'length' | 'tool_calls'

export interface GeneratedChoice {
  index: number
  ids: number[]
  text: string
  finishReason: FinishReason
  stopReason: string | number | null
  /** Chat only: reasoning / content / tool calls as vLLM's parsers see them. */
  parsed: ParsedOutput | null
  logprobs: TokenLogprob[] | null
}

export interface Prompt {
  ids: number[]
  hash: number
  /** `JSON.stringify(ids)`, computed once (prompts reach 100k ids). */
  json(): string
}

export function createPrompt(ids: number[]): Prompt {
  let json: string | undefined
  return { ids, hash: hashIds(ids), json: () => (json ??= JSON.stringify(ids)) }
}

/** vLLM's context checks: prompt < max_model_len and prompt + max_tokens ≤ max_model_len. */
export function resolveMaxTokens(promptLength: number, maxTokens: number | null, maxModelLen: number) {
  if (promptLength >= maxModelLen) {
    throw badRequest(
      `This model's maximum context length is ${maxModelLen} tokens. However, your request has ` +
        `${promptLength} input tokens. Please reduce the length of the input messages.`,
    )
  }
  if (maxTokens !== null && promptLength + maxTokens > maxModelLen) {
    throw badRequest(
      `This model's maximum context length is ${maxModelLen} tokens. However, you requested ` +
        `${promptLength + maxTokens} tokens (${promptLength} in the messages, ${maxTokens} in the ` +
        'completion). Please reduce the length of the messages or completion.',
    )
  }
  return maxTokens ?? maxModelLen - promptLength
}

export interface SampleOptions {
  prompt: Prompt
  policyInput: Omit<PolicyInput, 'rng'>
  n: number
  seed: number
  rules: StopRules
  /** Alternatives per position when logprobs are requested, else `null`. */
  topLogprobs: number | null
  /** Chat: parse reasoning/tool calls; `null` for raw completions. */
  parse: { parseToolCalls: boolean } | null
}

export function sampleChoices(context: EngineContext, options: SampleOptions): GeneratedChoice[] {
  const { qwen3, policy } = context
  const { prompt, seed } = options
  return Array.from({ length: options.n }, (_, index) => {
    const rng = createRng(combineHashes(seed, prompt.hash, index))
    let output: ReturnType<typeof policy.generate>
    try {
      output = policy.generate({ ...options.policyInput, rng })
    } catch (error) {
      throw new EngineError(500, `Policy ${policy.name} failed: ${(error as Error).message}`)
    }
    const sampled = output.tokenIds ?? qwen3.encode(output.text)
    const finished = finishSample(qwen3, sampled, options.rules)
    const parsed = options.parse === null ? null : parseAssistantOutput(finished.text, options.parse)
    const calledTools = parsed !== null && parsed.toolCalls.length > 0
    return {
      index,
      ids: finished.ids,
      text: finished.text,
      finishReason: finished.finishReason === 'stop' && calledTools ? 'tool_calls' : finished.finishReason,
      stopReason: finished.stopReason,
      parsed,
      logprobs:
        options.topLogprobs === null
          ? null
          : computeLogprobs(finished.ids, {
              seed,
              promptHash: prompt.hash,
              topCount: options.topLogprobs,
              regularVocabSize: qwen3.regularVocabSize,
              choiceIndex: index,
            }),
    }
  })
}
