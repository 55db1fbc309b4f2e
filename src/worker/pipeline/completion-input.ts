/**
 * @module
 * Build what the session records from one proxied call, whatever its outcome.
 */
import type { CompletionStatus } from '../../contract/completion-record.ts'
import type { CompletionInput } from '../../durable/session/record.ts'
import type { TextDelta } from '../../durable/session/text-delta.ts'
import type { ProviderAdapter } from '../../normalize/adapter.ts'
import { samplingParams } from '../../normalize/engine/engine-request.ts'
import type { ChatRequest, ParsedRequest } from '../../normalize/types.ts'
import type { UpstreamOutcome } from './call-upstream.ts'
import type { SessionAccess } from './session-access.ts'

export interface CallFacts {
  adapter: ProviderAdapter
  access: SessionAccess
  parsed: ParsedRequest
  completionId: string
  engineBody: ChatRequest
  requestText: string
  /** `requestText` as a delta of `originalText`, when that is smaller (then sent instead of the text). */
  requestDelta: TextDelta | null
  /** `ROLLGATE_MAX_SESSION_BYTES` (commits report the session's size against it). */
  maxSessionBytes: number
  originalText: string
  startedAt: number
  startedClock: number
  route: string
}

export function completionInput(facts: CallFacts, outcome: UpstreamOutcome, status: CompletionStatus): CompletionInput {
  const { access, parsed } = facts
  const completion = outcome.ok ? outcome.completion : null
  const startedAt = new Date(facts.startedAt).toISOString()
  return {
    completion_id: facts.completionId,
    timestamp: startedAt,
    api: facts.adapter.id,
    agent: access.agent,
    model_requested: parsed.modelRequested,
    model_used: completion?.model || facts.engineBody.model,
    stream: parsed.stream,
    status,
    prompt_token_ids: completion?.promptTokenIds ? Uint32Array.from(completion.promptTokenIds) : null,
    prompt_token_text: completion?.promptTokenText ?? null,
    response_token_ids: completion?.responseTokenIds ? Uint32Array.from(completion.responseTokenIds) : null,
    response_logprobs: completion?.responseLogprobs ? Float64Array.from(completion.responseLogprobs) : null,
    finish_reason: completion?.finishReason.raw ?? null,
    stop_reason: completion?.stopReason ?? null,
    request_text: facts.requestDelta ? '' : facts.requestText,
    request_delta: facts.requestDelta,
    original_text: facts.originalText,
    response_message: completion?.message ?? null,
    usage: completion
      ? {
          prompt_tokens: completion.usage.inputTokens,
          completion_tokens: completion.usage.outputTokens,
          cached_tokens: completion.usage.cachedInputTokens,
        }
      : null,
    warnings: parsed.warnings,
    error: outcome.ok ? (status === 'abandoned' ? 'client disconnected' : null) : outcome.error.message,
    timing: {
      started_at: startedAt,
      upstream_ms: round(outcome.upstreamMs),
      total_ms: round(performance.now() - facts.startedClock),
    },
    provenance: {
      upstream_kind: access.config.upstream.kind,
      upstream_url: access.config.upstream.url,
      sampling_params: samplingParams(facts.engineBody),
      logprobs_mode: completion?.logprobsMode ?? null,
      policy_version: access.config.policy_version,
      route: facts.route,
    },
    metadata: { ...access.config.metadata, session_id: access.sessionId, task_id: access.config.task_id },
  }
}

const round = (ms: number) => Math.round(ms * 1000) / 1000
