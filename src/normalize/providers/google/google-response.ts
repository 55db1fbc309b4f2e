/**
 * @module
 * Completion → Gemini `GenerateContentResponse`. Parts: thought (when the client asked for thoughts),
 * text, one `functionCall` per call (`args` parsed; `{raw_input}` when the engine's arguments are not a
 * JSON object). The self-describing `thoughtSignature` goes where Gemini puts signatures and Gemini CLI
 * keeps them: the first `functionCall` part, else the last text part, else the thought part.
 */
import type { ResponseContext } from '../../adapter.ts'
import type { Completion } from '../../types.ts'
import { encodeThoughtSignature, googleFunctionCallId } from './google-ids.ts'
import { googleReplyOptions } from './google-request.ts'
import { mapGoogleFinishReason } from './map-google-finish-reason.ts'

export type GoogleResponsePart =
  | { text: string; thought?: true; thoughtSignature?: string }
  | { functionCall: { id: string; name: string; args: Record<string, unknown> }; thoughtSignature?: string }

export function googleFunctionArgs(argumentsText: string): Record<string, unknown> {
  if (!argumentsText.trim()) return {}
  try {
    const parsed: unknown = JSON.parse(argumentsText)
    if (parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed)) return parsed as Record<string, unknown>
  } catch {
    // Not JSON: hand the sampled text over.
  }
  return { raw_input: argumentsText }
}

/** The answer's parts, split into the thought part (streamed first) and the rest. */
export function googleResponseParts(
  completion: Completion,
  context: ResponseContext,
): { thought: GoogleResponsePart | null; rest: GoogleResponsePart[] } {
  const { message } = completion
  const { includeThoughts } = googleReplyOptions(context.responseOptions)
  const reasoning = message.reasoning_content ?? ''
  const thought: GoogleResponsePart | null = reasoning && includeThoughts ? { text: reasoning, thought: true } : null
  const rest: GoogleResponsePart[] = []
  if (message.content) rest.push({ text: message.content })
  message.tool_calls?.forEach((call, index) => {
    rest.push({
      functionCall: {
        id: googleFunctionCallId(context.completionId, index),
        name: call.function.name,
        args: googleFunctionArgs(call.function.arguments),
      },
    })
  })
  if (reasoning) {
    const signature = encodeThoughtSignature(context.completionId, reasoning)
    const carrier = rest.find((part) => 'functionCall' in part) ?? rest.findLast((part) => 'text' in part) ?? thought ?? null
    if (carrier) carrier.thoughtSignature = signature
    else rest.push({ text: '', thoughtSignature: signature })
  }
  if (!thought && rest.length === 0) rest.push({ text: '' })
  return { thought, rest }
}

export function googleUsage(completion: Completion) {
  const { usage } = completion
  const reasoning = usage.reasoningTokens ?? 0
  return {
    promptTokenCount: usage.inputTokens,
    candidatesTokenCount: usage.outputTokens - reasoning,
    totalTokenCount: usage.inputTokens + usage.outputTokens,
    ...(usage.reasoningTokens != null ? { thoughtsTokenCount: reasoning } : {}),
    ...(usage.cachedInputTokens > 0 ? { cachedContentTokenCount: usage.cachedInputTokens } : {}),
  }
}

export function googleResponseFrame(context: ResponseContext, parts: GoogleResponsePart[], final: { completion: Completion } | null) {
  return {
    candidates: [
      {
        content: { role: 'model', parts },
        ...(final ? { finishReason: mapGoogleFinishReason(final.completion) } : {}),
        index: 0,
      },
    ],
    ...(final ? { usageMetadata: googleUsage(final.completion) } : {}),
    modelVersion: context.modelRequested,
    responseId: context.completionId,
  }
}

export function buildGoogleResponse(completion: Completion, context: ResponseContext) {
  const { thought, rest } = googleResponseParts(completion, context)
  return googleResponseFrame(context, thought ? [thought, ...rest] : rest, { completion })
}
