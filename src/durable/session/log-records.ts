/**
 * @module
 * The session's records for a streamed build, without holding the session: every record's small fields
 * and sampled tokens are read up front (they grow with the output, not the context), while each prompt
 * and each request body stays in the durable log and is read only when the builder looks at it.
 *
 * - `prompt_token_ids` is a getter over a token cache bounded in tokens (`PROMPT_CACHE_TOKENS`): a prompt
 *   is its delta parent's prefix plus its stored suffix, so reading the next turn's prompt costs one copy
 *   of the parent's prefix and its own new tokens; a prompt no longer cached is rebuilt by walking its
 *   chain back (tokens only, never the bodies).
 * - `request` is loaded for the record being routed (`load`: its messages and tools), then `reduce`d to
 *   its tools and message count (`prompt_message_count`), so only the messages a trace copies stay alive.
 *   Bodies are parsed incrementally (`request-messages.ts`): a turn that appends messages costs them.
 *
 * Token fields spilled to R2 (a suffix over 512 KB, rare) are fetched once, up front: the getter must be
 * synchronous.
 */
import type { CompletionRecord } from '../../contract/completion-record.ts'
import type { CompletionLog, CompletionRow } from './completion-log.ts'
import { type MessageIndex, readTail, type TailPiece } from './message-layout.ts'
import { RequestParser, type SharedPrefix } from './request-messages.ts'
import { ForwardRows } from './forward-rows.ts'
import { unpackLogprobs, unpackTokens } from './token-codec.ts'

/** `request_base`: the body is coded against the parent's body (else against its own original body). */
const REQUEST_BASE_PARENT = 0

/** Request middles read with the small fields (a served model name); longer ones give no shared-prefix hint. */
const SMALL_MIDDLE_CHARS = 4096

/** Loaded requests kept whole (as the bases of the next records' messages): a few, for interleaved agents. */
const LOADED_REQUESTS = 8

/** Messages (array entries: the objects are shared) kept on records that open a trace, at most. */
const KEPT_MESSAGES = 250_000

/** Prompt tokens kept in memory at most (8 MB, packed). */
export const PROMPT_CACHE_TOKENS = 2_000_000

/** The columns `LIGHT_COLUMNS` reads (`request_middle` only when short, a served model name: null otherwise). */
type LightRow = Pick<
  CompletionRow,
  | 'seq'
  | 'completion_id'
  | 'created_at'
  | 'api'
  | 'agent'
  | 'model_requested'
  | 'model_used'
  | 'stream'
  | 'status'
  | 'trainable'
  | 'finish_reason'
  | 'stop_reason'
  | 'prompt_parent'
  | 'prompt_shared'
  | 'prompt_length'
  | 'request_base'
  | 'request_prefix'
  | 'request_suffix'
  | 'request_length'
  | 'original_prefix'
  | 'original_suffix'
  | 'original_length'
  | 'request_middle'
  | 'request_edits'
  | 'request_messages'
  | 'response_tokens'
  | 'logprobs'
  | 'logprobs_format'
  | 'spilled'
  | 'response_message'
  | 'usage'
  | 'warnings'
  | 'error'
  | 'timing'
  | 'provenance'
  | 'metadata'
>

interface TokenRow {
  [key: string]: string | number | null | ArrayBuffer
  prompt_parent: number | null
  prompt_shared: number
  prompt_length: number | null
  prompt_suffix: ArrayBuffer | null
}

const LIGHT_COLUMNS = `seq, completion_id, created_at, api, agent, model_requested, model_used, stream, status, trainable,
  finish_reason, stop_reason, prompt_parent, prompt_shared, prompt_length, response_tokens, logprobs, logprobs_format,
  request_base, request_prefix, request_suffix, request_length, original_prefix, original_suffix, original_length,
  CASE WHEN LENGTH(request_middle) <= ${SMALL_MIDDLE_CHARS} THEN request_middle END AS request_middle,
  request_edits, request_messages, spilled, response_message, usage, warnings, error, timing, provenance, metadata`

