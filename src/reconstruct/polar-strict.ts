/**
 * @module
 * Polar's reference `prefix_merging` (`builder/prefix_merging.py` @ c04b8146, §16.3), ported line
 * by line for `strict: true`: same ordering (`timestamp`, `completion_id`), same chain grouping
 * (longest exact-prefix tip), same per-chain EOT detection, same interstitial split, same logprob
 * finalization. It is the comparison baseline; its traces are token-identical to Polar's.
 *
 * Like Polar it stops a chain at the first break and drops the remaining completions. Unlike
 * Polar it says so: dropped completions are listed in `metadata.excluded_completions` with reason
 * `dropped_after_break`, and each trace names its `source_completion_ids`.
 *
 * Built in two passes so that no more than one trace is ever held (a session whose every turn rewrites
 * the end of the last prompt — stripped thinking — is one trace per turn, O(turns²) tokens in all):
 * - `startPrefixMergingStrict` groups the records into chains and walks each chain over its tokens only (no
 *   request is read), which gives everything the trajectory's metadata sums over all traces: where each
 *   chain breaks, what is dropped, the drift statistics. Chain tips are kept as prefix hashes (a candidate
 *   tip is then compared token by token), not as prompts: grouping holds no prompt and touches each one once.
 * - `strictTraceSteps` builds one chain's trace, asking for each record just before it reads its request
 *   (a streamed build loads it then and drops it after: `src/durable/session/trajectory-stream.ts`).
 * `buildPrefixMergingStrict` runs both over records in memory; the text is the same either way.
 */
import type { CompletionRecord } from '../contract/completion-record.ts'
import type { ExcludedCompletion, Trace, Trajectory } from '../contract/trajectory.ts'
import { detectEotPolar } from './end-of-turn.ts'
import { compareByTimestamp, excludedEntry, partitionRecords, traceFromRecord } from './extract-trace.ts'
import { trainedUnderDrift } from './segment.ts'
import { type Tokens, trimCommon } from './token-ops.ts'
import { type SessionInfo, trajectoryMetadata } from './trajectory-metadata.ts'

/**
 * Tokens of the training context that differ from the prompt the model saw: the non-shared middle
 * after common prefix and suffix trimming (an upper bound of the edit distance; 0 exactly when equal).
 * Polar's rule keeps the raw sampled tokens where the template re-renders the previous turn, so a
 * merged turn's context differs whenever the re-render is not the raw sampled text.
 */
function contextDifference(context: Tokens, prompt: Tokens): number {
  // Symmetric in its arguments, and never negative (`trimCommon` keeps prefix + suffix <= the shorter length).
  const { prefix, suffix } = trimCommon(context, prompt)
  return Math.max(context.length, prompt.length) - prefix - suffix
}

interface StrictStats {
  chains_total: number
  chains_reconstructed_full: number
  chains_reconstructed_truncated: number
  completions_total: number
  completions_merged: number
}

function startsWith(prompt: Tokens, tip: Tokens): boolean {
  if (tip.length > prompt.length) return false
  for (let i = 0; i < tip.length; i++) if (prompt[i] !== tip[i]) return false
  return true
}

/** A plain array of the tokens (records read lazily from a log hold their prompts packed). */
function plainTokens(tokens: Tokens): number[] {
  const out = new Array<number>(tokens.length)
  for (let i = 0; i < tokens.length; i++) out[i] = tokens[i] as number
  return out
}

/**
 * Hashes of every prefix of `tokens` (`out[i]` covers `tokens[0…i]`), 53 bits from two 32-bit hashes:
 * equal prefixes hash equal; a match is then confirmed token by token.
 */
function prefixHashes(tokens: Tokens, out: Float64Array): Float64Array {
  let a = 0x811c9dc5
  let b = 0x9747b28c
  for (let i = 0; i < tokens.length; i++) {
    const token = tokens[i] as number
    a = Math.imul(a ^ token, 0x01000193)
    b = Math.imul(b + token + 0x9e3779b9, 0x85ebca6b)
    b ^= b >>> 13
    out[i] = (a >>> 0) * 0x200000 + (b >>> 11)
  }
  return out
}

/** Test seam: the prefix hash the tips are matched with (a test makes every hash collide). */
export const tipHashing: { prefixHashes: (tokens: Tokens, out: Float64Array) => Float64Array } = { prefixHashes }

/**
 * `_find_extendable_chain` over every chain's tip: the longest tip that is a non-empty prefix of the
 * prompt (Polar keeps the first chain on a tie; no two tips tie, see `place`). Tips are held as (record, length, hash of the whole tip); a tip whose
 * hash matches the prompt's prefix of its length is compared token by token (read through the record).
 */
