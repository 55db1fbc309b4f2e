/**
 * @module engine/policy/script
 * Script mode: a JSON list of assistant turns replayed in order. The turn for a request is the
 * number of assistant messages already in it, so each conversation walks the script from the
 * start and retries of the same request get the same turn. Past the end: `Done.`.
 */

import { z } from 'zod'
import { assistantText } from './assistant-text.ts'
import type { Policy } from './policy.ts'

export const scriptTurnSchema = z.object({
  content: z.string().optional(),
  reasoning: z.string().optional(),
  tool_calls: z.array(z.object({ name: z.string().min(1), arguments: z.unknown().optional() })).optional(),
})
export const scriptSchema = z.array(scriptTurnSchema)
export type ScriptTurn = z.infer<typeof scriptTurnSchema>

const EXHAUSTED_TURN: ScriptTurn = { content: 'Done.' }

export function createScriptPolicy(turns: readonly ScriptTurn[]): Policy {
  return {
    name: 'script',
    generate(input) {
      const turnIndex = input.messages.filter((message) => message.role === 'assistant').length
      const turn = turns[turnIndex] ?? EXHAUSTED_TURN
      return {
        text: assistantText({
          enableThinking: input.enableThinking,
          reasoning: turn.reasoning,
          content: turn.content,
          toolCalls: turn.tool_calls?.map((call) => ({
            name: call.name,
            arguments: parseArguments(call.arguments),
          })),
        }),
      }
    },
  }
}

/** Arguments may be given as an object or as a JSON string. */
function parseArguments(raw: unknown): unknown {
  if (raw === undefined || raw === null) return {}
  if (typeof raw !== 'string') return raw
  try {
    return JSON.parse(raw)
  } catch {
    return raw
  }
}
