/**
 * @module
 * A token-level agent-session simulator with a ChatML-like template, used by the property tests.
 * It reproduces the situations reconstruction must survive: Qwen3 empty-think scaffold (thinking
 * off), reasoning replayed or stripped (thinking on), non-canonical sampled tokenization, a system
 * nonce changing per request, truncated turns, client retries, abandoned requests, interleaved
 * sub-agents (labelled or not), side calls without tools, compaction, missing logprobs, and four
 * `prompt_delta` styles. Deterministic for a given seed.
 */
import type { CompletionRecord } from '../../../src/contract/completion-record.ts'
import { makeRecord, withBestDeltas, withDeltas, withPreviousDeltas } from './records.ts'

export const TOKENS = {
  imStart: 1,
  system: 2,
  user: 3,
  assistant: 4,
  tool: 5,
  newline: 6,
  toolsBlock: [7, 8, 9],
  eot: 99,
  thinkOpen: 90,
  thinkClose: 91,
} as const
/** Content tokens live in [CONTENT_MIN, CONTENT_MAX); split pieces are offset beyond it. */
const CONTENT_MIN = 1_000
const CONTENT_MAX = 50_000
const SPLIT_A = 100_000
const SPLIT_B = 200_000

export type ThinkingMode = 'off' | 'on-replay' | 'on-strip'
export type DeltaMode = 'true' | 'best' | 'previous' | 'none'

export interface SimOptions {
  seed: number
  mainTurns: number
  thinking: ThinkingMode
  retokenizeRate: number
  nonce: boolean
  subAgents: number
  labelSubAgents: boolean
  sideCalls: number
  retryRate: number
  abandonRate: number
  truncateRate: number
  compactAt: number | null
  noLogprobRate: number
  deltaMode: DeltaMode
}

interface Message {
  role: 'system' | 'user' | 'assistant' | 'tool'
  content: number[]
  reasoning?: number[]
  truncated?: boolean
}

interface Conversation {
  name: string
  agent: string
  kind: 'main' | 'sub_agent' | 'side_call'
  systemBase: number[]
  tools: boolean
  messages: Message[]
  turnsLeft: number
  lastSeq: number | null
}

export interface SimulatedSession {
  records: CompletionRecord[]
  /** Every simulated conversation (each produced at least one trainable completion). */
  conversations: { name: string; agent: string; kind: Conversation['kind'] }[]
  compacted: boolean
}

