/**
 * @module
 * A segment is one output trace under construction: the first completion's prompt as
 * `prompt_ids`, then for each merged completion its interstitial (mask 0, a slice of that
 * completion's real prompt) and its raw sampled tokens (mask 1, with their recorded logprobs).
 * While chaining, a turn appends two *pieces*: its sampled tokens (a reference to the record's array)
 * and its interstitial (a copy of that slice of its prompt, so the segment never holds a whole prompt
 * but its first). The first prompt is read through its record (`promptRecord`) only when needed:
 * records may load their prompts lazily (a streamed build over the durable log), and then a segment
 * holds no whole prompt at all. The output arrays are allocated once, at their final size, when the
 * segment is finalized.
 */
import type { CompletionRecord } from '../contract/completion-record.ts'
import type { BranchLabel, BreakReason, DriftReason, Trace, TraceTurn } from '../contract/trajectory.ts'
import { EMPTY_DRIFT, type DriftState } from './drift-regions.ts'
import { alignedLogprobs, promptMessageCount, promptMessages, requestTools, responseMessages } from './extract-trace.ts'
import { indexOfFrom, type Tokens } from './token-ops.ts'

type JsonObject = Record<string, unknown>

/** How a segment came to exist. */
export type SegmentOrigin =
  /** First completion of a new chain. */
  | 'root'
  /** The chain could not continue (see `breakReason`); same chain, next segment. */
  | 'break'
  /** Continues an earlier, non-tip completion of a chain (parallel sample / re-send). */
  | 'fork'
  /** Re-send kept out of the chain (`retry_policy: keep_first`, or an earlier prompt re-sent). */
  | 'retry'
  /** Earlier attempt replaced by a re-send of the same prompt (`retry_policy: keep_last`). */
  | 'superseded'

export interface TurnState {
  record: CompletionRecord
  responseOffset: number
  responseLength: number
  interstitialLength: number
  messageIndex: number
  /** Common prefix length of this turn's prompt with the previous turn's prompt. */
  promptLcp: number
  contextDrift: number
  boundaryDrift: number
  driftReason: DriftReason | null
  driftByReason: Record<string, number>
  strictRuleMerge: boolean
}

/**
 * A run of the stream after the prompt, trainable (a turn's sampled tokens) or context (an
 * interstitial). Every turn pushes its pieces, empty ones too: the tip's sampled tokens are always
 * the last piece.
 */
export interface Piece {
  tokens: Tokens
  /** Offset of the piece in `response_ids`. */
  offset: number
  trainable: boolean
  /** Logprobs aligned with `tokens` (trainable pieces only). */
  logprobs: readonly number[] | null
}

export interface Segment {
  index: number
  agent: string
  chain: number
  origin: SegmentOrigin
  parent: number | null
  breakReason: BreakReason | null
  breakDetail: JsonObject | null
  retryInfo: JsonObject | null
  /** The record whose prompt is the trace's `prompt_ids` (read through it, never kept here). */
  promptRecord: CompletionRecord
  promptLength: number
  pieces: Piece[]
  /** Length of `response_ids` so far. */
  responseLength: number
  turnsWithoutLogprobs: number
  responseMessages: JsonObject[]
  messageCount: number
  turns: TurnState[]
  drift: DriftState
  /** Index of the first end-of-turn token in the tip's prompt (-1: none). */
  tipFirstEot: number
  firstSeq: number
  lastAppendSeq: number
  branch: BranchLabel | null
}

export interface NewSegment {
  index: number
  chain: number
  origin: SegmentOrigin
  parent: number | null
  breakReason?: BreakReason | null
  breakDetail?: JsonObject | null
  retryInfo?: JsonObject | null
}

export function tip(segment: Segment): TurnState {
  return segment.turns[segment.turns.length - 1] as TurnState
}

/** Stream position (in `prompt_ids ++ response_ids`) of the tip's first sampled token. */
export function tipResponseStart(segment: Segment): number {
  return segment.promptLength + tip(segment).responseOffset
}

/** Index of the piece containing response offset `offset` (pieces are in offset order). */
function pieceAt(pieces: readonly Piece[], offset: number): number {
  let low = 0
  let high = pieces.length - 1
  // Stryker disable next-line ConditionalExpression: speed only — an earlier piece makes streamSlice walk forward to the right one
  while (low < high) {
    const mid = (low + high + 1) >> 1
    if ((pieces[mid] as Piece).offset <= offset) low = mid
    else high = mid - 1
  }
  return low
}

/** Tokens of the stream (`prompt_ids ++ response_ids`) in `[start, end)`, `end` at most the stream's length. */
export function streamSlice(segment: Segment, start: number, end: number): number[] {
  const out: number[] = []
  const promptLength = segment.promptLength
  // The first prompt may be loaded lazily: read it only for a slice that reaches into it.
  if (start < promptLength) {
    const prompt = segment.promptRecord.prompt_token_ids
    for (let i = start; i < Math.min(end, promptLength); i++) out.push(prompt[i] as number)
  }
  const pieces = segment.pieces
  let position = Math.max(start, promptLength) - promptLength
  const last = end - promptLength
  for (let index = pieceAt(pieces, position); position < last; index++) {
    const piece = pieces[index] as Piece
    const to = Math.min(piece.offset + piece.tokens.length, last)
    for (; position < to; position++) out.push(piece.tokens[position - piece.offset] as number)
  }
  return out
}

