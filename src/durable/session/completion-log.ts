/**
 * @module
 * The session's completion log: a plain class over a small SQL interface and a blob store, testable
 * without a Durable Object.
 *
 * Every completion is delta-coded against a *base* completion (the recent one whose prompt shares the
 * longest token prefix): prompt = base prompt[0:shared] + suffix tokens; request bodies = base text
 * with a different middle. Storage therefore grows with new tokens, not with the context (linear), at
 * any session length: chains are never cut. A read walks its chain backwards (`delta-chain.ts`), fetching
 * ancestors in batches with one recursive query each and stopping at the first one in memory, and copies
 * each stored token and character at most once.
 *
 * The body sent upstream differs from the harness's own body of the same turn by a few edits (the engine
 * reads `reasoning` where the harness sent `reasoning_content`, in every assistant message). When its middle
 * is mostly text of this row's original middle, it is stored as copies of that (`request_edits`, schema v4,
 * `copyCode`): each turn's new text once, plus a short edit list, and a read still touches this row only.
 *
 * Rows written before schema v2 (`request_length IS NULL`) were cut every 48 levels and are still read
 * the old way, forwards from their chain's root.
 */
import type { CompletionRecord, ResponseMessage } from '../../contract/completion-record.ts'
import { ENGINE_CAPTURE_PARAMS } from '../../normalize/engine/engine-request.ts'
import { BaseCache, type BaseBudget } from './base-cache-budget.ts'
import { type BlobStore, completionBlobKey, SPILL_THRESHOLD_BYTES, storedSize } from './blob-store.ts'
import type { CompletionInput } from './record.ts'
import type { Sql, SqlValue } from './sql.ts'
import { type ChainBase, type ChainLevel, resolveChain } from './delta-chain.ts'
import {
  type Coding,
  extendLayout,
  layoutOf,
  type MessageIndex,
  type MessageLayout,
  mapCoded,
  messageIndex,
  pushPiece,
} from './message-layout.ts'
import { applyCopyCode, applyTextDelta, type CopyCode, copyCode, copyCodePieces, detached, diffText, type TextDelta } from './text-delta.ts'
import { diffTexts, flatText, sliceable, type Text, textCommonPrefix, textLength, textSlice } from './edited-text.ts'
import {
  canonicalPromptText,
  type PromptText,
  parsePromptText,
  parsePromptTextAgainst,
  promptTextBytes,
  sharedPromptIds,
} from './prompt-ids.ts'
import { commonPrefixLength, packLogprobs, packTokens, unpackLogprobs, unpackTokens } from './token-codec.ts'

/** Ids one `responseMessages` read answers (bounds the RPC answer well under its 32 MiB limit). */
export const MAX_RESPONSE_MESSAGE_LOOKUPS = 1000

/**
 * What materializing a completion reads of each row (`ChainRow`): the delta fields, not the answer's tokens,
 * logprobs or JSON fields. A wake's first record walks its base's whole chain back; reading every ancestor's
 * answer and metadata too made that walk several times the bytes it needs.
 */
const CHAIN_COLUMNS = [
  'seq',
  'agent',
  'api',
  'delta_depth',
  'prompt_parent',
  'prompt_shared',
  'prompt_length',
  'prompt_suffix',
  'request_base',
  'request_prefix',
  'request_suffix',
  'request_middle',
  'request_edits',
  'original_prefix',
  'original_suffix',
  'original_middle',
  'request_length',
  'original_length',
  'spilled',
] as const satisfies readonly (keyof CompletionRow)[]
/** Ancestors fetched per recursive query while walking a chain back. */
const CHAIN_BATCH = 64
const CHAIN_QUERY = `WITH RECURSIVE chain(seq, hop) AS (
    SELECT ?, 0
    UNION ALL
    SELECT c.prompt_parent, chain.hop + 1 FROM chain JOIN rg_completions c ON c.seq = chain.seq
    WHERE c.prompt_parent IS NOT NULL AND c.request_length IS NOT NULL AND chain.hop + 1 < ?
  )
  SELECT ${CHAIN_COLUMNS.map((column) => `r.${column}`).join(', ')} FROM chain JOIN rg_completions r ON r.seq = chain.seq ORDER BY chain.hop`
/** Size estimate for a record's small fields (ids, timing, provenance, usage, keys). */
const RECORD_OVERHEAD_BYTES = 4096
/** Only delta-code against a base sharing at least this many prompt tokens (else store whole). */
const MIN_SHARED_TOKENS = 8
/** `request_base`: the request body is a delta of the base completion's request… */
const REQUEST_BASE_PARENT = 0
/** …or of this completion's own original body (same-dialect harnesses: nearly identical). */
const REQUEST_BASE_ORIGINAL = 1
/**
 * Candidate delta bases: the most recent completions only. A new prompt extends a recent one (the
 * same conversation, or a parallel sub-agent's); comparing against every cached prompt would make
 * each record O(cache) instead of O(prompt).
 */
const RECENT_BASES = 16
/** A request middle shorter than this is stored as it is (coding it against the original could save little). */
const MIN_CODED_MIDDLE = 256
/** A coded middle must store at most this share of the plain middle's characters (else it is stored plain). */
const CODED_SHARE = 0.5
/** Edit lists longer than this (JSON characters) are not kept: the row stays small and never spills them. */
const MAX_EDITS_CHARS = 64 * 1024

interface Materialized {
  seq: number
  agent: string
  api: string
  depth: number
  prompt: Uint32Array
  /** `prompt` as JSON text (the engine's, or canonical once asked for): the base for reading the next prompt's text. */
  promptText: PromptText | null
  /**
   * The body sent upstream, held only when it is not a small edit of `originalText` (translated dialects);
   * else null and rebuilt from `requestEdit` when asked for (`requestTextOf`): the two bodies of a
   * same-dialect call are nearly the same text, and holding both was a third of a 524 KB base.
   */
  requestBody: string | null
  /** The body sent upstream as a delta of `originalText` (null: `requestBody` holds it). */
  requestEdit: TextDelta | null
  originalText: string
  /** Where the upstream body's messages lie (worked out when first asked for: entries read from storage). */
  layout?: MessageLayout | null
  /** How the upstream body is coded against `originalText` (entries recorded in this wake, coded that way). */
  served?: { delta: TextDelta; shift: number }
  /** What the entry holds, by `baseBytes` (charged to the budget). */
  bytes: number
}