class ChainTips {
  readonly #records: CompletionRecord[] = []
  readonly #lengths: number[] = []
  readonly #hashes: number[] = []
  #buffer = new Float64Array(1024)

  /** The index of the record's chain (a new chain: the number of chains so far); its prompt becomes that chain's tip. */
  place(record: CompletionRecord): number {
    const prompt = record.prompt_token_ids as Tokens
    if (this.#buffer.length < prompt.length) this.#buffer = new Float64Array(Math.max(prompt.length, this.#buffer.length * 2))
    const hashes = tipHashing.prefixHashes(prompt, this.#buffer)
    // The first tip in chain order that is a prefix of the prompt is the longest one (Polar's choice), so
    // there is nothing to sort and no tie to break. Invariant: a non-empty tip is never a prefix of a later
    // chain's tip (equal included). A new chain starts only when no tip is a prefix of its prompt; a prompt
    // that joins chain k had tip k as its longest prefix, so an earlier tip that were a prefix of it would be
    // a shorter prefix of tip k, and tip k a prefix of a later tip if the prompt were. Tips that are prefixes
    // of one prompt are prefixes of each other, hence ordered: the earlier chain holds the longer one.
    let index = this.#records.length
    for (let candidate = 0; candidate < this.#records.length; candidate++) {
      const n = this.#lengths[candidate] as number
      if (n === 0 || n > prompt.length || hashes[n - 1] !== this.#hashes[candidate]) continue
      if (startsWith(prompt, (this.#records[candidate] as CompletionRecord).prompt_token_ids)) {
        index = candidate
        break
      }
    }
    this.#records[index] = record
    this.#lengths[index] = prompt.length
    this.#hashes[index] = prompt.length > 0 ? (hashes[prompt.length - 1] as number) : 0
    return index
  }
}

/** `_slice_interstitial`: tail after the first EOT (or from it, if the raw turn lacks one). */
function sliceInterstitial(tail: Tokens, previousRaw: Tokens, eot: number | null): Tokens | null {
  if (eot === null) return null
  const k = tail.indexOf(eot)
  if (k < 0) return null
  if (previousRaw.length > 0 && previousRaw[previousRaw.length - 1] === eot) return tail.slice(k + 1)
  return tail.slice(k)
}

interface StrictTurn {
  completion_id: string
  seq: number
  response_offset: number
  response_length: number
  interstitial_length: number
  message_index: number
  context_drift_tokens: number
}

/**
 * `_finalize_chain`'s walk over one chain: each next record either extends the merged stream (its prompt
 * starts with the previous prompt and its new tail holds the EOT) or breaks the chain. `build`: also the
 * trace's loss mask, logprob slots and messages (which read each record's request); without it, tokens only.
 */
class ChainWalk {
  readonly turns: StrictTurn[] = []
  /** The merged token stream (first prompt, then responses and interstitials); null when not needed. */
  readonly #stream: number[] | null
  /** The first prompt as a plain array (built traces only). */
  readonly promptIds: number[] = []
  readonly #promptLength: number
  readonly #eot: number | null
  readonly #build: boolean
  readonly slots: (number | null)[] = []
  readonly lossMask: number[] = []
  readonly responseMessages: Record<string, unknown>[] = []
  readonly promptMessages: Record<string, unknown>[] = []
  readonly tools: Trace['tools'] = null
  #messageCount = 0
  #offset = 0
  #previousPrompt: Tokens
  #previousRaw: Tokens

  constructor(first: CompletionRecord, eot: number | null, build: boolean, needStream: boolean) {
    this.#eot = eot
    this.#build = build
    const prompt = needStream || build ? first.prompt_token_ids : []
    this.#previousPrompt = prompt
    this.#promptLength = prompt.length
    if (build) this.promptIds = plainTokens(prompt)
    this.#stream = build ? this.promptIds.slice() : needStream ? plainTokens(prompt) : null
    this.#previousRaw = first.response_token_ids
    if (build) {
      const trace = traceFromRecord(first)
      this.promptMessages = trace.prompt_messages
      this.tools = trace.tools
      this.#messageCount = trace.prompt_messages.length
      this.#append(trace, first, 0)
    } else this.#appendTokens(first, 0)
  }

  /** The trace's response stream (after the first prompt). */
  responseIds(): number[] {
    return (this.#stream as number[]).slice(this.#promptLength)
  }

  #turn(record: CompletionRecord, length: number, interstitial: number, messageIndex: number, prompt: Tokens): void {
    this.turns.push({
      completion_id: record.completion_id,
      seq: record.seq,
      response_offset: this.#offset,
      response_length: length,
      interstitial_length: interstitial,
      message_index: messageIndex,
      context_drift_tokens: this.turns.length === 0 ? 0 : contextDifference(this.#stream as number[], prompt),
    })
  }

  #appendTokens(record: CompletionRecord, interstitial: number, prompt: Tokens = []): void {
    const response = record.response_token_ids
    this.#turn(record, response.length, interstitial, -1, prompt)
    if (this.#stream) for (const token of response) this.#stream.push(token)
    this.#offset += response.length
  }

  #append(trace: Trace, record: CompletionRecord, interstitial: number): void {
    const response = trace.response_ids
    const messageIndex = trace.response_messages.length > 0 ? this.responseMessages.length : -1
    this.#turn(record, response.length, interstitial, messageIndex, trace.prompt_ids)
    const stream = this.#stream as number[]
    for (const token of response) stream.push(token)
    this.#offset += response.length
    for (const value of trace.loss_mask) this.lossMask.push(value)
    const logprobs = trace.response_logprobs ?? []
    for (let i = 0; i < response.length; i++) this.slots.push(logprobs[i] ?? null)
    for (const message of trace.response_messages) this.responseMessages.push(message)
    this.#messageCount += trace.response_messages.length
  }

  /** Extend the chain with `record`, or false (nothing changed) when it breaks the chain there. */
  add(record: CompletionRecord): boolean {
    const prompt = record.prompt_token_ids
    // Polar's `_finalize_chain` first checks that the prompt starts with the previous one; that cannot fail
    // here: a record is grouped into a chain only when the chain's tip (the previous prompt) is its prefix.
    const interstitial = sliceInterstitial(prompt.slice(this.#previousPrompt.length), this.#previousRaw, this.#eot)
    if (interstitial === null) return false
    const stream = this.#stream as number[]
    for (const token of interstitial) stream.push(token)
    this.#offset += interstitial.length
    if (this.#build) {
      for (let i = 0; i < interstitial.length; i++) {
        this.slots.push(null)
        this.lossMask.push(0)
      }
      const trace = traceFromRecord(record)
      if (trace.prompt_messages.length > this.#messageCount) {
        for (const message of trace.prompt_messages.slice(this.#messageCount)) this.responseMessages.push(message)
        this.#messageCount = trace.prompt_messages.length
      }
      this.#append(trace, record, interstitial.length)
    } else this.#appendTokens(record, interstitial.length, prompt)
    this.#previousPrompt = prompt
    this.#previousRaw = record.response_token_ids
    return true
  }
}

/** One chain of the plan: its records in Polar's order, how many are merged before the break, its EOT. */
export interface StrictChain {
  records: readonly CompletionRecord[]
  kept: number
  end_of_turn_token_id: number | null
}

/** Everything but the traces, and the chains to build them from (one trace per chain, in this order). */
export interface StrictPlan {
  status: Trajectory['status']
  metadata: Trajectory['metadata']
  error: string | null
  chains: StrictChain[]
}

/** Trained tokens, and those trained under a context that differs from their prompt (all traces). */
class DriftStats {
  total = 0
  underDrift = 0
  turnsWithDrift = 0
  max = 0

  add(turns: readonly StrictTurn[]): void {
    for (const turn of turns) {
      this.total += turn.response_length
      if (turn.context_drift_tokens > 0) {
        this.underDrift += turn.response_length
        this.turnsWithDrift++
      }
      this.max = Math.max(this.max, turn.context_drift_tokens)
    }
  }

  toJSON() {
    return {
      turns_with_drift: this.turnsWithDrift,
      context_drift_tokens_max: this.max,
      trained_tokens_total: this.total,
      trained_tokens_under_drift: this.underDrift,
    }
  }
}

/** `_finalize_logprobs`: null unless every trainable slot has a value; other slots become 0. */
export function finalizeLogprobs(slots: readonly (number | null)[], mask: readonly number[]) {
  if (!slots.some((slot) => slot !== null)) return null
  for (let i = 0; i < slots.length; i++) if (mask[i] && slots[i] === null) return null
  return slots.map((slot) => slot ?? 0)
}

/** The first pass, a record at a time: `place` each of `trainable` in order, then `finish`. */
export interface StrictPlanning {
  /** Trainable records in Polar's order (`timestamp`, `completion_id`). */
  trainable: readonly CompletionRecord[]
  /** Put the next trainable record in its chain (reads its prompt). */
  place(record: CompletionRecord): void
  finish(): StrictPlan
}

/**
 * The first pass: chains, where each breaks, and the trajectory's metadata. Reads every prompt and the
 * records' small fields, never a request; holds no prompt.
 */
export function startPrefixMergingStrict(
  records: readonly CompletionRecord[],
  session: SessionInfo | undefined,
  endOfTurnTokenId: number | null,
): StrictPlanning {
  const { trainable, excluded } = partitionRecords(records, compareByTimestamp)
  const grouped: CompletionRecord[][] = []
  const tips = new ChainTips()
  const place = (record: CompletionRecord) => {
    const index = tips.place(record)
    if (index === grouped.length) grouped.push([])
    grouped[index]?.push(record)
  }
  const finish = (): StrictPlan => {
    const stats: StrictStats = {
      chains_total: grouped.length,
      chains_reconstructed_full: 0,
      chains_reconstructed_truncated: 0,
      completions_total: trainable.length,
      completions_merged: 0,
    }
    const dropped: ExcludedCompletion[] = []
    const drift = new DriftStats()
    const chains = grouped.map((chain): StrictChain => {
      const eot = endOfTurnTokenId ?? detectEotPolar(chain)
      const walk = new ChainWalk(chain[0] as CompletionRecord, eot, false, chain.length > 1)
      let kept = 1
      while (kept < chain.length && walk.add(chain[kept] as CompletionRecord)) kept++
      stats.completions_merged += kept
      if (kept === chain.length) stats.chains_reconstructed_full++
      else stats.chains_reconstructed_truncated++
      for (const record of chain.slice(kept)) dropped.push(excludedEntry(record, 'dropped_after_break'))
      drift.add(walk.turns)
      return { records: chain, kept, end_of_turn_token_id: eot }
    })
    const metadata = {
      ...trajectoryMetadata('prefix_merging', records, session, chains.length),
      reconstruction_stats: {
        ...stats,
        records_total: records.length,
        completions_excluded: excluded.length,
        completions_dropped: dropped.length,
        drift: drift.toJSON(),
      },
      reconstruction: { mode: 'strict', end_of_turn_token_id: endOfTurnTokenId },
      excluded_completions: [...excluded, ...dropped],
    }
    if (chains.length === 0) {
      return { status: 'ERROR', metadata, chains, error: records.length === 0 ? 'no completions' : 'no trainable completions' }
    }
    return { status: 'COMPLETED', metadata, chains, error: null }
  }
  return { trainable, place, finish }
}

/**
 * The second pass for one chain: yields each record just before it reads the record's request (and
 * is resumed once the record may be loaded), returns the chain's trace.
 */
export function* strictTraceSteps(chain: StrictChain): Generator<CompletionRecord, Trace, void> {
  const first = chain.records[0] as CompletionRecord
  yield first
  const walk = new ChainWalk(first, chain.end_of_turn_token_id, true, true)
  for (let i = 1; i < chain.kept; i++) {
    const record = chain.records[i] as CompletionRecord
    yield record
    if (!walk.add(record)) throw new Error(`Polar-strict: completion ${record.completion_id} no longer extends its chain`)
  }
  const merged = chain.records.slice(0, chain.kept)
  const last = merged.at(-1) as CompletionRecord
  return {
    prompt_ids: walk.promptIds,
    response_ids: walk.responseIds(),
    loss_mask: walk.lossMask,
    prompt_messages: walk.promptMessages,
    response_messages: walk.responseMessages,
    tools: walk.tools,
    finish_reason: last.finish_reason,
    response_logprobs: finalizeLogprobs(walk.slots, walk.lossMask),
    reward: null,
    reward_components: {},
    metadata: {
      ...first.metadata,
      completion_metadata: merged.map((record) => ({ ...record.metadata })),
      source_completion_ids: merged.map((record) => record.completion_id),
      agent: first.agent,
      end_of_turn_token_id: chain.end_of_turn_token_id,
      context_drift_tokens_max: walk.turns.reduce((max, turn) => Math.max(max, turn.context_drift_tokens), 0),
      trained_tokens_under_drift: trainedUnderDrift(walk.turns),
      turns: walk.turns,
    },
  }
}

/** One chain's trace over records in memory. */
export function buildStrictTrace(chain: StrictChain): Trace {
  const steps = strictTraceSteps(chain)
  for (;;) {
    const step = steps.next()
    if (step.done) return step.value
  }
}

export function buildPrefixMergingStrict(
  records: readonly CompletionRecord[],
  session: SessionInfo | undefined,
  endOfTurnTokenId: number | null,
): Trajectory {
  const planning = startPrefixMergingStrict(records, session, endOfTurnTokenId)
  for (const record of planning.trainable) planning.place(record)
  const { status, metadata, error, chains } = planning.finish()
  return { status, metadata, traces: chains.map(buildStrictTrace), error }
}
