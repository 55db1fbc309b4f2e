/**
 * @module
 * A cheap structural pass over an OpenAI chat request, at least as strict as `openaiChatRequestSchema`
 * (`openai-chat-wire.ts`): when it says yes the request is valid as it is; when it says no, the schema
 * runs and its issue is the error the caller gets. A long agent context is hundreds of messages, and zod
 * copies every one of them to validate it (5–8 % of the edge isolate's CPU per call at 2 KB,
 * `npm run profile:gateway`). It never accepts what the schema refuses:
 * `test/unit/providers/openai-chat-shape.test.ts` holds it to that on fixtures and on mutations of them.
 */

/** Typed for any value: a role that is not one of these strings (or not a string at all) is simply not in it. */
const ROLES: ReadonlySet<unknown> = new Set(['system', 'developer', 'user', 'assistant', 'tool', 'function'])

type Obj = Record<string, unknown>

const isObject = (value: unknown): value is Obj => typeof value === 'object' && value !== null && !Array.isArray(value)
const isOptionalString = (value: unknown) => value === undefined || typeof value === 'string'
const isNullishString = (value: unknown) => value === undefined || value === null || typeof value === 'string'

function contentOk(content: unknown): boolean {
  if (content === undefined || content === null || typeof content === 'string') return true
  if (!Array.isArray(content)) return false
  for (const part of content) if (!isObject(part) || typeof part.type !== 'string') return false
  return true
}

function toolCallsOk(calls: unknown): boolean {
  if (calls === undefined || calls === null) return true
  if (!Array.isArray(calls)) return false
  for (const call of calls) {
    if (!isObject(call) || !isOptionalString(call.id) || !isOptionalString(call.type)) return false
    const fn = call.function
    if (!isObject(fn) || typeof fn.name !== 'string') return false
    if (typeof fn.arguments !== 'string' && !isObject(fn.arguments)) return false
  }
  return true
}

/** Every message passes the message schema (a non-empty array of them). */
export function messagesLookValid(messages: unknown): boolean {
  if (!Array.isArray(messages) || messages.length === 0) return false
  for (const message of messages) {
    if (!isObject(message) || !ROLES.has(message.role)) return false
    if (!contentOk(message.content) || !toolCallsOk(message.tool_calls) || !isNullishString(message.tool_call_id)) return false
  }
  return true
}

/** Absent, null, or every tool passes the tool schema. */
export function toolsLookValid(tools: unknown): boolean {
  if (tools === undefined || tools === null) return true
  if (!Array.isArray(tools)) return false
  for (const tool of tools) {
    if (!isObject(tool) || tool.type !== 'function') return false
    const fn = tool.function
    if (!isObject(fn) || typeof fn.name !== 'string' || fn.name.length === 0 || !isNullishString(fn.description)) return false
    if (fn.parameters !== undefined && fn.parameters !== null && !isObject(fn.parameters)) return false
  }
  return true
}

const isNullish = (value: unknown) => value === undefined || value === null
const isNullishBoolean = (value: unknown) => isNullish(value) || typeof value === 'boolean'
const nullishNumberIn = (value: unknown, min: number, max: number, integer: boolean) =>
  isNullish(value) || (typeof value === 'number' && value >= min && value <= max && (!integer || Number.isSafeInteger(value)))

/** The whole request: its top-level fields (those the schema names), messages and tools. */
export function requestLooksValid(
  body: unknown,
): body is { model: string; stream?: boolean | null; stream_options?: { include_usage?: boolean | null } | null } {
  if (!isObject(body) || typeof body.model !== 'string' || body.model.length === 0) return false
  if (!isNullishBoolean(body.stream) || !isNullishBoolean(body.logprobs)) return false
  const options = body.stream_options
  if (!isNullish(options) && !(isObject(options) && isNullishBoolean(options.include_usage))) return false
  if (!(isNullish(body.n) || body.n === 1) || !nullishNumberIn(body.top_logprobs, 0, 20, true)) return false
  if (
    !nullishNumberIn(body.max_tokens, 1, Number.MAX_VALUE, true) ||
    !nullishNumberIn(body.max_completion_tokens, 1, Number.MAX_VALUE, true)
  )
    return false
  if (!nullishNumberIn(body.temperature, 0, 2, false) || !nullishNumberIn(body.top_p, 0, 1, false)) return false
  const stop = body.stop
  if (!isNullish(stop) && typeof stop !== 'string' && !(Array.isArray(stop) && stop.every((item) => typeof item === 'string'))) return false
  return messagesLookValid(body.messages) && toolsLookValid(body.tools)
}