/** The upstream body of a base: held, or its original with the edit (compared and sliced in parts, `edited-text.ts`). */
function requestOf(entry: Materialized): Text {
  return entry.requestBody ?? { base: entry.originalText, delta: entry.requestEdit as TextDelta }
}

/** The upstream body of a base as one string (reads and chain walks: copied when held as an edit). */
function requestTextOf(entry: Materialized): string {
  return flatText(requestOf(entry))
}

/** A base as the chain walk reads it (its upstream body rebuilt when held as an edit). */
function chainBaseOf(entry: Materialized): ChainBase {
  return { prompt: entry.prompt, originalText: entry.originalText, requestText: requestTextOf(entry) }
}

/**
 * How a base holds its upstream body: as an edit of its original when the edit's middle is under half the
 * body (the edge's own rule for `request_delta`), else as it is.
 */
function requestHeld(requestText: string, edit: TextDelta): { requestBody: string | null; requestEdit: TextDelta | null } {
  // The edit's middle is often a slice of the body (a diff's): copied, or it would keep the body alive.
  return edit.middle.length * 2 < requestText.length
    ? { requestBody: null, requestEdit: { ...edit, middle: detached(edit.middle) } }
    : { requestBody: requestText, requestEdit: null }
}

/** A base's small objects (the entry, its deltas, its layout's object): measured ~4 KB (`base-heap.test.ts`). */
const BASE_OVERHEAD_BYTES = 8192

/**
 * Bytes a base holds, an upper bound of its heap (`test/unit/edge/base-heap.test.ts` measures it): the whole
 * buffer its prompt ids view (a prompt store's spare room included), the buffer of the prompt text's UTF-8
 * bytes and its separator marks, the bodies at two (V8 keeps ASCII text at one: JSON bodies are
 * mostly that), the upstream body's edit instead of the body when held so, the message layout, its objects.
 */
function baseBytes(entry: Omit<Materialized, 'bytes'>): number {
  return (
    BASE_OVERHEAD_BYTES +
    entry.prompt.buffer.byteLength +
    promptTextCharge(entry.promptText) +
    (entry.originalText.length + (entry.requestBody ?? entry.requestEdit?.middle ?? '').length) * 2 +
    (entry.layout?.ends.byteLength ?? 0)
  )
}

/** One row of `rg_completions` as stored. */
export interface CompletionRow {
  [key: string]: SqlValue
  seq: number
  completion_id: string
  created_at: string
  api: string
  agent: string
  model_requested: string
  model_used: string
  stream: number
  status: string
  trainable: number
  finish_reason: string | null
  stop_reason: string | null
  delta_depth: number
  prompt_parent: number | null
  prompt_shared: number
  prompt_length: number | null
  prompt_suffix: ArrayBuffer | null
  response_tokens: ArrayBuffer | null
  logprobs: ArrayBuffer | null
  logprobs_format: number
  request_base: number
  request_prefix: number
  request_suffix: number
  /** The middle of the upstream body, or with `request_edits` the characters its copies do not cover. */
  request_middle: string | null
  /** Schema v4: the upstream body's middle as copies of `original_middle` (`CopyCode.ops` as JSON); null: `request_middle` is the middle. */
  request_edits: string | null
  original_prefix: number
  original_suffix: number
  original_middle: string | null
  /** Body lengths (UTF-16 units); null on rows written before schema v2. */
  request_length: number | null
  original_length: number | null
  /** `MessageIndex` of the upstream body as JSON (`message-layout.ts`); null before schema v3 or without `messages`. */
  request_messages: string | null
  spilled: string | null
  response_message: string | null
  usage: string | null
  warnings: string
  error: string | null
  timing: string
  provenance: string
  metadata: string
}

/** The columns a chain walk reads (`CHAIN_COLUMNS`). */
type ChainRow = Pick<CompletionRow, (typeof CHAIN_COLUMNS)[number]>

export interface RecordResult {
  seq: number
  completion_id: string
  /** Bytes this completion added to SQLite and R2. */
  stored_bytes: number
  /** What the whole session holds now (the edge refuses further calls past `ROLLGATE_MAX_SESSION_BYTES`). */
  session_bytes: number
  duplicate: boolean
}

export interface ReadOptions {
  /** Leave `original_request` null (the builders never read it; it is the largest parsed field). */
  withoutOriginal?: boolean
}

/** What trajectory metadata and exclusion lists need from every record, without its tokens or bodies. */
export interface CompletionHeader {
  seq: number
  completion_id: string
  timestamp: string
  api: string
  agent: string
  model_requested: string
  model_used: string
  status: string
  trainable: boolean
  /** When the call started and how long it took (`capture_timing` of a streamed trajectory). */
  timing: CompletionRecord['timing']
}

export interface StorageStats {
  completions: number
  prompt_tokens_total: number
  unique_prompt_tokens: number
  output_tokens: number
  token_bytes: number
  text_bytes: number
  metadata_bytes: number
  spilled_objects: number
}

const EMPTY_TOKENS = new Uint32Array(0)

/** A delta base candidate before it is rebuilt: enough to skip it or to pick it as the fallback. */
interface Candidate {
  seq: number
  promptLength: number
  agent: string
  api: string
}

/** A prompt text's bytes: the whole buffer they view (off the V8 heap), and its marks. */
function promptTextCharge(text: PromptText | null): number {
  return text ? text.bytes.buffer.byteLength + text.marks.byteLength : 0
}

