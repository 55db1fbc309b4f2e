/**
 * @module
 * Tolerant chaining: routes each trainable completion (arrival order) to the segment it
 * continues, or starts a new one. Never drops a completion.
 *
 * Routing, per agent (`record.agent`; agents never share segments):
 * 1. Follow `prompt_delta` parents (through excluded or other-agent records, at most
 *    `MAX_DELTA_HOPS`) to the nearest completion already placed in one of this agent's segments.
 *    The minimum `shared_prefix_len` along the way is a lower bound on the common prefix with it,
 *    so "does the new prompt extend the tip?" costs O(1) when the bound covers the tip's prompt.
 *    - parent is the segment tip → try to continue (`align-boundary.ts`, `drift-regions.ts`);
 *    - parent is earlier in a segment → identical prompt: a `retry`; else try the tip with the
 *      bound carried through the segment's per-turn common prefixes, or fork.
 * 2. Otherwise, or when the prompt diverges inside the history (the parent is not its
 *    predecessor), compare the new prompt with every tip of the agent (Polar's fallback, the only
 *    full-prompt comparison) and try the three best. A tip whose turn the prompt replays but that
 *    fails the drift bound (or the end-of-turn split) is the predecessor: the scan stops there with
 *    a break, as with a delta parent, so records without `prompt_delta` route the same way (an older
 *    tip of the same conversation would only take the prompt by making the later turns context).
 * 3. No continuation: a `break` segment in the same chain when the prompt still shares the
 *    conversation (same first turn), else a new chain.
 *
 * Same prompt as the tip (`retry`): `keep_last` replaces the tip and moves the earlier attempt to
 * its own `superseded` segment; `keep_first` puts the re-send in a `retry` segment. Either way the
 * attempt kept out of the chain is an alias of the one kept in it for routing, and retry segments
 * are never continued by the fallback comparison.
 */
import type { CompletionRecord } from '../contract/completion-record.ts'
import type { BreakReason, DriftReason } from '../contract/trajectory.ts'
import { type AlignOptions, alignToTip, type PromptEdit } from './align-boundary.ts'
import type { PrefixMergingConfig } from './config.ts'
import { applyBoundary } from './drift-regions.ts'
import { appendTurn, createSegment, type NewSegment, replaceTip, type Segment, streamSlice, tip, tipResponseStart } from './segment.ts'
import { commonPrefixFrom, containsAny, indexOfFrom, type Tokens } from './token-ops.ts'

/** Parent links followed to find a placed ancestor (excluded retries, other agents in between). */
export const MAX_DELTA_HOPS = 8
/** Tips tried after a full comparison when the delta parent does not lead to a continuation. */
export const MAX_SCAN_ATTEMPTS = 3

export interface ChainOptions {
  config: PrefixMergingConfig
  eot: number | null
  /** Optional detokenizer: confirms `retokenization` (same text, other ids) in drift labels. */
  decode?: ((ids: number[]) => string) | undefined
}

interface Failure {
  segment: Segment
  /** Common prefix of the new prompt with the tip's prompt. */
  lcp: number
  reason: BreakReason
  detail: Record<string, unknown>
  /** The tip is this prompt's predecessor (structure matched up to the boundary). */
  predecessor: boolean
}

type Attempt = { kind: 'done' } | { kind: 'failed'; related: boolean; failure: Failure }

/** Route `trainable` (arrival order) into segments. */
export function chainRecords(
  trainable: readonly CompletionRecord[],
  allRecords: readonly CompletionRecord[],
  options: ChainOptions,
): Segment[] {
  const chainer = createChainer(allRecords, options)
  for (const record of trainable) chainer.route(record)
  return chainer.segments
}

export interface Chainer {
  /** Route one trainable record; call in arrival order. */
  route(record: CompletionRecord): void
  /** Segments in creation order (complete once every trainable record is routed). */
  readonly segments: Segment[]
}

/**
 * The routing state, fed one record at a time: a streamed build loads each record's request just
 * before routing it (`allRecords` must already hold every record, for `prompt_delta` parents).
 */
