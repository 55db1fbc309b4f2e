/**
 * @module
 * Polar-strict as first ported (`src/reconstruct/polar-strict.ts` before its two-pass form), kept verbatim
 * as the reference the two-pass builder must equal byte for byte: every chain built in memory, tips held as
 * prompts and compared whole (`_find_extendable_chain`), metadata summed over the built traces.
 */
import type { CompletionRecord } from '../../../src/contract/completion-record.ts'
import type { ExcludedCompletion, Trace, Trajectory } from '../../../src/contract/trajectory.ts'
import { detectEotPolar } from '../../../src/reconstruct/end-of-turn.ts'
import { compareByTimestamp, excludedEntry, partitionRecords, traceFromRecord } from '../../../src/reconstruct/extract-trace.ts'
import { trainedUnderDrift } from '../../../src/reconstruct/segment.ts'
import { trimCommon } from '../../../src/reconstruct/token-ops.ts'
import { type SessionInfo, trajectoryMetadata } from '../../../src/reconstruct/trajectory-metadata.ts'

/**
 * Tokens of the training context that differ from the prompt the model saw: the non-shared middle
 * after common prefix and suffix trimming (an upper bound of the edit distance; 0 exactly when equal).
 * Polar's rule keeps the raw sampled tokens where the template re-renders the previous turn, so a
 * merged turn's context differs whenever the re-render is not the raw sampled text.
 */
function contextDifference(context: readonly number[], prompt: readonly number[]): number {
  const { prefix, suffix } = trimCommon(context, prompt)
  return Math.max(context.length - prefix - suffix, prompt.length - prefix - suffix)
}

interface StrictStats {
  chains_total: number
  chains_reconstructed_full: number
  chains_reconstructed_truncated: number
  completions_total: number
  completions_merged: number
}

function startsWith(prompt: readonly number[], tip: readonly number[]): boolean {
  for (let i = 0; i < tip.length; i++) if (prompt[i] !== tip[i]) return false
  return true
}

/** `_find_extendable_chain`: the longest tip that is a non-empty prefix of the prompt. */
function findExtendableChain(prompt: readonly number[], tips: readonly (readonly number[])[]) {
  let bestIndex = -1
  let bestLength = -1
  for (let index = 0; index < tips.length; index++) {
    const tip = tips[index] ?? []
    const n = tip.length
    if (n > bestLength && n > 0 && n <= prompt.length && startsWith(prompt, tip)) {
      bestIndex = index
      bestLength = n
    }
  }
  return bestIndex
}

/** `_slice_interstitial`: tail after the first EOT (or from it, if the raw turn lacks one). */
function sliceInterstitial(tail: number[], previousRaw: readonly number[], eot: number | null) {
  if (eot === null) return null
  const k = tail.indexOf(eot)
  if (k < 0) return null
  if (previousRaw.length > 0 && previousRaw[previousRaw.length - 1] === eot) return tail.slice(k + 1)
  return tail.slice(k)
}