export class CompletionLog {
  readonly #sql: Sql
  readonly #blobs: BlobStore
  readonly #sessionId: string
  /** Materialized completions kept as delta bases, bounded by the isolate's budget (`base-cache-budget.ts`). */
  readonly #cache: BaseCache<Materialized>
  /**
   * The most recent completions, newest last: the delta base candidates. Always the last `RECENT_BASES` in
   * storage (after a wake too), each rebuilt when first compared: which base a record gets depends on what is
   * stored, never on what the object happened to hold in memory (a cold object stores the same bytes).
   */
  readonly #recent: Candidate[] = []
  #nextSeq: number | null = null
  /** Running total of stored bytes (summed once per wake, then kept up to date by `record`). */
  #sessionBytes: number | null = null
  #warmed = false
  /** Recent prompts the last record compared its prompt with (text and ids; tests bound it). */
  lastPromptComparisons = 0
  /** How the last recorded body's messages were located: only the new ones scanned, or the whole body (tests). */
  lastMessagesScan: 'new' | 'whole' | null = null
  /** How the last recorded prompt text was read: ids copied from the base, characters parsed (tests bound them). */
  lastPromptRead: { copied: number; parsedChars: number } | null = null

  /** Code upstream middles against the original's (`request_edits`); false writes the v3 layout (tests compare both). */
  readonly #requestEdits: boolean

  /** `budget`: the memory bound shared with other logs (default: the isolate's; tests give their own). */
  constructor(sql: Sql, blobs: BlobStore, sessionId: string, options: { requestEdits?: boolean; budget?: BaseBudget } = {}) {
    this.#sql = sql
    this.#blobs = blobs
    this.#sessionId = sessionId
    this.#requestEdits = options.requestEdits ?? true
    // Named by the session: this object replaces any earlier one of the session in the isolate (its bases go).
    this.#cache = new BaseCache(options.budget, sessionId)
  }

  /** Bytes of delta bases this log holds in memory, by the entries' own sizes (tests). */
  get cachedBytes(): number {
    return this.#cache.entryBytes()
  }

