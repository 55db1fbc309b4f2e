/**
 * @module
 * Undo a harness's schema-default fill-in on its replay of sampled tool calls, before parsing.
 *
 * Claude Code stores a tool call's input after validating it against the tool's schema, so the `tool_use`
 * it sends back in later requests carries the schema's defaults the model never wrote: the model sampled
 * `Edit {"file_path": …, "old_string": …, "new_string": …}` and the history says
 * `{"replace_all": false, "file_path": …}`. The re-rendered history then differs from the prompt + sampled
 * tokens (a `template_rewrite` break under the default `exact` preset) although the call means the same.
 *
 * A replayed `tool_use` is put back to the arguments the model sampled only when all of this holds:
 * its id is gateway-issued (`toolu_<completionId>_<index>`, so it names the completion and call); the
 * session recorded that completion with a call of the same name at that index; every sampled argument is
 * in the replay with an equal value; and every key the replay adds is a property whose schema `default`
 * (in this request's `tools`) equals the value sent. Any other difference is the harness's own edit and is
 * left as sent. The model then sees the call as it sampled it — same meaning, since the tool applies the
 * default — and the caller reports every restore as a warning on the completion (`restoredToolInputWarning`).
 *
 * Two steps so the lookup stays cheap: `toolInputRestoreCandidates` names the completions worth looking up
 * (only replayed calls that carry a schema-default value), `restoreSampledToolInputs` rewrites the body.
 */
import type { ResponseMessage } from '../../../contract/completion-record.ts'
import type { Warning } from '../../types.ts'
import { parseAnthropicToolUseId } from './anthropic-ids.ts'

type Json = unknown
type JsonObject = Record<string, Json>

export interface ToolInputRestore {
  /** The body to parse: the input unchanged (same object) when nothing was restored. */
  body: unknown
  /** Replayed calls put back to their sampled arguments. */
  restored: number
  /** The schema-default keys removed, over all restored calls (sorted, unique). */
  droppedKeys: string[]
}

function isObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

function jsonEqual(a: Json, b: Json): boolean {
  if (a === b) return true
  if (Array.isArray(a)) return Array.isArray(b) && a.length === b.length && a.every((item, i) => jsonEqual(item, b[i]))
  if (!isObject(a) || !isObject(b)) return false
  const keys = Object.keys(a)
  return keys.length === Object.keys(b).length && keys.every((key) => Object.hasOwn(b, key) && jsonEqual(a[key], b[key]))
}

/** Tool name → the properties of its input schema that declare a `default`. */
function schemaDefaults(tools: unknown): Map<string, Map<string, Json>> {
  const out = new Map<string, Map<string, Json>>()
  if (!Array.isArray(tools)) return out
  for (const tool of tools) {
    if (!isObject(tool) || typeof tool.name !== 'string' || !isObject(tool.input_schema)) continue
    const properties = tool.input_schema.properties
    if (!isObject(properties)) continue
    const defaults = new Map<string, Json>()
    for (const [key, schema] of Object.entries(properties)) {
      if (isObject(schema) && Object.hasOwn(schema, 'default')) defaults.set(key, schema.default)
    }
    if (defaults.size > 0) out.set(tool.name, defaults)
  }
  return out
}

interface ReplayedCall {
  block: JsonObject
  completionId: string
  index: number
  name: string
  input: JsonObject
  defaults: Map<string, Json>
}

/** Replayed gateway-issued `tool_use` blocks whose input holds at least one schema-default value. */
function replayedCallsWithDefaults(body: unknown): ReplayedCall[] {
  if (!isObject(body) || !Array.isArray(body.messages)) return []
  const defaultsByTool = schemaDefaults(body.tools)
  if (defaultsByTool.size === 0) return []
  const calls: ReplayedCall[] = []
  for (const message of body.messages) {
    if (!isObject(message) || message.role !== 'assistant' || !Array.isArray(message.content)) continue
    for (const block of message.content) {
      if (!isObject(block) || block.type !== 'tool_use' || typeof block.id !== 'string' || typeof block.name !== 'string') continue
      const defaults = defaultsByTool.get(block.name)
      const input = block.input
      if (defaults === undefined || !isObject(input)) continue
      if (![...defaults].some(([key, value]) => Object.hasOwn(input, key) && jsonEqual(input[key], value))) continue
      const issued = parseAnthropicToolUseId(block.id)
      if (issued === null) continue
      calls.push({ block, completionId: issued.completionId, index: issued.index, name: block.name, input, defaults })
    }
  }
  return calls
}

/** Completion ids whose sampled calls may have been replayed with schema defaults filled in (unique). */
export function toolInputRestoreCandidates(body: unknown): string[] {
  return [...new Set(replayedCallsWithDefaults(body).map((call) => call.completionId))]
}

/** The sampled arguments when the replay only added schema-default keys to them; null otherwise. */
function sampledArguments(call: ReplayedCall, sampled: ResponseMessage | undefined): { args: JsonObject; dropped: string[] } | null {
  const toolCall = sampled?.tool_calls?.[call.index]
  if (toolCall === undefined || toolCall.function.name !== call.name) return null
  let args: unknown
  try {
    args = JSON.parse(toolCall.function.arguments)
  } catch {
    return null
  }
  if (!isObject(args)) return null
  for (const [key, value] of Object.entries(args)) {
    if (!Object.hasOwn(call.input, key) || !jsonEqual(call.input[key], value)) return null
  }
  const dropped = Object.keys(call.input).filter((key) => !Object.hasOwn(args, key))
  if (dropped.length === 0) return null
  for (const key of dropped) {
    if (!call.defaults.has(key) || !jsonEqual(call.defaults.get(key), call.input[key])) return null
  }
  return { args, dropped }
}

/**
 * Put replayed calls back to their sampled arguments (see the module doc). `sampled` maps a completion id
 * to its recorded response message (as `toolInputRestoreCandidates` asked for); the body is copied where
 * it changes, never mutated.
 */
export function restoreSampledToolInputs(body: unknown, sampled: ReadonlyMap<string, ResponseMessage>): ToolInputRestore {
  const replacements = new Map<JsonObject, JsonObject>()
  const droppedKeys = new Set<string>()
  for (const call of replayedCallsWithDefaults(body)) {
    const restore = sampledArguments(call, sampled.get(call.completionId))
    if (restore === null) continue
    replacements.set(call.block, { ...call.block, input: restore.args })
    for (const key of restore.dropped) droppedKeys.add(key)
  }
  if (replacements.size === 0 || !isObject(body) || !Array.isArray(body.messages)) return { body, restored: 0, droppedKeys: [] }
  const messages = body.messages.map((message: Json) => {
    if (!isObject(message) || !Array.isArray(message.content)) return message
    if (!message.content.some((block: Json) => isObject(block) && replacements.has(block))) return message
    return { ...message, content: message.content.map((block: Json) => (isObject(block) && replacements.get(block)) || block) }
  })
  return { body: { ...body, messages }, restored: replacements.size, droppedKeys: [...droppedKeys].sort() }
}

/** The completion's warning for a restore (null when nothing was restored). */
export function restoredToolInputWarning(restore: ToolInputRestore): Warning | null {
  if (restore.restored === 0) return null
  return {
    code: 'tool_input_defaults_dropped',
    message: `${restore.restored} replayed tool call(s) carried schema-default argument(s) the model never sampled (${restore.droppedKeys.join(', ')}); sent to the engine as sampled`,
  }
}
