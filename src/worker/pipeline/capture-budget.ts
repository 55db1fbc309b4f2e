/**
 * @module
 * Will this call's capture fit in the one Durable Object RPC that commits it? Checked before the engine is
 * called: a call that could not be captured is refused with a 413 in the caller's shape, never answered
 * and then lost. workerd refuses RPC arguments over 32 MiB (structured clone: a string costs one byte per
 * character when every character is Latin-1, else two).
 *
 * The bound: both bodies as sent to the session (the engine body travels as a delta of the harness's
 * body when it is one, see `completion-input.ts`), plus 12 bytes per token the engine can return (a
 * prompt or sampled id as uint32, a logprob as float64) for the whole window — the session's
 * `max_model_len`; when the window is unknown, one token per character of the engine body, at most
 * `UNKNOWN_WINDOW_TOKENS` (no served model has a larger window) — plus a reserve for the record's small
 * fields and the sampled message. A hosted `openai` upstream returns no token data. Long prompts' ids travel
 * as the engine's JSON text (`prompt-ids-text.ts`): at most 12 bytes per id too (≤ 10 digits and `, `).
 */
import type { TextDelta } from '../../durable/session/text-delta.ts'

export const RPC_ARGUMENT_LIMIT_BYTES = 32 * 1024 * 1024
/** Everything in a record but the bodies and token arrays (ids, usage, provenance, response message…). */
export const RECORD_RESERVE_BYTES = 1024 * 1024
const BYTES_PER_TOKEN = 12
/** Window assumed when the session does not know its engine's `max_model_len`. */
export const UNKNOWN_WINDOW_TOKENS = 1024 * 1024

/** Serialized size of a string in a structured clone (V8: Latin-1 strings one byte per char, others two). */
export function serializedStringBytes(text: string): number {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: the Latin-1 range is the point
  return /[^\u0000-\u00ff]/.test(text) ? text.length * 2 : text.length
}

export interface CaptureSize {
  bytes: number
  limit: number
}

export interface CaptureInput {
  originalText: string
  requestText: string
  requestDelta: TextDelta | null
  maxModelLen: number | null
  /** A hosted `openai` upstream returns text only. */
  tokenData: boolean
}

export function captureSize(input: CaptureInput): CaptureSize & { windowTokens: number } {
  const texts =
    serializedStringBytes(input.originalText) +
    (input.requestDelta ? serializedStringBytes(input.requestDelta.middle) : serializedStringBytes(input.requestText))
  const windowTokens = input.tokenData ? (input.maxModelLen ?? Math.min(input.requestText.length, UNKNOWN_WINDOW_TOKENS)) : 0
  return { bytes: texts + BYTES_PER_TOKEN * windowTokens + RECORD_RESERVE_BYTES, limit: RPC_ARGUMENT_LIMIT_BYTES, windowTokens }
}