  /** What read-side helpers over the same tables need (`log-records.ts`). */
  get storage(): { sql: Sql; blobs: BlobStore; sessionId: string } {
    return { sql: this.#sql, blobs: this.#blobs, sessionId: this.#sessionId }
  }

  count(): number {
    return this.#sql.first<{ n: number }>('SELECT COUNT(*) AS n FROM rg_completions')?.n ?? 0
  }

  /**
   * Store one completion. Idempotent by `completion_id`: a record sent again returns the first one's seq
   * (`duplicate`). The check is the insert itself (`ON CONFLICT … DO NOTHING`): one statement per record,
   * not a lookup before it; only a record that spills to R2 looks first, so a duplicate never writes blobs.
   */
  async record(input: CompletionInput): Promise<RecordResult> {
    const sessionBytesBefore = this.sessionBytes()

    const requestText = input.request_delta ? applyTextDelta(input.original_text, input.request_delta) : input.request_text
    const seq = this.#allocateSeq()
    await this.#warm()
    this.lastPromptComparisons = 0
    const read = await this.#readPrompt(input)
    const promptIds = read.ids
    const prompt = promptIds ?? EMPTY_TOKENS
    const { base, shared } = await this.#chooseBase(prompt, input.agent, input.api, read.known)
    const warnings = read.unreadable
      ? [
          ...input.warnings,
          { code: 'engine_prompt_ids_unreadable', message: 'the engine sent prompt_token_ids that are not JSON; recorded without them' },
        ]
      : input.warnings
    const original = base ? diffText(base.originalText, input.original_text) : { prefix: 0, suffix: 0, middle: input.original_text }
    // The body sent upstream is usually the harness's body with a few fields changed: code it against
    // that, unless the base's upstream body is closer (translated dialects).
    // (The edge sends that delta when it is small: no second diff of two large strings.)
    const fromOriginal = input.request_delta ?? diffText(input.original_text, requestText)
    // A delta's middle is at least the growth from its base: skip a diff that cannot be smaller (one pass less).
    // Both upstream bodies are compared in parts (the new one is its original with the edge's edit): never copied whole.
    const baseRequest: Text = base ? requestOf(base) : ''
    const request_: Text = input.request_delta ? { base: input.original_text, delta: input.request_delta } : requestText
    const parentCanWin = base !== null && fromOriginal.middle.length > requestText.length - textLength(baseRequest)
    const fromParent = base && parentCanWin ? diffTexts(baseRequest, request_) : null
    const requestBase = fromParent && fromParent.middle.length < fromOriginal.middle.length ? REQUEST_BASE_PARENT : REQUEST_BASE_ORIGINAL
    const request = requestBase === REQUEST_BASE_PARENT && fromParent ? fromParent : fromOriginal
    const edits = this.#codeMiddle(request.middle, original.middle)
    const logprobs = packLogprobs(input.response_logprobs)
    const messages = this.#indexMessages(
      base,
      baseRequest,
      request_,
      requestText,
      input.original_text,
      requestBase === REQUEST_BASE_PARENT,
      request,
      original,
      edits,
    )

    const fields: Record<string, ArrayBuffer | string | null> = {
      prompt_suffix: promptIds ? packTokens(prompt.subarray(shared)) : null,
      response_tokens: input.response_token_ids ? packTokens(input.response_token_ids) : null,
      logprobs: logprobs.buffer,
      request_middle: edits ? edits.literals : request.middle,
      original_middle: original.middle,
    }
    const spilled: Record<string, string> = {}
    let storedBytes = 0
    let checked = false
    for (const [field, value] of Object.entries(fields)) {
      const size = storedSize(value)
      storedBytes += size
      if (value !== null && size > SPILL_THRESHOLD_BYTES) {
        if (!checked) {
          checked = true
          if (this.#recordedSeq(input.completion_id) !== null) return this.#duplicate(input.completion_id, seq)
        }
        const key = completionBlobKey(this.#sessionId, seq, field)
        await this.#blobs.put(key, value)
        spilled[field] = key
        fields[field] = null
      }
    }

    const trainable =
      input.status === 'ok' && promptIds !== null && input.response_token_ids !== null && input.response_token_ids.length > 0
    const json = {
      response_message: input.response_message ? JSON.stringify(input.response_message) : null,
      usage: input.usage ? JSON.stringify(input.usage) : null,
      warnings: JSON.stringify(warnings),
      timing: JSON.stringify(input.timing),
      provenance: JSON.stringify(input.provenance),
      metadata: JSON.stringify(input.metadata),
      spilled: Object.keys(spilled).length ? JSON.stringify(spilled) : null,
      request_messages: messages ? JSON.stringify(messages.index) : null,
      request_edits: edits ? edits.json : null,
    }
    for (const value of Object.values(json)) storedBytes += value?.length ?? 0

    const inserted = this.#sql.first<{ seq: number }>(
      `INSERT INTO rg_completions (seq, completion_id, created_at, api, agent, model_requested, model_used, stream,
        status, trainable, finish_reason, stop_reason, delta_depth, prompt_parent, prompt_shared, prompt_length,
        prompt_suffix, response_tokens, logprobs, logprobs_format, request_base, request_prefix, request_suffix, request_middle,
        request_edits, original_prefix, original_suffix, original_middle, request_length, original_length, request_messages, spilled,
        response_message, usage, warnings, error, timing, provenance, metadata)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (completion_id) DO NOTHING RETURNING seq`,
      seq,
      input.completion_id,
      input.timestamp,
      input.api,
      input.agent,
      input.model_requested,
      input.model_used,
      input.stream ? 1 : 0,
      input.status,
      trainable ? 1 : 0,
      input.finish_reason,
      input.stop_reason === null ? null : JSON.stringify(input.stop_reason),
      base ? base.depth + 1 : 0,
      base ? base.seq : null,
      shared,
      promptIds ? prompt.length : null,
      fields.prompt_suffix as ArrayBuffer | null,
      fields.response_tokens as ArrayBuffer | null,
      fields.logprobs as ArrayBuffer | null,
      logprobs.format,
      requestBase,
      request.prefix,
      request.suffix,
      fields.request_middle as string | null,
      json.request_edits,
      original.prefix,
      original.suffix,
      fields.original_middle as string | null,
      requestText.length,
      input.original_text.length,
      json.request_messages,
      json.spilled,
      json.response_message,
      json.usage,
      json.warnings,
      input.error,
      json.timing,
      json.provenance,
      json.metadata,
    )
    if (!inserted) return this.#duplicate(input.completion_id, seq)
    this.#recent.push({ seq, promptLength: prompt.length, agent: input.agent, api: input.api })
    if (this.#recent.length > RECENT_BASES) this.#recent.shift()
    this.#protectNewest()
    const depth = base ? base.depth + 1 : 0
    const held = requestHeld(requestText, fromOriginal)
    const entry: Omit<Materialized, 'bytes'> = {
      seq,
      agent: input.agent,
      api: input.api,
      depth,
      prompt,
      promptText: read.text,
      ...held,
      originalText: input.original_text,
      layout: messages?.layout ?? null,
      // `request` is `fromOriginal` here: the held copy of its middle, when held as an edit.
      ...(requestBase === REQUEST_BASE_ORIGINAL
        ? { served: { delta: held.requestEdit ?? request, shift: input.original_text.length - requestText.length } }
        : {}),
    }
    this.#remember({ ...entry, bytes: baseBytes(entry) })
    this.#sessionBytes = sessionBytesBefore + storedBytes
    return { seq, completion_id: input.completion_id, stored_bytes: storedBytes, session_bytes: this.#sessionBytes, duplicate: false }
  }

  /**
   * Records after `afterSeq`, at most `limit`, and stopping once their estimated serialized size reaches
   * `maxBytes` (at least one record): a DO RPC answer may not exceed 32 MiB, and late records of a long
   * rollout are MBs each.
   */
  async list(afterSeq = -1, limit = 100, maxBytes = Number.POSITIVE_INFINITY, options: ReadOptions = {}): Promise<CompletionRecord[]> {
    const rows = this.#sql.all<CompletionRow>('SELECT * FROM rg_completions WHERE seq > ? ORDER BY seq LIMIT ?', afterSeq, limit)
    const out: CompletionRecord[] = []
    let bytes = 0
    for (const row of rows) {
      const { record, bytes: size } = await this.#toSizedRecord(row, options)
      out.push(record)
      bytes += size
      if (bytes >= maxBytes) break
    }
    return out
  }

  /** Every record, in arrival order (paged internally so memory holds one page of rows at a time). */
  async all(options: ReadOptions = {}): Promise<CompletionRecord[]> {
    const out: CompletionRecord[] = []
    for (let after = -1; ; ) {
      const page = await this.list(after, 200, Number.POSITIVE_INFINITY, options)
      out.push(...page)
      const last = page.at(-1)
      if (!last || page.length < 200) return out
      after = last.seq
    }
  }

  /** Records one at a time, in arrival order: memory holds one small page of records, never the session. */
  async *stream(options: ReadOptions = {}, pageSize = 4): AsyncGenerator<CompletionRecord> {
    for (let after = -1; ; ) {
      const page = await this.list(after, pageSize, Number.POSITIVE_INFINITY, options)
      for (const record of page) yield record
      const last = page.at(-1)
      if (!last || page.length < pageSize) return
      after = last.seq
    }
  }

  /** The small fields of every record (no tokens, no bodies), in arrival order. */
  headers(): CompletionHeader[] {
    return this.#sql
      .all<Omit<CompletionHeader, 'trainable' | 'timing'> & { trainable: number; timing: string }>(
        'SELECT seq, completion_id, created_at AS timestamp, api, agent, model_requested, model_used, status, trainable, timing FROM rg_completions ORDER BY seq',
      )
      .map((row) => ({ ...row, trainable: row.trainable === 1, timing: JSON.parse(row.timing) }))
  }

  /** The body one completion sent upstream, as text (a streamed build parses requests incrementally). */
  async requestText(seq: number): Promise<string> {
    const row = this.#sql.first<CompletionRow>('SELECT * FROM rg_completions WHERE seq = ?', seq)
    if (!row) throw new Error(`completion ${seq} missing`)
    return requestTextOf(await this.#materializeRow(row))
  }

  #servedRequest(requestText: string, provenance: CompletionRecord['provenance']): Record<string, unknown> {
    const request = JSON.parse(requestText) as Record<string, unknown>
    for (const key of Object.keys(ENGINE_CAPTURE_PARAMS[provenance.upstream_kind])) delete request[key]
    // Streaming is the harness's choice, recorded as `stream`; the engine is always called without it.
    delete request.stream
    delete request.stream_options
    return request
  }

  async getById(completionId: string): Promise<CompletionRecord | null> {
    const row = this.#sql.first<CompletionRow>('SELECT * FROM rg_completions WHERE completion_id = ?', completionId)
    return row ? this.#toRecord(row) : null
  }

  /**
   * The sampled response messages of `ok` completions, by id (ids not found or not `ok` are absent): one
   * indexed read of a small column, for the edge restoring replayed turns — no token ids decoded.
   */
  responseMessages(completionIds: readonly string[]): Record<string, ResponseMessage> {
    const out: Record<string, ResponseMessage> = {}
    const unique = [...new Set(completionIds)]
    // SQLite in Durable Objects binds at most 100 parameters per statement.
    for (let start = 0; start < unique.length; start += 100) {
      const ids = unique.slice(start, start + 100)
      const rows = this.#sql.all<{ completion_id: string; response_message: string | null }>(
        `SELECT completion_id, response_message FROM rg_completions WHERE status = 'ok' AND completion_id IN (${ids.map(() => '?').join(', ')})`,
        ...ids,
      )
      for (const row of rows) if (row.response_message) out[row.completion_id] = JSON.parse(row.response_message) as ResponseMessage
    }
    return out
  }

  async get(seq: number): Promise<CompletionRecord | null> {
    const row = this.#sql.first<CompletionRow>('SELECT * FROM rg_completions WHERE seq = ?', seq)
    return row ? this.#toRecord(row) : null
  }

  /** Bytes the session stores in SQLite (tokens, body deltas, small fields). */
  sessionBytes(): number {
    if (this.#sessionBytes === null) {
      const stats = this.stats()
      this.#sessionBytes = stats.token_bytes + stats.text_bytes + stats.metadata_bytes
    }
    return this.#sessionBytes
  }

  stats(): StorageStats {
    const row = this.#sql.first<Record<string, number>>(
      `SELECT COUNT(*) AS completions,
        COALESCE(SUM(prompt_length), 0) AS prompt_tokens_total,
        COALESCE(SUM(prompt_length - prompt_shared), 0) AS unique_prompt_tokens,
        COALESCE(SUM(LENGTH(response_tokens)), 0) / 4 AS output_tokens,
        COALESCE(SUM(LENGTH(prompt_suffix) + LENGTH(response_tokens) + COALESCE(LENGTH(logprobs), 0)), 0) AS token_bytes,
        COALESCE(SUM(LENGTH(CAST(request_middle AS BLOB)) + LENGTH(CAST(original_middle AS BLOB))
          + COALESCE(LENGTH(CAST(request_messages AS BLOB)), 0) + COALESCE(LENGTH(request_edits), 0)), 0) AS text_bytes,
        COALESCE(SUM(LENGTH(response_message) + LENGTH(usage) + LENGTH(warnings) + LENGTH(timing)
          + LENGTH(provenance) + LENGTH(metadata) + LENGTH(completion_id) + LENGTH(created_at)), 0) AS metadata_bytes,
        COALESCE(SUM(spilled IS NOT NULL), 0) AS spilled_objects
       FROM rg_completions`,
    )
    return {
      completions: row?.completions ?? 0,
      prompt_tokens_total: row?.prompt_tokens_total ?? 0,
      unique_prompt_tokens: row?.unique_prompt_tokens ?? 0,
      output_tokens: row?.output_tokens ?? 0,
      token_bytes: row?.token_bytes ?? 0,
      text_bytes: row?.text_bytes ?? 0,
      metadata_bytes: row?.metadata_bytes ?? 0,
      spilled_objects: row?.spilled_objects ?? 0,
    }
  }

  #recordedSeq(completionId: string): number | null {
    return this.#sql.first<{ seq: number }>('SELECT seq FROM rg_completions WHERE completion_id = ?', completionId)?.seq ?? null
  }

