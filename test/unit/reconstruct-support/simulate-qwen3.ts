/**
 * @module
 * Multi-turn tool-using sessions rendered with the real Qwen3 chat template and tokenizer
 * (`engine/qwen3.ts`). Each request's prompt is what vLLM would tokenize; each sampled response is
 * the exact text the model would have produced for the assistant message (what the template
 * renders for it as the last turn, after the generation prompt), tokenized canonically unless
 * `drift` asks for a non-canonical split of one word.
 */
import type { ChatMessage, Qwen3 } from '../../../engine/qwen3.ts'
import type { CompletionRecord } from '../../../src/contract/completion-record.ts'
import { makeRecord, withDeltas } from './records.ts'

export type Qwen3Thinking = 'off' | 'on-replay' | 'on-strip'

export interface Qwen3ConversationSpec {
  name: string
  agent: string
  system: string
  task: string
  turns: number
  tools: boolean
}

export interface Qwen3SimOptions {
  thinking: Qwen3Thinking
  /** Sampled ids spell the text with one word split into two valid tokens (every turn). */
  drift: boolean
  /** A Claude Code style billing-header nonce line at the top of the system prompt, per request. */
  nonce: boolean
  /**
   * Tool-using conversations answer halfway and the user sends a follow-up message, so the template
   * re-renders the earlier turns of a thinking model without their reasoning (Qwen3 drops it before
   * the last user query).
   */
  followUp?: boolean
  conversations: Qwen3ConversationSpec[]
}

export const BASH_TOOL = {
  type: 'function',
  function: {
    name: 'bash',
    description: 'Run a shell command in the repository and return its output.',
    parameters: {
      type: 'object',
      properties: { command: { type: 'string', description: 'The command to run.' } },
      required: ['command'],
    },
  },
}

export interface SimulatedTurn {
  record: CompletionRecord
  conversation: string
  /** Tokens of the reasoning block the model sampled (`<think>…</think>\n\n`), 0 when none. */
  reasoningBlockTokens: number
  /** Sampled ids differ from the canonical tokenization of the same text. */
  nonCanonical: boolean
}

const GENERATION_SCAFFOLD = '<think>\n\n</think>\n\n'
const ASSISTANT_HEADER = '<|im_start|>assistant\n'

function nonceLine(request: number): string {
  const hex = ((request + 1) * 2654435761).toString(16).slice(-5)
  return `x-anthropic-billing-header: cc_version=2.1.111; cc_entrypoint=cli; cch=${hex};`
}

/** Split one plain word token of the content into two valid tokens spelling the same text. */
function splitOneToken(qwen: Qwen3, ids: number[], from: number): number[] | null {
  for (let i = ids.length - 2; i >= from; i--) {
    const id = ids[i] as number
    if (qwen.isAddedToken(id)) continue
    const text = qwen.decode([id])
    if (!/^ ?[a-z]{4,}$/.test(text)) continue
    const cut = Math.ceil(text.length / 2)
    const pieces = [...qwen.encode(text.slice(0, cut)), ...qwen.encode(text.slice(cut))]
    if (pieces.length < 2 || qwen.decode(pieces) !== text) continue
    return [...ids.slice(0, i), ...pieces, ...ids.slice(i + 1)]
  }
  return null
}