/** A turn with sampled tokens but no aligned logprobs makes the whole trace's logprobs null. */
function lacksLogprobs(record: CompletionRecord): boolean {
  return record.response_token_ids.length > 0 && alignedLogprobs(record) === null
}

function pushPiece(segment: Segment, piece: Omit<Piece, 'offset'>): number {
  const offset = segment.responseLength
  segment.pieces.push({ ...piece, offset })
  segment.responseLength += piece.tokens.length
  return offset
}

function pushResponse(segment: Segment, record: CompletionRecord): { offset: number; message: number } {
  const ids = record.response_token_ids
  if (lacksLogprobs(record)) segment.turnsWithoutLogprobs++
  const offset = pushPiece(segment, {
    tokens: ids,
    trainable: true,
    logprobs: alignedLogprobs(record),
  })
  let message = -1
  for (const item of responseMessages(record)) {
    message = segment.responseMessages.length
    segment.responseMessages.push(item)
    segment.messageCount++
  }
  return { offset, message }
}

export function createSegment(record: CompletionRecord, init: NewSegment, eot: number | null): Segment {
  const prompt = record.prompt_token_ids
  const segment: Segment = {
    index: init.index,
    agent: record.agent,
    chain: init.chain,
    origin: init.origin,
    parent: init.parent,
    breakReason: init.breakReason ?? null,
    breakDetail: init.breakDetail ?? null,
    retryInfo: init.retryInfo ?? null,
    promptRecord: record,
    promptLength: prompt.length,
    pieces: [],
    responseLength: 0,
    turnsWithoutLogprobs: 0,
    responseMessages: [],
    messageCount: promptMessageCount(record),
    turns: [],
    drift: EMPTY_DRIFT,
    tipFirstEot: eot === null ? -1 : indexOfFrom(prompt, eot, 0, prompt.length),
    firstSeq: record.seq,
    lastAppendSeq: record.seq,
    branch: null,
  }
  const pushed = pushResponse(segment, record)
  segment.turns.push({
    record,
    responseOffset: pushed.offset,
    responseLength: record.response_token_ids.length,
    interstitialLength: 0,
    messageIndex: pushed.message,
    promptLcp: 0,
    contextDrift: 0,
    boundaryDrift: 0,
    driftReason: null,
    driftByReason: {},
    strictRuleMerge: false,
  })
  return segment
}

export interface AppendTurn {
  /** Where the interstitial starts in the new prompt. */
  interStart: number
  /** First end-of-turn index in the new prompt (-1: none). */
  firstEot: number
  promptLcp: number
  drift: DriftState
  boundaryDrift: number
  strictRuleMerge: boolean
}

function dominantReason(byReason: Record<string, number>): DriftReason | null {
  let best: string | null = null
  let bestValue = 0
  for (const [reason, value] of Object.entries(byReason)) {
    if (value > bestValue) {
      best = reason
      bestValue = value
    }
  }
  return best as DriftReason | null
}

/** Continue the segment with `record`: its interstitial (mask 0), then its sampled tokens. */
export function appendTurn(segment: Segment, record: CompletionRecord, turn: AppendTurn): void {
  const prompt = record.prompt_token_ids
  // A copy of the interstitial: the segment must not keep the whole prompt of every turn alive.
  pushPiece(segment, {
    tokens: prompt.slice(turn.interStart),
    trainable: false,
    logprobs: null,
  })
  const messages = promptMessages(record)
  for (let i = segment.messageCount; i < messages.length; i++) {
    segment.responseMessages.push(messages[i] as JsonObject)
  }
  segment.messageCount = Math.max(segment.messageCount, messages.length)
  const pushed = pushResponse(segment, record)
  segment.drift = turn.drift
  segment.tipFirstEot = turn.firstEot
  segment.lastAppendSeq = record.seq
  segment.turns.push({
    record,
    responseOffset: pushed.offset,
    responseLength: record.response_token_ids.length,
    interstitialLength: prompt.length - turn.interStart,
    messageIndex: pushed.message,
    promptLcp: turn.promptLcp,
    contextDrift: turn.drift.total,
    boundaryDrift: turn.boundaryDrift,
    driftReason: dominantReason(turn.drift.byReason as Record<string, number>),
    driftByReason: { ...turn.drift.byReason },
    strictRuleMerge: turn.strictRuleMerge,
  })
}

/**
 * Replace the tip completion by a re-send of the same prompt (same context, same interstitial;
 * `drift` when the re-send differs by edits such as a fresh nonce): truncate the tip's sampled
 * tokens and message, append the new ones.
 */
