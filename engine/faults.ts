/**
 * @module engine/faults
 * Fault injection for tests of a capturing proxy: a FIFO of faults applied to the next
 * `/v1/chat/completions` and `/v1/completions` requests, one per request.
 * - `{status, body?, headers?}` answers with that status (body defaults to a vLLM error);
 * - `{delay_ms}` waits before answering (combinable with the others);
 * - `{reset: true}` destroys the socket without answering;
 * - `{truncate: true}` sends headers and half the body (half the SSE frames when streaming),
 *   then destroys the socket.
 */

import { z } from 'zod'

export const faultSchema = z
  .object({
    status: z.number().int().min(100).max(599).optional(),
    body: z.unknown().optional(),
    headers: z.record(z.string(), z.string()).optional(),
    delay_ms: z.number().min(0).max(600_000).optional(),
    reset: z.boolean().optional(),
    truncate: z.boolean().optional(),
  })
  .strict()
export type Fault = z.infer<typeof faultSchema>
export const faultListSchema = z.union([faultSchema.transform((fault) => [fault]), z.array(faultSchema)])

export class FaultQueue {
  readonly #queue: Fault[] = []
  applied = 0

  push(faults: readonly Fault[]): void {
    this.#queue.push(...faults)
  }

  clear(): number {
    const cleared = this.#queue.length
    this.#queue.length = 0
    return cleared
  }

  /** The fault for the next generation request, if any. */
  take(): Fault | undefined {
    const fault = this.#queue.shift()
    if (fault !== undefined) this.applied++
    return fault
  }

  get pending(): readonly Fault[] {
    return this.#queue
  }
}