export function createChainer(allRecords: readonly CompletionRecord[], options: ChainOptions): Chainer {
  const { config, eot } = options
  const alignOptions: Omit<AlignOptions, 'previousFirstEot' | 'previousInterStart'> = {
    eot,
    boundaryWindow: config.boundary_window_tokens,
    resyncWindow: config.resync_window_tokens,
    anchor: config.resync_anchor_tokens,
    maxEdits: config.max_edits_per_turn,
    maxDrift: config.max_context_drift_tokens,
  }
  const thinkIds = config.think_token_ids === null ? null : [...config.think_token_ids]
  const bySeq = new Map<number, CompletionRecord>()
  for (const record of allRecords) bySeq.set(record.seq, record)
  const placement = new Map<CompletionRecord, Segment>()
  // A re-send and the attempt it replaced have the same prompt: routing treats the one kept out of
  // the chain as the one kept in it, so the next turn continues the chain, not the retry trace.
  const aliases = new Map<CompletionRecord, CompletionRecord>()
  const byAgent = new Map<string, Segment[]>()
  const segments: Segment[] = []
  let chainCount = 0

  const open = (record: CompletionRecord, init: Omit<NewSegment, 'index' | 'chain'>, chain?: number) => {
    const segment = createSegment(record, { ...init, index: segments.length, chain: chain ?? chainCount++ }, eot)
    segments.push(segment)
    const list = byAgent.get(record.agent)
    if (list === undefined) byAgent.set(record.agent, [segment])
    else list.push(segment)
    placement.set(record, segment)
    return segment
  }

  const classifier = (Q: Tokens) => {
    return (stream: Tokens, prompt: Tokens, at: 'boundary' | 'edit', qStart: number): DriftReason => {
      if (thinkIds !== null && (containsAny(stream, thinkIds) || containsAny(prompt, thinkIds))) {
        return 'thinking_rewrite'
      }
      if (at === 'edit') {
        // Before the first end-of-turn token: inside the system message.
        return eot !== null && indexOfFrom(Q, eot, 0, qStart) >= 0 ? 'history_edit' : 'system_edit'
      }
      if (stream.length > 0 && prompt.length > 0) {
        if (options.decode !== undefined) {
          return options.decode([...stream]) === options.decode([...prompt]) ? 'retokenization' : 'template_rewrite'
        }
        const structural = eot !== null && (stream.includes(eot) || prompt.includes(eot))
        return structural ? 'template_rewrite' : 'retokenization'
      }
      return 'template_rewrite'
    }
  }

  const handleRetry = (segment: Segment, record: CompletionRecord, edits: readonly PromptEdit[]) => {
    const current = tip(segment).record
    if (config.retry_policy === 'keep_first') {
      open(record, {
        origin: 'retry',
        parent: segment.index,
        retryInfo: { retry_of: current.completion_id },
      })
      aliases.set(record, current)
      return
    }
    // Same context; if the re-send differs by edits (a fresh nonce), re-align the tip's context.
    const P = current.prompt_token_ids
    const Q = record.prompt_token_ids
    const drift =
      edits.length === 0
        ? undefined
        : applyBoundary(segment.drift, {
            P,
            Q,
            rStart: tipResponseStart(segment),
            rLength: 0,
            edits,
            tail: { p: P.length, q: Q.length, newEnd: Q.length, interStart: Q.length, exact: true },
            streamSlice: (start, end) => streamSlice(segment, start, end),
            classify: classifier(Q),
          })
    if (drift !== undefined && drift.state.total > config.max_context_drift_tokens) {
      open(
        record,
        {
          origin: 'break',
          parent: segment.index,
          breakReason: drift.boundaryReason ?? 'template_rewrite',
          breakDetail: {
            context_drift_tokens: drift.state.total,
            max_context_drift_tokens: config.max_context_drift_tokens,
            previous_completion_id: current.completion_id,
          },
        },
        segment.chain,
      )
      return
    }
    const replaced = replaceTip(
      segment,
      record,
      drift === undefined ? undefined : { ...drift, firstEot: eot === null ? -1 : indexOfFrom(Q, eot, 0, Q.length) },
    )
    aliases.set(replaced, record)
    placement.set(record, segment)
    const previous = (segment.retryInfo?.replaced_attempts as string[] | undefined) ?? []
    segment.retryInfo = { replaced_attempts: [...previous, replaced.completion_id] }
    open(replaced, {
      origin: 'superseded',
      parent: segment.index,
      retryInfo: { superseded_by: record.completion_id },
    })
  }

  const attempt = (segment: Segment, record: CompletionRecord, lowerBound: number): Attempt => {
    const tipRecord = tip(segment).record
    const P = tipRecord.prompt_token_ids
    const R = tipRecord.response_token_ids
    const Q = record.prompt_token_ids
    const alignment = alignToTip(P, R, Q, lowerBound, {
      ...alignOptions,
      previousFirstEot: segment.tipFirstEot,
      previousInterStart: P.length - tip(segment).interstitialLength,
    })
    if (alignment.kind === 'retry') {
      handleRetry(segment, record, alignment.edits)
      return { kind: 'done' }
    }
    if (alignment.kind === 'break') {
      const predecessor = alignment.reason === 'eot_unavailable' || alignment.reason === 'interstitial_split_failed'
      return {
        kind: 'failed',
        related: alignment.related,
        failure: {
          segment,
          lcp: alignment.lcp,
          reason: alignment.reason,
          detail: { common_prefix_tokens: alignment.lcp, previous_prompt_tokens: P.length },
          predecessor,
        },
      }
    }
    const drift = applyBoundary(segment.drift, {
      P,
      Q,
      rStart: tipResponseStart(segment),
      rLength: R.length,
      edits: alignment.edits,
      tail: alignment.tail,
      streamSlice: (start, end) => streamSlice(segment, start, end),
      classify: classifier(Q),
    })
    if (drift.state.total > config.max_context_drift_tokens) {
      return {
        kind: 'failed',
        related: true,
        failure: {
          segment,
          lcp: alignment.lcp,
          reason: drift.boundaryReason ?? 'template_rewrite',
          detail: {
            context_drift_tokens: drift.state.total,
            max_context_drift_tokens: config.max_context_drift_tokens,
            drift_by_reason: drift.state.byReason,
          },
          predecessor: true,
        },
      }
    }
    appendTurn(segment, record, {
      interStart: alignment.tail.interStart,
      firstEot: firstEotAfter(segment.tipFirstEot, alignment, Q, eot),
      promptLcp: alignment.lcp,
      drift: drift.state,
      boundaryDrift: drift.boundaryDrift,
      strictRuleMerge: alignment.strictRuleMerge,
    })
    placement.set(record, segment)
    return { kind: 'done' }
  }

  /** Nearest placed ancestor of this agent via `prompt_delta`, with a common-prefix lower bound. */
  const placedAncestor = (record: CompletionRecord) => {
    let lowerBound = Number.POSITIVE_INFINITY
    let current = record
    for (let hop = 0; hop < MAX_DELTA_HOPS; hop++) {
      const delta = current.prompt_delta
      if (delta === null) return null
      lowerBound = Math.min(lowerBound, delta.shared_prefix_len)
      const parent = bySeq.get(delta.parent_seq)
      if (parent === undefined || parent === current || parent.seq >= current.seq) return null
      let target = parent
      for (let alias = aliases.get(target); alias !== undefined; alias = aliases.get(target)) {
        target = alias
      }
      const segment = placement.get(target)
      if (segment !== undefined && segment.agent === record.agent) {
        return { segment, parent: target, lowerBound }
      }
      current = parent
    }
    return null
  }

  const route = (record: CompletionRecord) => {
    const Q = record.prompt_token_ids
    const tried = new Set<Segment>()
    let related: Failure | null = null
    let relatedOrigin: 'break' | 'fork' = 'break'

    const ancestor = placedAncestor(record)
    if (ancestor !== null) {
      const { segment, parent } = ancestor
      const turns = segment.turns
      const tipRecord = tip(segment).record
      let lowerBound = ancestor.lowerBound
      if (tipRecord !== parent) {
        const parentPrompt = parent.prompt_token_ids
        if (lowerBound >= parentPrompt.length && Q.length === parentPrompt.length) {
          // The prompt of an earlier completion re-sent after the chain moved on.
          open(record, {
            origin: 'retry',
            parent: segment.index,
            retryInfo: { retry_of: parent.completion_id },
          })
          return
        }
        // Carry the bound to the tip through the segment's consecutive common prefixes.
        let index = turns.length - 1
        while (index > 0 && turns[index]?.record !== parent) {
          lowerBound = Math.min(lowerBound, turns[index]?.promptLcp ?? 0)
          index--
        }
        relatedOrigin = 'fork'
      }
      const outcome = attempt(segment, record, lowerBound)
      if (outcome.kind === 'done') return
      tried.add(segment)
      if (outcome.related) related = outcome.failure
      // The tip shares at least as much as the delta parent: a break from the tip, not a fork.
      if (outcome.failure.lcp >= ancestor.lowerBound) relatedOrigin = 'break'
      if (outcome.related && outcome.failure.predecessor) {
        open(record, breakInit(outcome.failure, 'break'), segment.chain)
        return
      }
    }

    // Fallback: full comparison against every tip of this agent (Polar's grouping, tolerant).
    const candidates: { segment: Segment; lcp: number }[] = []
    for (const segment of byAgent.get(record.agent) ?? []) {
      if (tried.has(segment) || segment.origin === 'retry' || segment.origin === 'superseded') continue
      const lcp = commonPrefixFrom(tip(segment).record.prompt_token_ids, Q, 0)
      if (lcp > 0) candidates.push({ segment, lcp })
    }
    candidates.sort((a, b) => b.lcp - a.lcp || b.segment.index - a.segment.index)
    for (const candidate of candidates.slice(0, MAX_SCAN_ATTEMPTS)) {
      const outcome = attempt(candidate.segment, record, candidate.lcp)
      if (outcome.kind === 'done') return
      if (outcome.related && outcome.failure.predecessor) {
        // As with a delta parent: the prompt replays this tip's turn, so it is the predecessor. An older
        // tip of the same conversation could only take the prompt by making the later turns context.
        open(record, breakInit(outcome.failure, 'break'), outcome.failure.segment.chain)
        return
      }
      if (outcome.related && related === null) {
        related = outcome.failure
        relatedOrigin = 'break'
      }
    }

    if (related !== null) {
      // A break stays in its chain; a fork from an earlier completion starts a chain of its own.
      const chain = relatedOrigin === 'break' ? related.segment.chain : undefined
      open(record, breakInit(related, relatedOrigin), chain)
      return
    }
    open(record, { origin: 'root', parent: null })
  }

  return { route, segments }
}

/**
 * First end-of-turn index of the new tip prompt, without rescanning it: unchanged when the old one
 * lies in the common prefix; else found in the new tokens (or, after edits, from the start).
 */
function firstEotAfter(previous: number, alignment: { lcp: number; edits: readonly unknown[] }, Q: Tokens, eot: number | null): number {
  if (eot === null) return -1
  if (previous >= 0 && previous < alignment.lcp) return previous
  // No end-of-turn in the old prompt: none in the common prefix either, scan only the new tokens.
  const from = alignment.edits.length === 0 && previous < 0 ? alignment.lcp : 0
  return indexOfFrom(Q, eot, from, Q.length)
}

function breakInit(failure: Failure, origin: 'break' | 'fork'): Omit<NewSegment, 'index' | 'chain'> {
  return {
    origin,
    parent: failure.segment.index,
    breakReason: failure.reason,
    breakDetail: {
      ...failure.detail,
      previous_completion_id: tip(failure.segment).record.completion_id,
    },
  }
}
