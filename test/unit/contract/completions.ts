/**
 * @module
 * Synthetic engine completions covering what a coding agent meets: plain text, reasoning, parallel
 * calls to one function, unparsable and empty arguments, length and stop-sequence ends, an empty answer,
 * and text that attacks SSE framing and JSON (blank lines, `data:` lines, surrogate pairs, U+2028).
 */
import type { Completion, ToolCall } from '../../../src/normalize/types.ts'

function completion(
  message: { content: string | null; reasoning_content?: string; tool_calls?: ToolCall[] },
  finish: string,
  extra: Partial<Completion> = {},
): Completion {
  const unified =
    finish === 'length' ? 'length' : finish === 'tool_calls' ? 'tool-calls' : finish === 'content_filter' ? 'content-filter' : 'stop'
  return {
    id: 'chatcmpl-engine',
    created: 1_760_000_000,
    model: 'Qwen/Qwen3-8B',
    message: { role: 'assistant', ...message },
    finishReason: { unified, raw: finish },
    stopReason: null,
    usage: { inputTokens: 812, cachedInputTokens: 512, outputTokens: 57, reasoningTokens: null },
    promptTokenIds: [1, 2, 3],
    responseTokenIds: [4, 5],
    responseLogprobs: [-0.1, -0.2],
    logprobsMode: null,
    ...extra,
  }
}

const call = (id: string, name: string, args: string) => ({ id, type: 'function' as const, function: { name, arguments: args } })

export const TRICKY_TEXT =
  'line one\n\ndata: {"not":"an event"}\n\nevent: message_stop\r\n: comment?\n😀 emoji \u2028 sep \u2029 "quotes" \\ back </think> \t tab \u0000 nul'

export const SYNTHETIC_COMPLETIONS: Record<string, Completion> = {
  text: completion({ content: 'Hello, world!' }, 'stop'),
  reasoning_text: completion({ content: 'Done.', reasoning_content: 'The user wants a greeting.\nSo I greet.' }, 'stop', {
    usage: { inputTokens: 100, cachedInputTokens: 0, outputTokens: 30, reasoningTokens: 12 },
  }),
  parallel_tools: completion(
    {
      content: 'Checking both files.',
      reasoning_content: 'Run wc twice.',
      tool_calls: [
        call('chatcmpl-tool-aa', 'bash', '{"command": "wc -l a.txt"}'),
        call('chatcmpl-tool-bb', 'bash', '{"command": "wc -l b.txt", "timeout": 5}'),
      ],
    },
    'tool_calls',
  ),
  tool_only: completion(
    { content: null, tool_calls: [call('chatcmpl-tool-cc', 'write_file', '{"path":"hello.txt","content":"hi\\n"}')] },
    'tool_calls',
  ),
  odd_arguments: completion(
    {
      content: '',
      tool_calls: [call('chatcmpl-tool-dd', 'bash', '{"command": "ls"'), call('chatcmpl-tool-ee', 'get_time', '')],
    },
    'tool_calls',
  ),
  custom_tool: completion(
    {
      content: null,
      reasoning_content: 'Patch it.',
      tool_calls: [
        call(
          'chatcmpl-tool-ff',
          'apply_patch',
          JSON.stringify({ input: '*** Begin Patch\n*** Add File: hello.txt\n+hi\n*** End Patch\n' }),
        ),
      ],
    },
    'tool_calls',
  ),
  length: completion({ content: 'This answer was cut off mid-sen', reasoning_content: 'long' }, 'length'),
  reasoning_only: completion({ content: '', reasoning_content: 'Still thinking when the budget ran out' }, 'length'),
  stop_sequence: completion({ content: 'The answer is 42' }, 'stop', { stopReason: '</answer>' }),
  empty: completion({ content: null }, 'stop'),
  tricky: completion({ content: TRICKY_TEXT, reasoning_content: `why: ${TRICKY_TEXT}` }, 'stop'),
  tricky_arguments: completion(
    { content: null, tool_calls: [call('chatcmpl-tool-gg', 'write_file', JSON.stringify({ path: 'x.txt', content: TRICKY_TEXT }))] },
    'tool_calls',
  ),
}
