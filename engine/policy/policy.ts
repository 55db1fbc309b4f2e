/**
 * @module engine/policy/policy
 * The contract every stand-in policy implements: given the conversation, the offered tools and
 * the thinking switch, return the assistant text to emit (reasoning + content + tool-call
 * blocks, without the final `<|im_end|>`). The server tokenizes it, truncates, appends EOS,
 * computes logprobs and parses it like vLLM would. A policy may also return the exact token ids
 * it "sampled" (drift mode), which must decode to `text`.
 */

import type { TemplateMessage } from '../chat-template-input.ts'
import type { Rng } from '../rng.ts'

export type JsonSchema = Record<string, unknown>

/** A tool offered in the request, reduced to what a policy needs. */
export interface ToolSpec {
  name: string
  description: string
  /** JSON schema of the arguments; `null` for freeform (custom) tools. */
  parameters: JsonSchema | null
  /** Custom/freeform tool (e.g. Codex `apply_patch` with a grammar). */
  freeform: boolean
}

export interface ResponseFormat {
  type: 'text' | 'json_object' | 'json_schema'
  schema: JsonSchema | null
}

export interface PolicyInput {
  /** Messages as the chat template sees them (string content, parsed tool arguments). */
  messages: TemplateMessage[]
  tools: ToolSpec[]
  /** Qwen3 thinks unless `chat_template_kwargs.enable_thinking` is `false`. */
  enableThinking: boolean
  responseFormat: ResponseFormat | null
  /** Seeded from (seed, prompt hash, choice index): identical requests → identical output. */
  rng: Rng
}

export interface PolicyOutput {
  text: string
  /** Sampled ids when they are not `encode(text)`; must satisfy `decode(tokenIds) === text`. */
  tokenIds?: number[]
}

export interface Policy {
  readonly name: string
  generate(input: PolicyInput): PolicyOutput
}