export function replaceTip(
  segment: Segment,
  record: CompletionRecord,
  resend?: { state: DriftState; boundaryDrift: number; firstEot: number },
): CompletionRecord {
  let drift: { state: DriftState; boundaryDrift: number } | undefined = resend
  if (resend !== undefined) segment.tipFirstEot = resend.firstEot
  const old = segment.turns.pop() as TurnState
  // Replacing the first completion: the re-send's own prompt becomes the trace prompt.
  if (segment.turns.length === 0) {
    segment.promptRecord = record
    segment.promptLength = record.prompt_token_ids.length
    drift = { state: EMPTY_DRIFT, boundaryDrift: 0 }
  }
  segment.pieces.pop()
  segment.responseLength = old.responseOffset
  if (lacksLogprobs(old.record)) segment.turnsWithoutLogprobs--
  if (old.messageIndex >= 0) {
    segment.responseMessages.length = old.messageIndex
    segment.messageCount--
  }
  const pushed = pushResponse(segment, record)
  segment.lastAppendSeq = record.seq
  const turn: TurnState = {
    ...old,
    record,
    responseOffset: pushed.offset,
    responseLength: record.response_token_ids.length,
    messageIndex: pushed.message,
  }
  if (drift !== undefined) {
    segment.drift = drift.state
    turn.contextDrift = drift.state.total
    turn.boundaryDrift = drift.boundaryDrift
    turn.driftReason = dominantReason(drift.state.byReason as Record<string, number>)
    turn.driftByReason = { ...drift.state.byReason }
  }
  segment.turns.push(turn)
  return old.record
}

function turnMetadata(turn: TurnState): TraceTurn {
  return {
    completion_id: turn.record.completion_id,
    seq: turn.record.seq,
    response_offset: turn.responseOffset,
    response_length: turn.responseLength,
    interstitial_length: turn.interstitialLength,
    message_index: turn.messageIndex,
    context_drift_tokens: turn.contextDrift,
    boundary_drift_tokens: turn.boundaryDrift,
    drift_reason: turn.driftReason,
    drift_by_reason: turn.driftByReason,
    strict_rule_merge: turn.strictRuleMerge,
  }
}

/**
 * Sampled (mask-1) tokens of turns whose training context differs from the prompt they were sampled
 * under (`context_drift_tokens > 0`): what the trainer would score under a context the model never saw.
 */
export function trainedUnderDrift(turns: readonly { context_drift_tokens: number; response_length: number }[]): number {
  let total = 0
  for (const turn of turns) if (turn.context_drift_tokens > 0) total += turn.response_length
  return total
}

/** A plain array for the output (records read lazily from a log hold their prompts packed). */
function plainTokens(tokens: Tokens): number[] {
  if (Array.isArray(tokens)) return tokens as number[]
  // A sized array filled by index: several times faster than `Array.from` on a typed array.
  const out = new Array<number>(tokens.length)
  for (let i = 0; i < tokens.length; i++) out[i] = tokens[i] as number
  return out
}

/** The finished trace (Polar field names; Rollgate extensions in `metadata`). */
export function finalizeSegment(segment: Segment, chainSegmentIndex: number): Trace {
  const first = (segment.turns[0] as TurnState).record
  const last = tip(segment).record
  const turns = segment.turns.map(turnMetadata)
  const length = segment.responseLength
  // Stryker disable ArrayDeclaration: allocated at the final size for speed; every slot is written below
  const responseIds = new Array<number>(length)
  const lossMask = new Array<number>(length)
  const logprobs = new Array<number>(length)
  // Stryker restore ArrayDeclaration
  let trainableTokens = 0
  for (const piece of segment.pieces) {
    const pieceLength = piece.tokens.length
    for (let i = 0; i < pieceLength; i++) {
      const at = piece.offset + i
      responseIds[at] = piece.tokens[i] as number
      lossMask[at] = piece.trainable ? 1 : 0
      logprobs[at] = piece.logprobs === null ? 0 : (piece.logprobs[i] as number)
    }
    if (piece.trainable) trainableTokens += pieceLength
  }
  // Polar: null unless every trainable token has its logprob; context slots are 0.0.
  const hasLogprobs = segment.turnsWithoutLogprobs === 0 && trainableTokens > 0
  return {
    prompt_ids: plainTokens(segment.promptRecord.prompt_token_ids),
    response_ids: responseIds,
    loss_mask: lossMask,
    prompt_messages: promptMessages(first),
    response_messages: segment.responseMessages,
    tools: requestTools(first),
    finish_reason: last.finish_reason,
    response_logprobs: hasLogprobs ? logprobs : null,
    reward: null,
    reward_components: {},
    metadata: {
      ...first.metadata,
      completion_metadata: segment.turns.map((turn) => ({ ...turn.record.metadata })),
      source_completion_ids: segment.turns.map((turn) => turn.record.completion_id),
      agent: segment.agent,
      branch: segment.branch,
      chain_index: segment.chain,
      chain_segment_index: chainSegmentIndex,
      break_reason: segment.breakReason,
      ...(segment.breakDetail === null ? {} : { break_detail: segment.breakDetail }),
      ...(segment.retryInfo === null ? {} : { retry: segment.retryInfo }),
      context_drift_tokens_max: turns.reduce((max, turn) => Math.max(max, turn.context_drift_tokens), 0),
      trained_tokens_under_drift: trainedUnderDrift(turns),
      turns,
    },
  }
}
