/**
 * @module engine/engine-context
 * What request handlers need from the running engine: tokenizer, active policy, seed and the
 * served-model settings. The server swaps `policy`/`seed` when `/_stand-in/policy` is called.
 */

import type { Policy } from './policy/policy.ts'
import type { Qwen3 } from './qwen3.ts'

export interface EngineContext {
  qwen3: Qwen3
  policy: Policy
  seed: number
  servedModel: string
  maxModelLen: number
  /** Accept any `model` value instead of answering 404 like vLLM. */
  acceptAnyModel: boolean
}

/** Response metadata fixed per HTTP request (fresh ids even when the generation is cached). */
export interface ResponseMeta {
  id: string
  created: number
  model: string
}