/** Prompts by seq, least recently used first, bounded in tokens. */
class PromptCache {
  readonly #rows: ForwardRows<TokenRow>
  readonly #spilledSuffixes: Map<number, Uint32Array>
  readonly #entries = new Map<number, Uint32Array>()
  /** Tokens written so far in each prompt buffer (`#append` extends a buffer only at its end). */
  readonly #used = new WeakMap<ArrayBufferLike, number>()
  #tokens = 0
  /** Prompts rebuilt from the log (a measure of the cache's hit rate in tests and benchmarks). */
  loads = 0

  constructor(rows: ForwardRows<TokenRow>, spilledSuffixes: Map<number, Uint32Array>) {
    this.#rows = rows
    this.#spilledSuffixes = spilledSuffixes
  }

  get(seq: number): Uint32Array {
    const hit = this.#entries.get(seq)
    if (hit !== undefined) {
      this.#entries.delete(seq)
      this.#entries.set(seq, hit)
      return hit
    }
    const prompt = this.#resolve(seq)
    if (!this.#used.has(prompt.buffer)) this.#used.set(prompt.buffer, prompt.length)
    this.loads++
    this.#entries.set(seq, prompt)
    this.#tokens += prompt.length
    for (const [key, old] of this.#entries) {
      if (this.#tokens <= PROMPT_CACHE_TOKENS || key === seq) break
      this.#entries.delete(key)
      this.#tokens -= old.length
    }
    return prompt
  }

  #row(seq: number): TokenRow {
    const row = this.#rows.get(seq)
    if (!row) throw new Error(`completion ${seq} missing`)
    return row
  }

  #suffix(seq: number, row: TokenRow): Uint32Array {
    return this.#spilledSuffixes.get(seq) ?? unpackTokens(row.prompt_suffix)
  }

  /** prompt = parent prompt[0:shared] + suffix, walking back until the prefix still needed is known. */
  #resolve(seq: number): Uint32Array {
    const row = this.#row(seq)
    const length = row.prompt_length ?? 0
    // The usual next turn extends its parent's whole prompt: append in place, when nothing was appended there yet.
    const parent = row.prompt_parent === null ? undefined : this.#entries.get(row.prompt_parent)
    if (parent !== undefined && row.prompt_shared === parent.length && row.prompt_shared > 0) {
      const extended = this.#append(parent, this.#suffix(seq, row), length)
      if (extended !== null) return extended
    }
    const prompt = new Uint32Array(length)
    let need = prompt.length
    let level: TokenRow = row
    let levelSeq = seq
    for (;;) {
      const suffix = this.#suffix(levelSeq, level)
      if (need > level.prompt_shared) prompt.set(suffix.subarray(0, need - level.prompt_shared), level.prompt_shared)
      need = Math.min(need, level.prompt_shared)
      if (need === 0) return prompt
      if (level.prompt_parent === null) throw new Error(`delta chain of completion ${seq} is broken: no parent for ${need} tokens`)
      // The usual next turn: its parent is the prompt read just before (one copy of its prefix).
      const cached = this.#entries.get(level.prompt_parent)
      if (cached !== undefined) {
        if (cached.length < need) throw new Error(`delta chain of completion ${seq} is broken: the base prompt is too short`)
        prompt.set(cached.subarray(0, need), 0)
        return prompt
      }
      levelSeq = level.prompt_parent
      level = this.#row(levelSeq)
    }
  }

  /**
   * `parent` + `suffix` as a view of the buffer `parent` views, when no other prompt was appended to it yet
   * (views already handed out never change: they end before the appended tokens). The buffer grows by
   * doubling, so a conversation's prompts cost their new tokens, not a copy of the context each.
   */
  #append(parent: Uint32Array, suffix: Uint32Array, length: number): Uint32Array | null {
    const used = this.#used.get(parent.buffer)
    if (used !== parent.length || parent.byteOffset !== 0 || suffix.length !== length - parent.length) return null
    let data = new Uint32Array(parent.buffer)
    if (data.length < length) {
      const grown = new Uint32Array(Math.max(length, data.length * 2))
      grown.set(parent)
      data = grown
    }
    data.set(suffix, parent.length)
    this.#used.set(data.buffer, length)
    return data.subarray(0, length)
  }
}