function rng(seed: number) {
  let state = seed >>> 0 || 1
  return () => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

export function simulateSession(options: SimOptions): SimulatedSession {
  const random = rng(options.seed)
  const int = (min: number, max: number) => min + Math.floor(random() * (max - min + 1))
  const content = (min: number, max: number) => Array.from({ length: int(min, max) }, () => int(CONTENT_MIN, CONTENT_MAX - 1))
  const thinkingOn = options.thinking !== 'off'

  const render = (conversation: Conversation): number[] => {
    const out: number[] = []
    const roleToken = {
      system: TOKENS.system,
      user: TOKENS.user,
      assistant: TOKENS.assistant,
      tool: TOKENS.tool,
    }
    for (const message of conversation.messages) {
      out.push(TOKENS.imStart, roleToken[message.role], TOKENS.newline)
      if (message.role === 'system') {
        const [first, ...rest] = message.content
        out.push(first as number)
        // The nonce line (Claude Code billing header) changes on every request.
        if (options.nonce) out.push(...content(1, 3))
        out.push(...rest)
        if (conversation.tools) out.push(...TOKENS.toolsBlock)
      } else if (message.role === 'assistant') {
        if (options.thinking === 'on-replay' && message.reasoning !== undefined) {
          out.push(TOKENS.thinkOpen, ...message.reasoning, TOKENS.thinkClose)
        }
        out.push(...message.content)
      } else {
        out.push(...message.content)
      }
      out.push(TOKENS.eot, TOKENS.newline)
    }
    out.push(TOKENS.imStart, TOKENS.assistant, TOKENS.newline)
    // Thinking off: the generation prompt carries the empty think scaffold.
    if (!thinkingOn) out.push(TOKENS.thinkOpen, TOKENS.thinkClose)
    return out
  }

  const records: CompletionRecord[] = []
  const truePredecessor: Record<number, number | undefined> = {}
  let seq = 0
  let compacted = false

  const sample = (conversation: Conversation, prompt: number[]) => {
    const body = content(2, 8)
    const reasoning = thinkingOn ? content(0, 6) : undefined
    const truncated = random() < options.truncateRate
    let sampled = [...(reasoning === undefined ? [] : [TOKENS.thinkOpen, ...reasoning, TOKENS.thinkClose]), ...body]
    if (random() < options.retokenizeRate && body.length > 0) {
      // The sampled ids spell the same text as the canonical ids, split differently.
      const at = sampled.length - body.length + int(0, body.length - 1)
      const token = sampled[at] as number
      sampled = [...sampled.slice(0, at), token + SPLIT_A, token + SPLIT_B, ...sampled.slice(at + 1)]
    }
    if (!truncated) sampled.push(TOKENS.eot)
    const record = makeRecord({
      seq,
      prompt,
      response: sampled,
      logprobs: random() < options.noLogprobRate ? null : undefined,
      finish: truncated ? 'length' : conversation.tools ? 'tool_calls' : 'stop',
      agent: conversation.agent,
      tools: conversation.tools ? undefined : null,
      messages: conversation.messages.map((m) => ({ role: m.role, content: m.content.join(' ') })),
    })
    truePredecessor[seq] = conversation.lastSeq ?? undefined
    seq++
    records.push(record)
    return { record, body, reasoning, truncated }
  }

  const step = (conversation: Conversation) => {
    const prompt = render(conversation)
    const abandoned = random() < options.abandonRate
    if (abandoned) {
      const attempt = sample(conversation, prompt)
      records[records.length - 1] = { ...attempt.record, status: 'abandoned', trainable: false }
      conversation.lastSeq = attempt.record.seq
    }
    // A re-send renders the prompt again (a fresh nonce when the template has one).
    let result = sample(conversation, abandoned ? render(conversation) : prompt)
    if (random() < options.retryRate) {
      conversation.lastSeq = result.record.seq
      result = sample(conversation, render(conversation))
    }
    conversation.lastSeq = result.record.seq
    conversation.turnsLeft--
    const message: Message = {
      role: 'assistant',
      content: result.body,
      truncated: result.truncated,
    }
    if (result.reasoning !== undefined) message.reasoning = result.reasoning
    conversation.messages.push(message)
    if (conversation.turnsLeft > 0) conversation.messages.push({ role: 'tool', content: content(1, 12) })
  }

  const main: Conversation = {
    name: 'main',
    agent: 'main',
    kind: 'main',
    systemBase: content(80, 120),
    tools: true,
    messages: [],
    turnsLeft: options.mainTurns,
    lastSeq: null,
  }
  main.messages = [
    { role: 'system', content: main.systemBase },
    { role: 'user', content: content(3, 10) },
  ]
  const others: Conversation[] = []
  for (let i = 0; i < options.subAgents; i++) {
    const sub: Conversation = {
      name: `sub${i}`,
      agent: options.labelSubAgents ? `sub${i}` : 'main',
      kind: 'sub_agent',
      systemBase: content(80, 120),
      tools: true,
      messages: [],
      turnsLeft: int(2, 4),
      lastSeq: null,
    }
    sub.messages = [
      { role: 'system', content: sub.systemBase },
      { role: 'user', content: content(3, 8) },
    ]
    others.push(sub)
  }
  for (let i = 0; i < options.sideCalls; i++) {
    const side: Conversation = {
      name: `side${i}`,
      agent: 'main',
      kind: 'side_call',
      systemBase: content(80, 120),
      tools: false,
      messages: [],
      turnsLeft: 1,
      lastSeq: null,
    }
    side.messages = [
      { role: 'system', content: side.systemBase },
      { role: 'user', content: content(3, 8) },
    ]
    others.push(side)
  }

  let mainTurn = 0
  while (main.turnsLeft > 0 || others.some((c) => c.turnsLeft > 0)) {
    const active = others.filter((c) => c.turnsLeft > 0)
    const pickOther = active.length > 0 && (main.turnsLeft === 0 || random() < 0.35)
    if (pickOther) {
      step(active[int(0, active.length - 1)] as Conversation)
      continue
    }
    if (options.compactAt !== null && mainTurn === options.compactAt && mainTurn > 0) {
      // History summarized into one user message; same system prompt and tools.
      main.messages = [
        { role: 'system', content: main.systemBase },
        { role: 'user', content: content(2, 4) },
      ]
      compacted = true
    }
    step(main)
    mainTurn++
  }

  let withDelta: CompletionRecord[]
  if (options.deltaMode === 'true') withDelta = withDeltas(records, truePredecessor)
  else if (options.deltaMode === 'best') withDelta = withBestDeltas(records)
  else if (options.deltaMode === 'previous') withDelta = withPreviousDeltas(records)
  else withDelta = records

  const conversations = [main, ...others]
  return {
    records: withDelta,
    conversations: conversations.map((c) => ({ name: c.name, agent: c.agent, kind: c.kind })),
    compacted,
  }
}