function finalizeChain(
  chain: readonly CompletionRecord[],
  stats: StrictStats,
  configuredEot: number | null,
  dropped: ExcludedCompletion[],
): Trace {
  const first = chain[0] as CompletionRecord
  const firstTrace = traceFromRecord(first)
  const eot = configuredEot ?? detectEotPolar(chain)
  const promptIds = [...firstTrace.prompt_ids]
  const stream: number[] = [...promptIds]
  const slots: (number | null)[] = []
  const lossMask: number[] = []
  const responseMessages: Record<string, unknown>[] = []
  let previousPrompt: number[] = [...firstTrace.prompt_ids]
  let previousRaw: number[] = [...firstTrace.response_ids]
  let messageCount = firstTrace.prompt_messages.length

  const turns: { context_drift_tokens: number; response_length: number; [key: string]: unknown }[] = []
  const appendResponse = (trace: Trace, record: CompletionRecord, interstitial: number) => {
    turns.push({
      completion_id: record.completion_id,
      seq: record.seq,
      response_offset: stream.length - promptIds.length,
      response_length: trace.response_ids.length,
      interstitial_length: interstitial,
      message_index: trace.response_messages.length > 0 ? responseMessages.length : -1,
      context_drift_tokens: turns.length === 0 ? 0 : contextDifference(stream, trace.prompt_ids),
    })
    stream.push(...trace.response_ids)
    lossMask.push(...trace.loss_mask)
    const logprobs = trace.response_logprobs ?? []
    for (let i = 0; i < trace.response_ids.length; i++) slots.push(logprobs[i] ?? null)
    responseMessages.push(...trace.response_messages)
    messageCount += trace.response_messages.length
  }

  appendResponse(firstTrace, first, 0)
  let kept = 1
  for (let i = 1; i < chain.length; i++) {
    const record = chain[i] as CompletionRecord
    const trace = traceFromRecord(record)
    const prompt = [...trace.prompt_ids]
    if (prompt.length < previousPrompt.length || !startsWith(prompt, previousPrompt)) break
    const tail = prompt.slice(previousPrompt.length)
    const interstitial = sliceInterstitial(tail, previousRaw, eot)
    if (interstitial === null) break
    for (const token of interstitial) {
      stream.push(token)
      slots.push(null)
      lossMask.push(0)
    }
    if (trace.prompt_messages.length > messageCount) {
      responseMessages.push(...trace.prompt_messages.slice(messageCount))
      messageCount = trace.prompt_messages.length
    }
    appendResponse(trace, record, interstitial.length)
    previousPrompt = prompt
    previousRaw = [...trace.response_ids]
    kept++
  }

  stats.completions_merged += kept
  if (kept === chain.length) stats.chains_reconstructed_full++
  else stats.chains_reconstructed_truncated++
  for (const record of chain.slice(kept)) dropped.push(excludedEntry(record, 'dropped_after_break'))

  const last = chain[kept - 1] as CompletionRecord
  return {
    prompt_ids: promptIds,
    response_ids: stream.slice(promptIds.length),
    loss_mask: lossMask,
    prompt_messages: firstTrace.prompt_messages,
    response_messages: responseMessages,
    tools: firstTrace.tools,
    finish_reason: last.finish_reason,
    response_logprobs: finalizeLogprobs(slots, lossMask),
    reward: null,
    reward_components: {},
    metadata: {
      ...first.metadata,
      completion_metadata: chain.slice(0, kept).map((record) => ({ ...record.metadata })),
      source_completion_ids: chain.slice(0, kept).map((record) => record.completion_id),
      agent: first.agent,
      end_of_turn_token_id: eot,
      context_drift_tokens_max: turns.reduce((max, turn) => Math.max(max, turn.context_drift_tokens), 0),
      trained_tokens_under_drift: trainedUnderDrift(turns),
      turns,
    },
  }
}

/** Trained tokens, and those trained under a context that differs from their prompt (all traces). */
function driftStats(traces: readonly Trace[]) {
  let total = 0
  let underDrift = 0
  let turnsWithDrift = 0
  let max = 0
  for (const trace of traces) {
    for (const turn of trace.metadata.turns as { context_drift_tokens: number; response_length: number }[]) {
      total += turn.response_length
      if (turn.context_drift_tokens > 0) {
        underDrift += turn.response_length
        turnsWithDrift++
      }
      max = Math.max(max, turn.context_drift_tokens)
    }
  }
  return {
    turns_with_drift: turnsWithDrift,
    context_drift_tokens_max: max,
    trained_tokens_total: total,
    trained_tokens_under_drift: underDrift,
  }
}

/** `_finalize_logprobs`: null unless every trainable slot has a value; other slots become 0. */
function finalizeLogprobs(slots: readonly (number | null)[], mask: readonly number[]) {
  if (!slots.some((slot) => slot !== null)) return null
  for (let i = 0; i < slots.length; i++) if (mask[i] && slots[i] === null) return null
  return slots.map((slot) => slot ?? 0)
}

export function buildPrefixMergingStrictReference(
  records: readonly CompletionRecord[],
  session: SessionInfo | undefined,
  endOfTurnTokenId: number | null,
): Trajectory {
  const { trainable, excluded } = partitionRecords(records, compareByTimestamp)
  const chains: CompletionRecord[][] = []
  const tips: (readonly number[])[] = []
  for (const record of trainable) {
    const prompt = record.prompt_token_ids
    let index = findExtendableChain(prompt, tips)
    if (index < 0) {
      index = chains.length
      chains.push([])
      tips.push([])
    }
    chains[index]?.push(record)
    tips[index] = prompt
  }

  const stats: StrictStats = {
    chains_total: chains.length,
    chains_reconstructed_full: 0,
    chains_reconstructed_truncated: 0,
    completions_total: trainable.length,
    completions_merged: 0,
  }
  const dropped: ExcludedCompletion[] = []
  const traces = chains.map((chain) => finalizeChain(chain, stats, endOfTurnTokenId, dropped))
  const metadata = {
    ...trajectoryMetadata('prefix_merging', records, session, traces.length),
    reconstruction_stats: {
      ...stats,
      records_total: records.length,
      completions_excluded: excluded.length,
      completions_dropped: dropped.length,
      drift: driftStats(traces),
    },
    reconstruction: { mode: 'strict', end_of_turn_token_id: endOfTurnTokenId },
    excluded_completions: [...excluded, ...dropped],
  }
  if (traces.length === 0) {
    return {
      status: 'ERROR',
      metadata,
      traces,
      error: records.length === 0 ? 'no completions' : 'no trainable completions',
    }
  }
  return { status: 'COMPLETED', metadata, traces, error: null }
}