interface MiddleRow {
  [key: string]: string | null
  request_middle: string | null
  original_middle: string | null
}

/** How a record's bodies are delta-coded (see `CompletionLog.record`). */
interface TextCoding {
  parent: number | null
  requestBase: number
  requestPrefix: number
  requestSuffix: number
  /** Null on rows written before schema v2. */
  requestLength: number | null
  /** The body's middle when known from the small fields (short and stored plain); null otherwise. */
  requestMiddle: string | null
  /** What the row stores as `request_middle` when short (the middle, or a coded middle's literals); null otherwise. */
  storedRequestMiddle: string | null
  originalPrefix: number
  originalLength: number | null
}

/** A record whose prompt is read through the cache and whose request is loaded only while it is needed. */
class LogRecord implements CompletionRecord {
  readonly #prompts: PromptCache
  /** How the request body is delta-coded (see `CompletionLog.record`). */
  readonly textDelta: TextCoding
  /** Where its messages lie (`message-layout.ts`); null on rows written before schema v3. */
  readonly messageIndex: MessageIndex | null
  /** R2 keys of fields spilled out of the row (null: none). */
  readonly spilledKeys: Record<string, string> | null
  completion_id: string
  session_id: string
  seq: number
  timestamp: string
  api: CompletionRecord['api']
  agent: string
  model_requested: string
  model_used: string
  stream: boolean
  status: CompletionRecord['status']
  trainable: boolean
  prompt_delta: CompletionRecord['prompt_delta']
  response_token_ids: number[]
  response_logprobs: number[] | null
  finish_reason: string | null
  stop_reason: string | number | null
  /** Empty until `load`; after `reduce`, only `tools`. */
  request: Record<string, unknown> = {}
  /** Set by `reduce`: how many messages the request held. */
  prompt_message_count: number | undefined = undefined
  response_message: CompletionRecord['response_message']
  original_request = null
  usage: CompletionRecord['usage']
  warnings: CompletionRecord['warnings']
  error: string | null
  timing: CompletionRecord['timing']
  provenance: CompletionRecord['provenance']
  metadata: CompletionRecord['metadata']

  constructor(row: LightRow, sessionId: string, prompts: PromptCache, spilled: Map<string, ArrayBuffer>) {
    this.#prompts = prompts
    this.textDelta = {
      parent: row.prompt_parent,
      requestBase: row.request_base,
      requestPrefix: row.request_prefix,
      requestSuffix: row.request_suffix,
      requestLength: row.request_length,
      requestMiddle: row.request_edits === null ? row.request_middle : null,
      storedRequestMiddle: row.request_middle,
      originalPrefix: row.original_prefix,
      originalLength: row.original_length,
    }
    this.messageIndex = row.request_messages ? (JSON.parse(row.request_messages) as MessageIndex) : null
    this.spilledKeys = row.spilled ? (JSON.parse(row.spilled) as Record<string, string>) : null
    this.completion_id = row.completion_id
    this.session_id = sessionId
    this.seq = row.seq
    this.timestamp = row.created_at
    this.api = row.api as CompletionRecord['api']
    this.agent = row.agent
    this.model_requested = row.model_requested
    this.model_used = row.model_used
    this.stream = row.stream === 1
    this.status = row.status as CompletionRecord['status']
    this.trainable = row.trainable === 1
    this.prompt_delta =
      row.prompt_parent !== null && row.prompt_shared > 0 ? { parent_seq: row.prompt_parent, shared_prefix_len: row.prompt_shared } : null
    this.response_token_ids = Array.from(unpackTokens(spilled.get('response_tokens') ?? row.response_tokens))
    this.response_logprobs = unpackLogprobs(row.logprobs_format, spilled.get('logprobs') ?? row.logprobs)
    this.finish_reason = row.finish_reason
    this.stop_reason = row.stop_reason === null ? null : (JSON.parse(row.stop_reason) as string | number)
    this.response_message = row.response_message ? JSON.parse(row.response_message) : null
    this.usage = row.usage ? JSON.parse(row.usage) : null
    this.warnings = JSON.parse(row.warnings)
    this.error = row.error
    this.timing = JSON.parse(row.timing)
    this.provenance = JSON.parse(row.provenance)
    this.metadata = JSON.parse(row.metadata)
  }