export function simulateQwen3Session(qwen: Qwen3, options: Qwen3SimOptions): SimulatedTurn[] {
  const enableThinking = options.thinking !== 'off'
  const state = options.conversations.map((spec) => ({
    spec,
    messages: [] as ChatMessage[],
    done: 0,
    lastSeq: undefined as number | undefined,
  }))
  const turns: SimulatedTurn[] = []
  const parents: Record<number, number | undefined> = {}
  let seq = 0

  // Round-robin interleaving: main, then the others, one request at a time.
  while (state.some((c) => c.done < c.spec.turns)) {
    for (const conversation of state) {
      if (conversation.done >= conversation.spec.turns) continue
      const { spec } = conversation
      const k = conversation.done
      const system = options.nonce ? `${nonceLine(seq)}\n${spec.system}` : spec.system
      const history = conversation.messages
      const messages: ChatMessage[] = [{ role: 'system', content: system }, { role: 'user', content: spec.task }, ...history]
      const tools = spec.tools ? [BASH_TOOL] : null
      const renderOptions = { tools, addGenerationPrompt: true, enableThinking }
      const prompt = qwen.tokenizeChat(messages, renderOptions)

      const last = k === spec.turns - 1 || !spec.tools
      const followUpNow = !last && options.followUp === true && k === Math.floor((spec.turns - 1) / 2)
      const answer = last || followUpNow
      const reasoning = enableThinking
        ? `The user wants ${spec.name} step ${k}. ` + `I should ${answer ? 'answer now' : 'inspect the files'}.`
        : undefined
      const assistant: ChatMessage = answer
        ? {
            role: 'assistant',
            content: `Done with ${spec.name}: everything looks fine after ${k} steps.`,
          }
        : {
            role: 'assistant',
            content: '',
            tool_calls: [
              {
                id: `call_${seq}`,
                type: 'function',
                function: {
                  name: 'bash',
                  arguments: JSON.stringify({ command: `ls -la src/module${k}` }),
                },
              },
            ],
          }
      if (reasoning !== undefined) assistant.reasoning_content = reasoning

      // What the model sampled after the generation prompt: the template's own rendering of this
      // assistant message as the last turn, up to and including <|im_end|>.
      const rendered = qwen.renderChat([...messages, assistant], {
        tools,
        addGenerationPrompt: false,
        enableThinking,
      })
      const start = rendered.lastIndexOf(ASSISTANT_HEADER) + ASSISTANT_HEADER.length
      let sampledText = rendered.slice(start, rendered.lastIndexOf('<|im_end|>') + '<|im_end|>'.length)
      if (!enableThinking && sampledText.startsWith(GENERATION_SCAFFOLD)) {
        sampledText = sampledText.slice(GENERATION_SCAFFOLD.length)
      }
      let response = qwen.encode(sampledText)
      const thinkEnd = response.indexOf(qwen.specialTokens.thinkEnd)
      let nonCanonical = false
      if (options.drift) {
        const split = splitOneToken(qwen, response, thinkEnd + 1)
        if (split !== null) {
          response = split
          nonCanonical = true
        }
      }
      const reasoningBlockTokens = thinkEnd >= 0 ? thinkEnd + 1 + qwen.encode('\n\n').length : 0

      const record = makeRecord({
        seq,
        prompt,
        response,
        finish: answer ? 'stop' : 'tool_calls',
        agent: spec.agent,
        tools: tools,
        messages: messages as Record<string, unknown>[],
        responseMessage: {
          role: 'assistant',
          content: typeof assistant.content === 'string' ? assistant.content : null,
          ...(reasoning === undefined ? {} : { reasoning_content: reasoning }),
          ...(assistant.tool_calls
            ? {
                tool_calls: assistant.tool_calls.map((call) => ({
                  id: call.id ?? '',
                  type: 'function' as const,
                  function: {
                    name: call.function.name,
                    arguments: String(call.function.arguments),
                  },
                })),
              }
            : {}),
        },
      })
      parents[seq] = conversation.lastSeq
      conversation.lastSeq = seq
      turns.push({ record, conversation: spec.name, reasoningBlockTokens, nonCanonical })
      seq++

      // What the harness sends back next time: the assistant message (reasoning replayed or not)
      // and the tool result.
      const replayed: ChatMessage = { ...assistant }
      if (options.thinking !== 'on-replay') delete replayed.reasoning_content
      history.push(replayed)
      if (followUpNow) history.push({ role: 'user', content: `Thanks. Now also check the tests of ${spec.name}.` })
      else if (!last) {
        history.push({
          role: 'tool',
          tool_call_id: `call_${seq - 1}`,
          content: `total ${k + 3}\n-rw-r--r-- 1 dev dev 120 index.ts\n` + `-rw-r--r-- 1 dev dev 88 util${k}.ts`,
        })
      }
      conversation.done++
    }
  }

  const records = withDeltas(
    turns.map((turn) => turn.record),
    parents,
  )
  return turns.map((turn, index) => ({ ...turn, record: records[index] as CompletionRecord }))
}