  /** A record sent again: the first one stands; the seq this one took is given back when no later record took one. */
  #duplicate(completionId: string, seq: number): RecordResult {
    if (this.#nextSeq === seq + 1) this.#nextSeq = seq
    const first = this.#recordedSeq(completionId)
    if (first === null) throw new Error(`completion ${completionId} conflicts but is not stored`)
    return { seq: first, completion_id: completionId, stored_bytes: 0, session_bytes: this.sessionBytes(), duplicate: true }
  }

  #allocateSeq(): number {
    if (this.#nextSeq === null) {
      const row = this.#sql.first<{ last: number | null }>('SELECT MAX(seq) AS last FROM rg_completions')
      this.#nextSeq = (row?.last ?? -1) + 1
    }
    return this.#nextSeq++
  }

  /**
   * After a wake the memory is empty: list the recent completions (one small read). Candidates are rebuilt
   * when a record first compares them; the usual next turn compares only the newest (one chain walk, its
   * own size plus one small row per level: \`delta-chain.ts\`).
   */
  async #warm(): Promise<void> {
    if (this.#warmed) return
    this.#warmed = true
    const rows = this.#sql.all<{ seq: number; prompt_length: number | null; agent: string; api: string }>(
      'SELECT seq, prompt_length, agent, api FROM rg_completions ORDER BY seq DESC LIMIT ?',
      RECENT_BASES,
    )
    for (const row of rows.reverse()) {
      this.#recent.push({ seq: row.seq, promptLength: row.prompt_length ?? 0, agent: row.agent, api: row.api })
    }
    this.#protectNewest()
  }

  /**
   * The new prompt's ids: given, or read from the engine's text against the recent prompt sharing the most
   * ids by text (copied, not parsed). Also returns, per recent prompt compared, how many ids it certainly
   * shares (`#chooseBase` then compares ids only past that point: one step when the formats agree).
   */
  async #readPrompt(input: CompletionInput): Promise<{
    ids: Uint32Array | null
    text: PromptText | null
    known: Map<number, number>
    unreadable: boolean
  }> {
    const known = new Map<number, number>()
    if (input.prompt_token_text === undefined || input.prompt_token_text === null) {
      return { ids: input.prompt_token_ids, text: null, known, unreadable: false }
    }
    const text = promptTextBytes(input.prompt_token_text)
    let best: Materialized | null = null
    let bestShared = 0
    for (let i = this.#recent.length - 1; i >= 0; i--) {
      const candidate = this.#recent[i] as Candidate
      // A prompt no longer than the best shared prefix cannot share more (the earlier turns of the same
      // conversation, when the last turn was rewritten): not compared, so a call costs one comparison.
      if (candidate.promptLength <= bestShared) continue
      const entry = this.#cache.get(candidate.seq) ?? (await this.#materialize(candidate.seq))
      this.lastPromptComparisons++
      const shared = sharedPromptIds(this.#promptTextOf(entry), text)
      known.set(entry.seq, shared)
      if (shared > bestShared) {
        best = entry
        bestShared = shared
      }
      // Same stopping rule as `#chooseBase` (which, comparing ids, stops no later than this).
      if (shared === entry.prompt.length && shared >= MIN_SHARED_TOKENS) break
    }
    const parsed = best?.promptText
      ? parsePromptTextAgainst(text, { ids: best.prompt, text: best.promptText }, bestShared)
      : parsePromptText(text)
    this.lastPromptRead = { copied: parsed.copied, parsedChars: parsed.parsedChars }
    return { ids: parsed.ids, text: parsed.text, known, unreadable: parsed.unreadable }
  }

  /**
   * Where the upstream body's messages lie, and where the text of the messages it adds to its base's is
   * stored (`message-layout.ts`): a build then parses only those. Costs the new elements (plus one compare
   * of the body with its base's) when the body extends the base's; one scan of the body otherwise.
   */
  #indexMessages(
    base: Materialized | null,
    baseRequest: Text,
    requestParts: Text,
    requestText: string,
    originalText: string,
    fromParent: boolean,
    request: TextDelta,
    original: TextDelta,
    edits: CopyCode | null,
  ): { layout: MessageLayout; index: MessageIndex } | null {
    const baseLayout = base ? this.#layoutOf(base) : null
    const shared =
      base === null
        ? 0
        : fromParent
          ? request.prefix
          : this.#sharedServedPrefix(base, baseRequest, requestParts, originalText, request, original)
    // The body as sent is its base text with a new middle (`request`): slices of it are built from those parts.
    const coded: Text = { base: fromParent ? baseRequest : originalText, delta: request }
    const extended = extendLayout(baseLayout, requestText, (start) => textSlice(coded, start), shared)
    this.lastMessagesScan = extended?.scanned ?? null
    if (extended === null) return null
    const originalCoding: Coding = { delta: original, base: base?.originalText ?? null, field: 'o' }
    // A coded middle's characters are this row's literals (`q`) and copies of its original middle (`o`).
    const middle: Coding['middle'] = edits
      ? (start, end, out) => copyCodePieces(edits.ops, start, end, (literal, from, to) => pushPiece(out, [literal ? 'q' : 'o', from, to]))
      : undefined
    const coding: Coding = fromParent
      ? { delta: request, base: sliceable(baseRequest), field: 'q', middle }
      : { delta: request, base: originalText, field: 'q', middle, below: (start, end, out) => mapCoded(start, end, originalCoding, out) }
    return { layout: extended.layout, index: messageIndex(extended.layout, extended.kept, extended.same, coding) }
  }

  /**
   * How many leading characters a body coded against its own original shares with its base's body, at least:
   * both map their first characters straight to their originals, which share `original.prefix`; with the
   * same edit (prefix, middle, shift) they agree past the middle too. Without the base's coding: compared.
   */
  #sharedServedPrefix(
    base: Materialized,
    baseRequest: Text,
    requestText: Text,
    originalText: string,
    request: TextDelta,
    original: TextDelta,
  ): number {
    const served = base.served
    if (served === undefined) return textCommonPrefix(baseRequest, requestText)
    let shared = Math.min(request.prefix, served.delta.prefix, original.prefix)
    // Past the middle, request position i is original position i + shift.
    const requestLength = textLength(requestText)
    const shift = originalText.length - requestLength
    if (
      request.prefix === served.delta.prefix &&
      request.middle === served.delta.middle &&
      shift === served.shift &&
      request.prefix <= original.prefix
    ) {
      shared = Math.max(shared, request.prefix + request.middle.length, original.prefix - shift)
    }
    return Math.min(shared, requestLength, textLength(baseRequest))
  }

  /** A cached body's messages layout, scanned the first time it is asked for (entries read from storage). */
  #layoutOf(entry: Materialized): MessageLayout | null {
    if (entry.layout !== undefined) return entry.layout
    entry.layout = layoutOf(requestTextOf(entry))
    this.#cache.grew(entry, entry.layout?.ends.byteLength ?? 0)
    return entry.layout
  }

  /** A cached prompt's text, written canonically the first time it is asked for (entries read from storage). */
  #promptTextOf(entry: Materialized): PromptText {
    if (entry.promptText) return entry.promptText
    entry.promptText = canonicalPromptText(entry.prompt)
    this.#cache.grew(entry, promptTextCharge(entry.promptText))
    return entry.promptText
  }

  /** `known`: ids certainly shared with some recent prompts (from their text); compared only past that. */
  async #chooseBase(
    prompt: Uint32Array,
    agent: string,
    api: string,
    known: Map<number, number>,
  ): Promise<{ base: Materialized | null; shared: number }> {
    let best: Materialized | null = null
    let bestShared = 0
    let fallback: Candidate | null = null
    for (let i = this.#recent.length - 1; i >= 0; i--) {
      const candidate = this.#recent[i] as Candidate
      // As in `#readPrompt`: a prompt no longer than the best shared prefix cannot share more.
      if (candidate.promptLength > bestShared) {
        const entry = this.#cache.get(candidate.seq) ?? (await this.#materialize(candidate.seq))
        this.lastPromptComparisons++
        const shared = commonPrefixLength(entry.prompt, prompt, known.get(entry.seq))
        if (shared >= MIN_SHARED_TOKENS && shared > bestShared) {
          best = entry
          bestShared = shared
          // The new prompt extends this one entirely (the usual next turn): no other base can do better
          // without being longer, so stop comparing (one prompt comparison per call).
          if (shared === entry.prompt.length) break
        }
      }
      if (!fallback && candidate.agent === agent && candidate.api === api) fallback = candidate
    }
    if (best) return { base: best, shared: bestShared }
    if (!fallback) return { base: null, shared: 0 }
    const base = this.#cache.get(fallback.seq) ?? (await this.#materialize(fallback.seq))
    return { base, shared: commonPrefixLength(base.prompt, prompt, known.get(fallback.seq)) }
  }

  /** `middle` as copies of `source` (this row's original middle), when that stores at most `CODED_SHARE` of it. */
  #codeMiddle(middle: string, source: string): (CopyCode & { json: string }) | null {
    if (!this.#requestEdits || middle.length < MIN_CODED_MIDDLE || source.length === 0) return null
    const code = copyCode(source, middle, Math.floor(middle.length * CODED_SHARE))
    if (code === null) return null
    const json = JSON.stringify(code.ops)
    return json.length <= MAX_EDITS_CHARS ? { ...code, json } : null
  }

  #remember(entry: Materialized): void {
    this.#cache.set(entry)
  }

  /**
   * The candidates the next turn of each agent compares first: the newest recent completion per agent. The
   * cache evicts them last (a sub-agent's calls between the main agent's must not evict the main base).
   */
  #protectNewest(): void {
    const newest = new Set<number>()
    const agents = new Set<string>()
    for (let i = this.#recent.length - 1; i >= 0; i--) {
      const candidate = this.#recent[i] as Candidate
      if (agents.has(candidate.agent)) continue
      agents.add(candidate.agent)
      newest.add(candidate.seq)
    }
    this.#cache.protect(newest)
  }

  /** A stored field of `row`, fetched from the bucket when it was spilled. */
  async #field<F extends string>(
    row: { spilled: string | null } & { [K in F]: SqlValue },
    field: F,
    kind: 'bytes' | 'text',
  ): Promise<ArrayBuffer | string | null> {
    const value = row[field] as ArrayBuffer | string | null
    if (value !== null || !row.spilled) return value
    const key = (JSON.parse(row.spilled) as Record<string, string>)[field]
    if (!key) return null
    return kind === 'bytes' ? await this.#blobs.getBytes(key) : await this.#blobs.getText(key)
  }

  async #bytes<F extends string>(row: { spilled: string | null } & { [K in F]: SqlValue }, field: F): Promise<ArrayBuffer | null> {
    return (await this.#field(row, field, 'bytes')) as ArrayBuffer | null
  }

  async #text<F extends string>(row: { spilled: string | null } & { [K in F]: SqlValue }, field: F): Promise<string | null> {
    return (await this.#field(row, field, 'text')) as string | null
  }

  async #materialize(seq: number): Promise<Materialized> {
    const cached = this.#cache.get(seq)
    if (cached) return cached
    const row = this.#sql.first<ChainRow>(`SELECT ${CHAIN_COLUMNS.join(', ')} FROM rg_completions WHERE seq = ?`, seq)
    if (!row) throw new Error(`completion ${seq} missing`)
    return this.#materializeRow(row)
  }

  async #materializeRow(row: ChainRow): Promise<Materialized> {
    const cached = this.#cache.get(row.seq)
    if (cached) return cached
    if (row.request_length === null) return this.#materializeLegacy(row)
    // Walk back to the first ancestor in memory (or a root, or a pre-v2 row), a batch per query.
    const rows: ChainRow[] = [row]
    let base: Materialized | null = null
    for (;;) {
      const parentSeq = (rows[rows.length - 1] as ChainRow).prompt_parent
      if (parentSeq === null) break
      const inMemory = this.#cache.get(parentSeq)
      if (inMemory) {
        base = inMemory
        break
      }
      const batch = this.#sql.all<ChainRow>(CHAIN_QUERY, parentSeq, CHAIN_BATCH)
      if (batch.length === 0) throw new Error(`completion ${parentSeq} missing`)
      let stopped = false
      for (const ancestor of batch) {
        const known = this.#cache.get(ancestor.seq)
        if (known || ancestor.request_length === null) {
          base = known ?? (await this.#materializeLegacy(ancestor))
          stopped = true
          break
        }
        rows.push(ancestor)
      }
      if (stopped) break
    }
    const levels: ChainLevel[] = []
    for (const level of rows) levels.push(await this.#chainLevel(level))
    const resolved = resolveChain(levels, base ? chainBaseOf(base) : null)
    // Levels a later wake reads back to rebuild this one: these, and the in-memory base's own.
    return this.#remembered(row, resolved)
  }

  async #chainLevel(row: ChainRow): Promise<ChainLevel> {
    const originalMiddle = (await this.#text(row, 'original_middle')) ?? ''
    const requestMiddle = (await this.#text(row, 'request_middle')) ?? ''
    return {
      shared: row.prompt_shared,
      promptLength: row.prompt_length ?? 0,
      suffix: unpackTokens(await this.#bytes(row, 'prompt_suffix')),
      original: { prefix: row.original_prefix, suffix: row.original_suffix, middle: originalMiddle },
      request: {
        prefix: row.request_prefix,
        suffix: row.request_suffix,
        middle: row.request_edits === null ? requestMiddle : decodeMiddle(row, requestMiddle, originalMiddle),
      },
      requestFromParent: row.request_base === REQUEST_BASE_PARENT,
      originalLength: row.original_length ?? 0,
      requestLength: row.request_length ?? 0,
    }
  }

  #remembered(row: ChainRow, resolved: ChainBase): Materialized {
    // The diff also flattens both texts (the walk builds them from slices of the base's, which would keep it alive).
    const held: Omit<Materialized, 'bytes'> = {
      seq: row.seq,
      agent: row.agent,
      api: row.api,
      depth: row.delta_depth,
      prompt: resolved.prompt,
      promptText: null,
      ...requestHeld(resolved.requestText, diffText(resolved.originalText, resolved.requestText)),
      originalText: resolved.originalText,
    }
    const entry: Materialized = { ...held, bytes: baseBytes(held) }
    this.#remember(entry)
    return entry
  }

  /** Rows written before schema v2: forwards from the chain's root (those chains are at most 48 deep). */
  async #materializeLegacy(row: ChainRow): Promise<Materialized> {
    const cached = this.#cache.get(row.seq)
    if (cached) return cached
    const base = row.prompt_parent === null ? null : await this.#materialize(row.prompt_parent)
    const suffix = unpackTokens(await this.#bytes(row, 'prompt_suffix'))
    const prompt = new Uint32Array(row.prompt_shared + suffix.length)
    if (base) prompt.set(base.prompt.subarray(0, row.prompt_shared))
    prompt.set(suffix, row.prompt_shared)
    const storedMiddle = (await this.#text(row, 'request_middle')) ?? ''
    const originalMiddle = (await this.#text(row, 'original_middle')) ?? ''
    const requestMiddle = row.request_edits === null ? storedMiddle : decodeMiddle(row, storedMiddle, originalMiddle)
    const originalText = base
      ? applyTextDelta(base.originalText, { prefix: row.original_prefix, suffix: row.original_suffix, middle: originalMiddle })
      : originalMiddle
    const requestDelta = { prefix: row.request_prefix, suffix: row.request_suffix, middle: requestMiddle }
    const requestText =
      row.request_base === REQUEST_BASE_PARENT && base
        ? applyTextDelta(requestTextOf(base), requestDelta)
        : applyTextDelta(originalText, requestDelta)
    // Pre-v2 chains are at most 48 levels (read forwards): a bounded walk already.
    return this.#remembered(row, { prompt, originalText, requestText })
  }

  async #toRecord(row: CompletionRow): Promise<CompletionRecord> {
    return (await this.#toSizedRecord(row)).record
  }

  /** The record and an upper estimate of its structured-clone size (two bytes per text char, ≤ 5 per id, 9 per logprob). */
  async #toSizedRecord(row: CompletionRow, options: ReadOptions = {}): Promise<{ record: CompletionRecord; bytes: number }> {
    const full = await this.#materializeRow(row)
    const provenance = JSON.parse(row.provenance) as CompletionRecord['provenance']
    const requestText = requestTextOf(full)
    const request = this.#servedRequest(requestText, provenance)
    const responseTokens = unpackTokens(await this.#bytes(row, 'response_tokens'))
    const logprobs = unpackLogprobs(row.logprobs_format, await this.#bytes(row, 'logprobs'))
    const bytes =
      (requestText.length + full.originalText.length) * 2 +
      (full.prompt.length + responseTokens.length) * 5 +
      (logprobs?.length ?? 0) * 9 +
      (row.response_message?.length ?? 0) * 2 +
      RECORD_OVERHEAD_BYTES
    const record: CompletionRecord = {
      completion_id: row.completion_id,
      session_id: this.#sessionId,
      seq: row.seq,
      timestamp: row.created_at,
      api: row.api as CompletionRecord['api'],
      agent: row.agent,
      model_requested: row.model_requested,
      model_used: row.model_used,
      stream: row.stream === 1,
      status: row.status as CompletionRecord['status'],
      trainable: row.trainable === 1,
      prompt_token_ids: Array.from(full.prompt),
      prompt_delta:
        row.prompt_parent !== null && row.prompt_shared > 0
          ? { parent_seq: row.prompt_parent, shared_prefix_len: row.prompt_shared }
          : null,
      response_token_ids: Array.from(responseTokens),
      response_logprobs: logprobs,
      finish_reason: row.finish_reason,
      stop_reason: row.stop_reason === null ? null : (JSON.parse(row.stop_reason) as string | number),
      request,
      response_message: row.response_message ? JSON.parse(row.response_message) : null,
      original_request: full.originalText && !options.withoutOriginal ? JSON.parse(full.originalText) : null,
      usage: row.usage ? JSON.parse(row.usage) : null,
      warnings: JSON.parse(row.warnings),
      error: row.error,
      timing: JSON.parse(row.timing),
      provenance,
      metadata: JSON.parse(row.metadata),
    }
    return { record, bytes }
  }
}

/** A v4 row's upstream middle from its literals and its original middle (checked against the stored lengths). */
function decodeMiddle(row: ChainRow, literals: string, originalMiddle: string): string {
  const middle = applyCopyCode({ ops: JSON.parse(row.request_edits as string) as number[], literals }, originalMiddle)
  if (row.request_length !== null && middle.length !== row.request_length - row.request_prefix - row.request_suffix) {
    throw new Error(`completion ${row.seq}: its request edits do not decode to the stored length`)
  }
  return middle
}