  /**
   * A `Uint32Array` behind the record type's `number[]`: the builders only index, slice and compare
   * token arrays, and `finalizeSegment` copies `prompt_ids` into a plain array (`plainTokens`).
   */
  get prompt_token_ids(): number[] {
    return this.#prompts.get(this.seq) as unknown as number[]
  }
}

/** Reading the log failed (storage): worth retrying, unlike a failure of the builder itself. */
export class LogReadError extends Error {
  constructor(cause: unknown) {
    super(`reading the completion log failed: ${cause instanceof Error ? cause.message : String(cause)}`, { cause })
    this.name = 'LogReadError'
  }
}

/** Run `read`, reporting its failure as a `LogReadError`. */
function reading<T>(read: () => T): T {
  try {
    return read()
  } catch (error) {
    throw error instanceof LogReadError ? error : new LogReadError(error)
  }
}

export class LogRecords {
  readonly #log: CompletionLog
  #prompts: PromptCache | null = null
  /** Consecutive bodies of a conversation: only appended messages are parsed. */
  readonly #requests = new RequestParser()
  readonly #bySeq = new Map<number, LogRecord>()
  /** Each record's two body middles, read forwards a page at a time (`open` sets it). */
  #middles: ForwardRows<MiddleRow> | null = null
  /** Recently loaded requests, whole, by seq (oldest first). */
  readonly #loaded = new Map<number, Record<string, unknown>>()
  /** Requests loaded from their parent's messages and their new ones (not from the whole body). */
  indexedLoads = 0
  /** Records that open a trace, kept whole after routing (see `reduce`), and how many messages they hold. */
  readonly #kept = new Set<LogRecord>()
  #keptMessages = 0

  constructor(log: CompletionLog) {
    this.#log = log
  }

  /** Request bodies parsed whole so far (not as an extension of the previous one). */
  get wholeRequestParses(): number {
    return this.#requests.wholeParses
  }

  /** Prompts rebuilt from the log so far (cache misses). */
  get promptLoads(): number {
    return this.#prompts?.loads ?? 0
  }

