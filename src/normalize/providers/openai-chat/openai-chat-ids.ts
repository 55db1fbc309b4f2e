/**
 * @module
 * Deterministic OpenAI chat tool-call ids derived from the recorded completion's id, like every other
 * adapter's (docs/polar-compat.md §11): a replayed `tool_calls[].id` leads back to the sampled completion.
 */

/** `call_<completionId>_<index>`. */
export function chatToolCallId(completionId: string, index: number): string {
  return `call_${completionId}_${index}`
}
