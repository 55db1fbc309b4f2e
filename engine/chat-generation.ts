/**
 * @module engine/chat-generation
 * Chat completions: render the Qwen3 template exactly as vLLM would, tokenize, and sample.
 * `prompt.ids` is by construction `encode(renderChat(messages, {tools, addGenerationPrompt,
 * enableThinking}))`, the same ids `/tokenize` returns for those messages.
 */

import type { ChatRequest } from './chat-request.ts'
import { normalizeMessages, TemplateInputError, type TemplateMessage } from './chat-template-input.ts'
import type { EngineContext } from './engine-context.ts'
import { badRequest } from './errors.ts'
import { createPrompt, type GeneratedChoice, type Prompt, resolveMaxTokens, sampleChoices } from './generation.ts'
import { toToolSpecs } from './policy/assistant-text.ts'
import type { Qwen3 } from './qwen3.ts'

export interface ChatGeneration {
  prompt: Prompt
  choices: GeneratedChoice[]
}

export interface ChatPromptOptions {
  tools: unknown[] | null
  addGenerationPrompt: boolean
  templateKwargs: Record<string, unknown> | null
}

/** Normalize + render, mapping template problems to vLLM-style 400s. */
export function renderChatPrompt(
  qwen3: Qwen3,
  rawMessages: unknown[],
  options: ChatPromptOptions,
): { messages: TemplateMessage[]; text: string } {
  try {
    const messages = normalizeMessages(rawMessages as Parameters<typeof normalizeMessages>[0])
    const text = qwen3.renderTemplateMessages(messages, {
      tools: options.tools,
      addGenerationPrompt: options.addGenerationPrompt,
      templateKwargs: options.templateKwargs,
    })
    return { messages, text }
  } catch (error) {
    if (error instanceof TemplateInputError) throw badRequest(error.message, 'messages')
    throw badRequest(`Error rendering chat template: ${(error as Error).message}`, 'messages')
  }
}

export function generateChat(context: EngineContext, request: ChatRequest): ChatGeneration {
  const { messages, text } = renderChatPrompt(context.qwen3, request.messages, request)
  const prompt = createPrompt(context.qwen3.encode(text))
  const maxTokens = resolveMaxTokens(prompt.ids.length, request.maxTokens, context.maxModelLen)
  const choices = sampleChoices(context, {
    prompt,
    policyInput: {
      messages,
      tools: toToolSpecs(request.tools),
      enableThinking: request.enableThinking,
      responseFormat: request.responseFormat,
    },
    n: request.n,
    seed: request.seed ?? context.seed,
    rules: {
      maxTokens,
      stop: request.stop,
      stopTokenIds: request.stopTokenIds,
      includeStopStrInOutput: request.includeStopStrInOutput,
      skipSpecialTokens: request.skipSpecialTokens,
    },
    topLogprobs: request.logprobs ? request.topLogprobs : null,
    parse: { parseToolCalls: request.parseToolCalls },
  })
  return { prompt, choices }
}