  /** Every record (through `throughSeq`), in arrival order, with prompts and requests left in the log. */
  async open(throughSeq = Number.POSITIVE_INFINITY): Promise<CompletionRecord[]> {
    const { sql, blobs, sessionId } = this.#log.storage
    const through = Number.isFinite(throughSeq) ? throughSeq : Number.MAX_SAFE_INTEGER
    const rows = reading(() => sql.all<LightRow>(`SELECT ${LIGHT_COLUMNS} FROM rg_completions WHERE seq <= ? ORDER BY seq`, through))
    const spilledSuffixes = new Map<number, Uint32Array>()
    const spilledByRow = new Map<number, Map<string, ArrayBuffer>>()
    for (const row of rows) {
      if (!row.spilled) continue
      const keys = JSON.parse(row.spilled) as Record<string, string>
      const fields = new Map<string, ArrayBuffer>()
      for (const field of ['prompt_suffix', 'response_tokens', 'logprobs']) {
        const key = keys[field]
        if (!key) continue
        try {
          fields.set(field, await blobs.getBytes(key))
        } catch (error) {
          throw new LogReadError(error)
        }
      }
      const suffix = fields.get('prompt_suffix')
      if (suffix) spilledSuffixes.set(row.seq, unpackTokens(suffix))
      spilledByRow.set(row.seq, fields)
    }
    // Routing reads prompts and middles in arrival order: a page of rows per statement (`forward-rows.ts`).
    const seqs = rows.map((row) => row.seq)
    const promptRows = new ForwardRows<TokenRow>(sql, 'prompt_parent, prompt_shared, prompt_length, prompt_suffix', seqs, (i) => {
      const row = rows[i] as LightRow
      return 64 + 4 * Math.max(0, (row.prompt_length ?? 0) - (row.prompt_parent === null ? 0 : row.prompt_shared))
    })
    this.#middles = new ForwardRows<MiddleRow>(sql, 'request_middle, original_middle', seqs, (i) => {
      const row = rows[i] as LightRow
      // UTF-16 units; a row written before schema v2 has no lengths: counted as a long middle.
      const middle = (length: number | null, prefix: number, suffix: number) =>
        length === null ? SMALL_MIDDLE_CHARS : length - prefix - suffix
      return (
        64 +
        2 * middle(row.request_length, row.request_prefix, row.request_suffix) +
        2 * middle(row.original_length, row.original_prefix, row.original_suffix)
      )
    })
    const prompts = new PromptCache(promptRows, spilledSuffixes)
    this.#prompts = prompts
    const none = new Map<string, ArrayBuffer>()
    const records = rows.map((row) => new LogRecord(row, sessionId, prompts, spilledByRow.get(row.seq) ?? none))
    for (const record of records) this.#bySeq.set(record.seq, record)
    return records
  }

  /**
   * Load the record's request (messages and tools) for the builder: from its delta parent's messages and
   * the text of the messages it adds (`MessageIndex`) when the parent was loaded recently; else from the
   * whole body (parsed incrementally against the previous one).
   */
  async load(record: CompletionRecord): Promise<void> {
    const target = record as LogRecord
    if (this.#kept.has(target)) return
    let request = await this.#fromIndex(target)
    if (request === null) {
      let text: string
      try {
        text = await this.#log.requestText(record.seq)
      } catch (error) {
        throw new LogReadError(error)
      }
      // Only `messages` and `tools` are read by the builders; the keys the served record drops
      // (engine capture parameters, `stream`) are left in.
      request = this.#requests.parse(text, record.seq, this.#sharedPrefix(target))
    } else {
      this.indexedLoads++
    }
    target.request = request
    target.prompt_message_count = undefined
    this.#remember(record.seq, request)
  }

  /** The request from the parent's loaded messages plus the new ones (`MessageIndex`), or null when that cannot be done. */
  async #fromIndex(record: LogRecord): Promise<Record<string, unknown> | null> {
    const index = record.messageIndex
    const parentSeq = record.textDelta.parent
    if (index === null || index.tail === null || !index.same || parentSeq === null) return null
    const parent = this.#loaded.get(parentSeq)
    if (parent === undefined || !Array.isArray(parent.messages) || parent.messages.length < index.k) return null
    let requestMiddle = ''
    let originalMiddle = ''
    const needs = (middle: 'q' | 'o') => (index.tail as TailPiece[]).some((piece) => typeof piece !== 'string' && piece[0] === middle)
    const needsOriginal = needs('o')
    // A short request middle came with the small fields: no read at all for the usual turn.
    const known = record.textDelta.storedRequestMiddle
    if (needsOriginal || (needs('q') && known === null)) {
      const middles = reading(() => (this.#middles as ForwardRows<MiddleRow>).get(record.seq))
      requestMiddle = middles?.request_middle ?? (await this.#spilledText(record, 'request_middle'))
      originalMiddle = middles?.original_middle ?? (await this.#spilledText(record, 'original_middle'))
    } else if (known !== null) requestMiddle = known
    const tail = readTail(index as MessageIndex & { tail: NonNullable<MessageIndex['tail']> }, requestMiddle, originalMiddle)
    const messages = index.k === 0 ? tail : (parent.messages as unknown[]).slice(0, index.k).concat(tail)
    if (messages.length !== index.n) return null
    return { ...parent, messages }
  }

  async #spilledText(record: LogRecord, field: string): Promise<string> {
    const key = record.spilledKeys?.[field]
    if (!key) return ''
    try {
      return await this.#log.storage.blobs.getText(key)
    } catch (error) {
      throw new LogReadError(error)
    }
  }

  /** Keep the last few loaded requests whole (their messages are the next records' first ones). */
  #remember(seq: number, request: Record<string, unknown>): void {
    this.#loaded.delete(seq)
    this.#loaded.set(seq, request)
    if (this.#loaded.size > LOADED_REQUESTS) this.#loaded.delete(this.#loaded.keys().next().value as number)
  }

  /**
   * A prefix of the record's body known equal to its delta parent's body, from the delta coding alone: a
   * body coded against the parent's body shares its `request_prefix`. One coded against its own original
   * (the usual case: the edge changes the model name and adds capture keys) is `O[0:a] + m + O[|O|-s:]`;
   * the originals share `original_prefix`. When the parent's body is coded the same way (same `a`, same
   * middle `m`, same shift of its suffix), the bodies agree wherever the originals do, mapped through it.
   */
  #sharedPrefix(record: LogRecord): SharedPrefix | null {
    const delta = record.textDelta
    if (delta.parent === null) return null
    if (delta.requestBase === REQUEST_BASE_PARENT) return { seq: delta.parent, length: delta.requestPrefix }
    // A coded middle (`request_edits`) is not read here: its length, hence the shift, is not known either.
    const parent = this.#bySeq.get(delta.parent)?.textDelta
    if (parent === undefined || parent.requestBase === REQUEST_BASE_PARENT) return null
    const prefixOnly = { seq: delta.parent, length: Math.min(delta.requestPrefix, delta.originalPrefix, parent.requestPrefix) }
    const shift = (coding: TextCoding) =>
      coding.originalLength === null || coding.requestLength === null || coding.requestMiddle === null
        ? null
        : coding.originalLength - coding.requestSuffix - coding.requestPrefix - coding.requestMiddle.length
    const own = shift(delta)
    if (
      own === null ||
      own !== shift(parent) ||
      delta.requestPrefix !== parent.requestPrefix ||
      delta.requestMiddle !== parent.requestMiddle ||
      delta.requestPrefix > delta.originalPrefix
    ) {
      return prefixOnly
    }
    const middleEnd = delta.requestPrefix + (delta.requestMiddle as string).length
    return { seq: delta.parent, length: Math.max(prefixOnly.length, middleEnd, delta.originalPrefix - own) }
  }

  /**
   * Drop the request's messages once the record is routed; keep its tools and message count. `keep`: the
   * record opens a trace, whose build reads its messages again: they stay (`load` then reads nothing)
   * while the kept arrays hold at most `KEPT_MESSAGES` entries (their messages are shared with other records').
   */
  reduce(record: CompletionRecord, keep = false): void {
    const target = record as LogRecord
    const messages = target.request.messages
    const count = Array.isArray(messages) ? messages.length : 0
    if (keep && target.prompt_message_count === undefined && this.#keptMessages + count <= KEPT_MESSAGES) {
      this.#keptMessages += count
      this.#kept.add(target)
      return
    }
    if (this.#kept.delete(target)) this.#keptMessages -= count
    target.prompt_message_count = count
    const tools = target.request.tools
    target.request = tools === undefined ? {} : { tools }
  }
}
