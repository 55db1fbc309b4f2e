/**
 * The four synthetic stream encoders, frame by frame, against golden frames (reviewed inline snapshots): for
 * a completion with reasoning, text and two tool calls (one with empty arguments), a text-only one stopped by a
 * stop string, an empty one cut by the length limit, and a reasoning-only one; plus keep-alives, `start()` and
 * errors before and after the stream started. The SDK tests (`*-sdk.test.ts`) prove the frames parse; these
 * pin what each frame says.
 */
import { describe, expect, it } from 'vitest'
import type { ResponseContext, StreamEncoder } from '../../../src/normalize/adapter.ts'
import { createAnthropicStreamEncoder } from '../../../src/normalize/providers/anthropic/anthropic-stream.ts'
import { createGoogleStreamEncoder } from '../../../src/normalize/providers/google/google-stream.ts'
import { createOpenaiChatStreamEncoder } from '../../../src/normalize/providers/openai-chat/openai-chat-stream.ts'
import { createResponsesStreamEncoder } from '../../../src/normalize/providers/openai-responses/openai-responses-stream.ts'
import type { Completion, NormalizedError } from '../../../src/normalize/types.ts'

function completion(message: Completion['message'], finish: Completion['finishReason'], stopReason: string | null = null): Completion {
  return {
    id: 'engine-1',
    created: 1_760_000_000,
    model: 'served-model',
    message,
    finishReason: finish,
    stopReason,
    usage: { inputTokens: 120, cachedInputTokens: 20, outputTokens: 30, reasoningTokens: 7 },
    promptTokenIds: null,
    responseTokenIds: null,
    responseLogprobs: null,
    logprobsMode: null,
  }
}

const COMPLETIONS = {
  full: completion(
    {
      role: 'assistant',
      content: 'Here you go.',
      reasoning_content: 'Think first.',
      tool_calls: [
        { id: 'call_a', type: 'function', function: { name: 'read_file', arguments: '{"path":"a.txt"}' } },
        { id: 'call_b', type: 'function', function: { name: 'apply_patch', arguments: '' } },
      ],
    },
    { unified: 'tool-calls', raw: 'tool_calls' },
  ),
  text: completion({ role: 'assistant', content: 'Done.' }, { unified: 'stop', raw: 'stop' }, '</end>'),
  empty: completion({ role: 'assistant', content: '' }, { unified: 'length', raw: 'length' }),
  thinking: completion({ role: 'assistant', content: null, reasoning_content: 'Only thoughts.' }, { unified: 'stop', raw: null }),
}

const ERROR: NormalizedError = { status: 502, kind: 'upstream', message: 'engine unreachable', param: 'model' } as NormalizedError

function context(streamUsage: boolean): ResponseContext {
  return {
    modelRequested: 'asked-model',
    completionId: 'cmpl_0123456789abcdef01234567',
    streamUsage,
    created: 1_760_000_001,
    responseOptions: { customTools: ['apply_patch'] },
  }
}

/** Each SSE frame as `[event name or null, parsed data or raw text]`; comments and blank keep-alives kept as text. */
function frames(text: string): unknown[] {
  expect(text.endsWith('\n')).toBe(true)
  return text
    .split('\n\n')
    .filter((frame) => frame !== '')
    .map((frame) => {
      const lines = frame.split('\n')
      const name = lines.find((line) => line.startsWith('event: '))?.slice(7) ?? null
      const data = lines.find((line) => line.startsWith('data: '))?.slice(6)
      if (data === undefined) return frame
      let parsed: unknown = data
      try {
        parsed = JSON.parse(data)
      } catch {
        // `[DONE]`
      }
      return name === null ? parsed : [name, parsed]
    })
}

const ENCODERS: Record<string, (context: ResponseContext) => StreamEncoder> = {
  'openai-chat': createOpenaiChatStreamEncoder,
  anthropic: createAnthropicStreamEncoder,
  'openai-responses': createResponsesStreamEncoder,
  google: createGoogleStreamEncoder,
}

function run(api: string, name: keyof typeof COMPLETIONS, streamUsage = true) {
  const encoder = ENCODERS[api]!(context(streamUsage))
  return frames(encoder.start() + encoder.completion(COMPLETIONS[name]))
}

describe('stream encoders: golden frames', () => {
  it('keep-alives and start()', () => {
    const all = Object.fromEntries(
      Object.entries(ENCODERS).map(([api, create]) => {
        const encoder = create(context(false))
        const started = encoder.start()
        return [api, { heartbeat: encoder.heartbeat(), start: started === '' ? 0 : frames(started).length }]
      }),
    )
    expect(all).toEqual({
      'openai-chat': { heartbeat: ': keep-alive\n\n', start: 0 },
      anthropic: { heartbeat: 'event: ping\ndata: {"type":"ping"}\n\n', start: 0 },
      'openai-responses': { heartbeat: ': keep-alive\n\n', start: 2 },
      google: { heartbeat: '\n', start: 0 },
    })
    // Responses starts once: a second start() adds nothing, and the completion does not repeat it.
    const responses = createResponsesStreamEncoder(context(false))
    expect(responses.start()).not.toBe('')
    expect(responses.start()).toBe('')
    expect(frames(responses.completion(COMPLETIONS.text))[0]).toMatchObject(['response.output_item.added', { sequence_number: 2 }])
  })

  it('openai-chat', () => {
    expect(run('openai-chat', 'full')).toMatchInlineSnapshot(`
      [
        {
          "choices": [
            {
              "delta": {
                "content": "",
                "role": "assistant",
              },
              "finish_reason": null,
              "index": 0,
              "logprobs": null,
            },
          ],
          "created": 1760000001,
          "id": "chatcmpl-cmpl_0123456789abcdef01234567",
          "model": "asked-model",
          "object": "chat.completion.chunk",
        },
        {
          "choices": [
            {
              "delta": {
                "reasoning_content": "Think first.",
              },
              "finish_reason": null,
              "index": 0,
              "logprobs": null,
            },
          ],
          "created": 1760000001,
          "id": "chatcmpl-cmpl_0123456789abcdef01234567",
          "model": "asked-model",
          "object": "chat.completion.chunk",
        },
        {
          "choices": [
            {
              "delta": {
                "content": "Here you go.",
              },
              "finish_reason": null,
              "index": 0,
              "logprobs": null,
            },
          ],
          "created": 1760000001,
          "id": "chatcmpl-cmpl_0123456789abcdef01234567",
          "model": "asked-model",
          "object": "chat.completion.chunk",
        },
        {
          "choices": [
            {
              "delta": {
                "tool_calls": [
                  {
                    "function": {
                      "arguments": "",
                      "name": "read_file",
                    },
                    "id": "call_cmpl_0123456789abcdef01234567_0",
                    "index": 0,
                    "type": "function",
                  },
                ],
              },
              "finish_reason": null,
              "index": 0,
              "logprobs": null,
            },
          ],
          "created": 1760000001,
          "id": "chatcmpl-cmpl_0123456789abcdef01234567",
          "model": "asked-model",
          "object": "chat.completion.chunk",
        },
        {
          "choices": [
            {
              "delta": {
                "tool_calls": [
                  {
                    "function": {
                      "arguments": "{"path":"a.txt"}",
                    },
                    "index": 0,
                  },
                ],
              },
              "finish_reason": null,
              "index": 0,
              "logprobs": null,
            },
          ],
          "created": 1760000001,
          "id": "chatcmpl-cmpl_0123456789abcdef01234567",
          "model": "asked-model",
          "object": "chat.completion.chunk",
        },
        {
          "choices": [
            {
              "delta": {
                "tool_calls": [
                  {
                    "function": {
                      "arguments": "",
                      "name": "apply_patch",
                    },
                    "id": "call_cmpl_0123456789abcdef01234567_1",
                    "index": 1,
                    "type": "function",
                  },
                ],
              },
              "finish_reason": null,
              "index": 0,
              "logprobs": null,
            },
          ],
          "created": 1760000001,
          "id": "chatcmpl-cmpl_0123456789abcdef01234567",
          "model": "asked-model",
          "object": "chat.completion.chunk",
        },
        {
          "choices": [
            {
              "delta": {},
              "finish_reason": "tool_calls",
              "index": 0,
              "logprobs": null,
            },
          ],
          "created": 1760000001,
          "id": "chatcmpl-cmpl_0123456789abcdef01234567",
          "model": "asked-model",
          "object": "chat.completion.chunk",
        },
        {
          "choices": [],
          "created": 1760000001,
          "id": "chatcmpl-cmpl_0123456789abcdef01234567",
          "model": "asked-model",
          "object": "chat.completion.chunk",
          "usage": {
            "completion_tokens": 30,
            "prompt_tokens": 120,
            "prompt_tokens_details": {
              "cached_tokens": 20,
            },
            "total_tokens": 150,
          },
        },
        "[DONE]",
      ]
    `)
    expect(run('openai-chat', 'text', false)).toMatchInlineSnapshot(`
      [
        {
          "choices": [
            {
              "delta": {
                "content": "",
                "role": "assistant",
              },
              "finish_reason": null,
              "index": 0,
              "logprobs": null,
            },
          ],
          "created": 1760000001,
          "id": "chatcmpl-cmpl_0123456789abcdef01234567",
          "model": "asked-model",
          "object": "chat.completion.chunk",
        },
        {
          "choices": [
            {
              "delta": {
                "content": "Done.",
              },
              "finish_reason": null,
              "index": 0,
              "logprobs": null,
            },
          ],
          "created": 1760000001,
          "id": "chatcmpl-cmpl_0123456789abcdef01234567",
          "model": "asked-model",
          "object": "chat.completion.chunk",
        },
        {
          "choices": [
            {
              "delta": {},
              "finish_reason": "stop",
              "index": 0,
              "logprobs": null,
            },
          ],
          "created": 1760000001,
          "id": "chatcmpl-cmpl_0123456789abcdef01234567",
          "model": "asked-model",
          "object": "chat.completion.chunk",
        },
        "[DONE]",
      ]
    `)
    expect(run('openai-chat', 'thinking', false)).toMatchInlineSnapshot(`
      [
        {
          "choices": [
            {
              "delta": {
                "content": "",
                "role": "assistant",
              },
              "finish_reason": null,
              "index": 0,
              "logprobs": null,
            },
          ],
          "created": 1760000001,
          "id": "chatcmpl-cmpl_0123456789abcdef01234567",
          "model": "asked-model",
          "object": "chat.completion.chunk",
        },
        {
          "choices": [
            {
              "delta": {
                "reasoning_content": "Only thoughts.",
              },
              "finish_reason": null,
              "index": 0,
              "logprobs": null,
            },
          ],
          "created": 1760000001,
          "id": "chatcmpl-cmpl_0123456789abcdef01234567",
          "model": "asked-model",
          "object": "chat.completion.chunk",
        },
        {
          "choices": [
            {
              "delta": {},
              "finish_reason": "stop",
              "index": 0,
              "logprobs": null,
            },
          ],
          "created": 1760000001,
          "id": "chatcmpl-cmpl_0123456789abcdef01234567",
          "model": "asked-model",
          "object": "chat.completion.chunk",
        },
        "[DONE]",
      ]
    `)
  })

  it('anthropic', () => {
    expect(run('anthropic', 'full')).toMatchInlineSnapshot(`
      [
        [
          "message_start",
          {
            "message": {
              "content": [],
              "id": "msg_cmpl_0123456789abcdef01234567",
              "model": "asked-model",
              "role": "assistant",
              "stop_reason": null,
              "stop_sequence": null,
              "type": "message",
              "usage": {
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 20,
                "input_tokens": 100,
                "output_tokens": 0,
              },
            },
            "type": "message_start",
          },
        ],
        [
          "ping",
          {
            "type": "ping",
          },
        ],
        [
          "content_block_start",
          {
            "content_block": {
              "signature": "",
              "thinking": "",
              "type": "thinking",
            },
            "index": 0,
            "type": "content_block_start",
          },
        ],
        [
          "content_block_delta",
          {
            "delta": {
              "thinking": "Think first.",
              "type": "thinking_delta",
            },
            "index": 0,
            "type": "content_block_delta",
          },
        ],
        [
          "content_block_delta",
          {
            "delta": {
              "signature": "rgth1.Y21wbF8wMTIzNDU2Nzg5YWJjZGVmMDEyMzQ1Njc.VGhpbmsgZmlyc3Qu",
              "type": "signature_delta",
            },
            "index": 0,
            "type": "content_block_delta",
          },
        ],
        [
          "content_block_stop",
          {
            "index": 0,
            "type": "content_block_stop",
          },
        ],
        [
          "content_block_start",
          {
            "content_block": {
              "text": "",
              "type": "text",
            },
            "index": 1,
            "type": "content_block_start",
          },
        ],
        [
          "content_block_delta",
          {
            "delta": {
              "text": "Here you go.",
              "type": "text_delta",
            },
            "index": 1,
            "type": "content_block_delta",
          },
        ],
        [
          "content_block_stop",
          {
            "index": 1,
            "type": "content_block_stop",
          },
        ],
        [
          "content_block_start",
          {
            "content_block": {
              "id": "toolu_cmpl_0123456789abcdef01234567_0",
              "input": {},
              "name": "read_file",
              "type": "tool_use",
            },
            "index": 2,
            "type": "content_block_start",
          },
        ],
        [
          "content_block_delta",
          {
            "delta": {
              "partial_json": "{"path":"a.txt"}",
              "type": "input_json_delta",
            },
            "index": 2,
            "type": "content_block_delta",
          },
        ],
        [
          "content_block_stop",
          {
            "index": 2,
            "type": "content_block_stop",
          },
        ],
        [
          "content_block_start",
          {
            "content_block": {
              "id": "toolu_cmpl_0123456789abcdef01234567_1",
              "input": {},
              "name": "apply_patch",
              "type": "tool_use",
            },
            "index": 3,
            "type": "content_block_start",
          },
        ],
        [
          "content_block_delta",
          {
            "delta": {
              "partial_json": "{}",
              "type": "input_json_delta",
            },
            "index": 3,
            "type": "content_block_delta",
          },
        ],
        [
          "content_block_stop",
          {
            "index": 3,
            "type": "content_block_stop",
          },
        ],
        [
          "message_delta",
          {
            "delta": {
              "stop_reason": "tool_use",
              "stop_sequence": null,
            },
            "type": "message_delta",
            "usage": {
              "cache_creation_input_tokens": 0,
              "cache_read_input_tokens": 20,
              "input_tokens": 100,
              "output_tokens": 30,
            },
          },
        ],
        [
          "message_stop",
          {
            "type": "message_stop",
          },
        ],
      ]
    `)
    expect(run('anthropic', 'text')).toMatchInlineSnapshot(`
      [
        [
          "message_start",
          {
            "message": {
              "content": [],
              "id": "msg_cmpl_0123456789abcdef01234567",
              "model": "asked-model",
              "role": "assistant",
              "stop_reason": null,
              "stop_sequence": null,
              "type": "message",
              "usage": {
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 20,
                "input_tokens": 100,
                "output_tokens": 0,
              },
            },
            "type": "message_start",
          },
        ],
        [
          "ping",
          {
            "type": "ping",
          },
        ],
        [
          "content_block_start",
          {
            "content_block": {
              "text": "",
              "type": "text",
            },
            "index": 0,
            "type": "content_block_start",
          },
        ],
        [
          "content_block_delta",
          {
            "delta": {
              "text": "Done.",
              "type": "text_delta",
            },
            "index": 0,
            "type": "content_block_delta",
          },
        ],
        [
          "content_block_stop",
          {
            "index": 0,
            "type": "content_block_stop",
          },
        ],
        [
          "message_delta",
          {
            "delta": {
              "stop_reason": "stop_sequence",
              "stop_sequence": "</end>",
            },
            "type": "message_delta",
            "usage": {
              "cache_creation_input_tokens": 0,
              "cache_read_input_tokens": 20,
              "input_tokens": 100,
              "output_tokens": 30,
            },
          },
        ],
        [
          "message_stop",
          {
            "type": "message_stop",
          },
        ],
      ]
    `)
    expect(run('anthropic', 'empty')).toMatchInlineSnapshot(`
      [
        [
          "message_start",
          {
            "message": {
              "content": [],
              "id": "msg_cmpl_0123456789abcdef01234567",
              "model": "asked-model",
              "role": "assistant",
              "stop_reason": null,
              "stop_sequence": null,
              "type": "message",
              "usage": {
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 20,
                "input_tokens": 100,
                "output_tokens": 0,
              },
            },
            "type": "message_start",
          },
        ],
        [
          "ping",
          {
            "type": "ping",
          },
        ],
        [
          "content_block_start",
          {
            "content_block": {
              "text": "",
              "type": "text",
            },
            "index": 0,
            "type": "content_block_start",
          },
        ],
        [
          "content_block_stop",
          {
            "index": 0,
            "type": "content_block_stop",
          },
        ],
        [
          "message_delta",
          {
            "delta": {
              "stop_reason": "max_tokens",
              "stop_sequence": null,
            },
            "type": "message_delta",
            "usage": {
              "cache_creation_input_tokens": 0,
              "cache_read_input_tokens": 20,
              "input_tokens": 100,
              "output_tokens": 30,
            },
          },
        ],
        [
          "message_stop",
          {
            "type": "message_stop",
          },
        ],
      ]
    `)
  })

  it('openai-responses', () => {
    expect(run('openai-responses', 'full')).toMatchInlineSnapshot(`
      [
        [
          "response.created",
          {
            "response": {
              "background": false,
              "created_at": 1760000001,
              "error": null,
              "id": "resp_cmpl_0123456789abcdef01234567",
              "incomplete_details": null,
              "instructions": null,
              "max_output_tokens": null,
              "metadata": {},
              "model": "asked-model",
              "object": "response",
              "output": [],
              "parallel_tool_calls": true,
              "previous_response_id": null,
              "reasoning": {
                "effort": null,
                "summary": null,
              },
              "status": "in_progress",
              "store": false,
              "temperature": null,
              "text": {
                "format": {
                  "type": "text",
                },
              },
              "tool_choice": "auto",
              "tools": [],
              "top_p": null,
              "truncation": "disabled",
              "usage": null,
            },
            "sequence_number": 0,
            "type": "response.created",
          },
        ],
        [
          "response.in_progress",
          {
            "response": {
              "background": false,
              "created_at": 1760000001,
              "error": null,
              "id": "resp_cmpl_0123456789abcdef01234567",
              "incomplete_details": null,
              "instructions": null,
              "max_output_tokens": null,
              "metadata": {},
              "model": "asked-model",
              "object": "response",
              "output": [],
              "parallel_tool_calls": true,
              "previous_response_id": null,
              "reasoning": {
                "effort": null,
                "summary": null,
              },
              "status": "in_progress",
              "store": false,
              "temperature": null,
              "text": {
                "format": {
                  "type": "text",
                },
              },
              "tool_choice": "auto",
              "tools": [],
              "top_p": null,
              "truncation": "disabled",
              "usage": null,
            },
            "sequence_number": 1,
            "type": "response.in_progress",
          },
        ],
        [
          "response.output_item.added",
          {
            "item": {
              "id": "rs_cmpl_0123456789abcdef01234567",
              "summary": [],
              "type": "reasoning",
            },
            "output_index": 0,
            "sequence_number": 2,
            "type": "response.output_item.added",
          },
        ],
        [
          "response.reasoning_summary_part.added",
          {
            "item_id": "rs_cmpl_0123456789abcdef01234567",
            "output_index": 0,
            "part": {
              "text": "",
              "type": "summary_text",
            },
            "sequence_number": 3,
            "summary_index": 0,
            "type": "response.reasoning_summary_part.added",
          },
        ],
        [
          "response.reasoning_summary_text.delta",
          {
            "delta": "Think first.",
            "item_id": "rs_cmpl_0123456789abcdef01234567",
            "output_index": 0,
            "sequence_number": 4,
            "summary_index": 0,
            "type": "response.reasoning_summary_text.delta",
          },
        ],
        [
          "response.reasoning_summary_text.done",
          {
            "item_id": "rs_cmpl_0123456789abcdef01234567",
            "output_index": 0,
            "sequence_number": 5,
            "summary_index": 0,
            "text": "Think first.",
            "type": "response.reasoning_summary_text.done",
          },
        ],
        [
          "response.reasoning_summary_part.done",
          {
            "item_id": "rs_cmpl_0123456789abcdef01234567",
            "output_index": 0,
            "part": {
              "text": "Think first.",
              "type": "summary_text",
            },
            "sequence_number": 6,
            "summary_index": 0,
            "type": "response.reasoning_summary_part.done",
          },
        ],
        [
          "response.output_item.done",
          {
            "item": {
              "encrypted_content": "rgrs1.Y21wbF8wMTIzNDU2Nzg5YWJjZGVmMDEyMzQ1Njc.VGhpbmsgZmlyc3Qu",
              "id": "rs_cmpl_0123456789abcdef01234567",
              "summary": [
                {
                  "text": "Think first.",
                  "type": "summary_text",
                },
              ],
              "type": "reasoning",
            },
            "output_index": 0,
            "sequence_number": 7,
            "type": "response.output_item.done",
          },
        ],
        [
          "response.output_item.added",
          {
            "item": {
              "content": [],
              "id": "msg_cmpl_0123456789abcdef01234567",
              "role": "assistant",
              "status": "in_progress",
              "type": "message",
            },
            "output_index": 1,
            "sequence_number": 8,
            "type": "response.output_item.added",
          },
        ],
        [
          "response.content_part.added",
          {
            "content_index": 0,
            "item_id": "msg_cmpl_0123456789abcdef01234567",
            "output_index": 1,
            "part": {
              "annotations": [],
              "logprobs": [],
              "text": "",
              "type": "output_text",
            },
            "sequence_number": 9,
            "type": "response.content_part.added",
          },
        ],
        [
          "response.output_text.delta",
          {
            "content_index": 0,
            "delta": "Here you go.",
            "item_id": "msg_cmpl_0123456789abcdef01234567",
            "logprobs": [],
            "output_index": 1,
            "sequence_number": 10,
            "type": "response.output_text.delta",
          },
        ],
        [
          "response.output_text.done",
          {
            "content_index": 0,
            "item_id": "msg_cmpl_0123456789abcdef01234567",
            "logprobs": [],
            "output_index": 1,
            "sequence_number": 11,
            "text": "Here you go.",
            "type": "response.output_text.done",
          },
        ],
        [
          "response.content_part.done",
          {
            "content_index": 0,
            "item_id": "msg_cmpl_0123456789abcdef01234567",
            "output_index": 1,
            "part": {
              "annotations": [],
              "logprobs": [],
              "text": "Here you go.",
              "type": "output_text",
            },
            "sequence_number": 12,
            "type": "response.content_part.done",
          },
        ],
        [
          "response.output_item.done",
          {
            "item": {
              "content": [
                {
                  "annotations": [],
                  "logprobs": [],
                  "text": "Here you go.",
                  "type": "output_text",
                },
              ],
              "id": "msg_cmpl_0123456789abcdef01234567",
              "role": "assistant",
              "status": "completed",
              "type": "message",
            },
            "output_index": 1,
            "sequence_number": 13,
            "type": "response.output_item.done",
          },
        ],
        [
          "response.output_item.added",
          {
            "item": {
              "arguments": "",
              "call_id": "call_cmpl_0123456789abcdef01234567_0",
              "id": "fc_cmpl_0123456789abcdef01234567_0",
              "name": "read_file",
              "status": "in_progress",
              "type": "function_call",
            },
            "output_index": 2,
            "sequence_number": 14,
            "type": "response.output_item.added",
          },
        ],
        [
          "response.function_call_arguments.delta",
          {
            "delta": "{"path":"a.txt"}",
            "item_id": "fc_cmpl_0123456789abcdef01234567_0",
            "output_index": 2,
            "sequence_number": 15,
            "type": "response.function_call_arguments.delta",
          },
        ],
        [
          "response.function_call_arguments.done",
          {
            "arguments": "{"path":"a.txt"}",
            "item_id": "fc_cmpl_0123456789abcdef01234567_0",
            "name": "read_file",
            "output_index": 2,
            "sequence_number": 16,
            "type": "response.function_call_arguments.done",
          },
        ],
        [
          "response.output_item.done",
          {
            "item": {
              "arguments": "{"path":"a.txt"}",
              "call_id": "call_cmpl_0123456789abcdef01234567_0",
              "id": "fc_cmpl_0123456789abcdef01234567_0",
              "name": "read_file",
              "status": "completed",
              "type": "function_call",
            },
            "output_index": 2,
            "sequence_number": 17,
            "type": "response.output_item.done",
          },
        ],
        [
          "response.output_item.added",
          {
            "item": {
              "call_id": "call_cmpl_0123456789abcdef01234567_1",
              "id": "ctc_cmpl_0123456789abcdef01234567_1",
              "input": "",
              "name": "apply_patch",
              "type": "custom_tool_call",
            },
            "output_index": 3,
            "sequence_number": 18,
            "type": "response.output_item.added",
          },
        ],
        [
          "response.custom_tool_call_input.done",
          {
            "input": "",
            "item_id": "ctc_cmpl_0123456789abcdef01234567_1",
            "output_index": 3,
            "sequence_number": 19,
            "type": "response.custom_tool_call_input.done",
          },
        ],
        [
          "response.output_item.done",
          {
            "item": {
              "call_id": "call_cmpl_0123456789abcdef01234567_1",
              "id": "ctc_cmpl_0123456789abcdef01234567_1",
              "input": "",
              "name": "apply_patch",
              "type": "custom_tool_call",
            },
            "output_index": 3,
            "sequence_number": 20,
            "type": "response.output_item.done",
          },
        ],
        [
          "response.completed",
          {
            "response": {
              "background": false,
              "created_at": 1760000001,
              "error": null,
              "id": "resp_cmpl_0123456789abcdef01234567",
              "incomplete_details": null,
              "instructions": null,
              "max_output_tokens": null,
              "metadata": {},
              "model": "asked-model",
              "object": "response",
              "output": [
                {
                  "encrypted_content": "rgrs1.Y21wbF8wMTIzNDU2Nzg5YWJjZGVmMDEyMzQ1Njc.VGhpbmsgZmlyc3Qu",
                  "id": "rs_cmpl_0123456789abcdef01234567",
                  "summary": [
                    {
                      "text": "Think first.",
                      "type": "summary_text",
                    },
                  ],
                  "type": "reasoning",
                },
                {
                  "content": [
                    {
                      "annotations": [],
                      "logprobs": [],
                      "text": "Here you go.",
                      "type": "output_text",
                    },
                  ],
                  "id": "msg_cmpl_0123456789abcdef01234567",
                  "role": "assistant",
                  "status": "completed",
                  "type": "message",
                },
                {
                  "arguments": "{"path":"a.txt"}",
                  "call_id": "call_cmpl_0123456789abcdef01234567_0",
                  "id": "fc_cmpl_0123456789abcdef01234567_0",
                  "name": "read_file",
                  "status": "completed",
                  "type": "function_call",
                },
                {
                  "call_id": "call_cmpl_0123456789abcdef01234567_1",
                  "id": "ctc_cmpl_0123456789abcdef01234567_1",
                  "input": "",
                  "name": "apply_patch",
                  "type": "custom_tool_call",
                },
              ],
              "parallel_tool_calls": true,
              "previous_response_id": null,
              "reasoning": {
                "effort": null,
                "summary": null,
              },
              "status": "completed",
              "store": false,
              "temperature": null,
              "text": {
                "format": {
                  "type": "text",
                },
              },
              "tool_choice": "auto",
              "tools": [],
              "top_p": null,
              "truncation": "disabled",
              "usage": {
                "input_tokens": 120,
                "input_tokens_details": {
                  "cached_tokens": 20,
                },
                "output_tokens": 30,
                "output_tokens_details": {
                  "reasoning_tokens": 7,
                },
                "total_tokens": 150,
              },
            },
            "sequence_number": 21,
            "type": "response.completed",
          },
        ],
      ]
    `)
    expect(run('openai-responses', 'empty')).toMatchInlineSnapshot(`
      [
        [
          "response.created",
          {
            "response": {
              "background": false,
              "created_at": 1760000001,
              "error": null,
              "id": "resp_cmpl_0123456789abcdef01234567",
              "incomplete_details": null,
              "instructions": null,
              "max_output_tokens": null,
              "metadata": {},
              "model": "asked-model",
              "object": "response",
              "output": [],
              "parallel_tool_calls": true,
              "previous_response_id": null,
              "reasoning": {
                "effort": null,
                "summary": null,
              },
              "status": "in_progress",
              "store": false,
              "temperature": null,
              "text": {
                "format": {
                  "type": "text",
                },
              },
              "tool_choice": "auto",
              "tools": [],
              "top_p": null,
              "truncation": "disabled",
              "usage": null,
            },
            "sequence_number": 0,
            "type": "response.created",
          },
        ],
        [
          "response.in_progress",
          {
            "response": {
              "background": false,
              "created_at": 1760000001,
              "error": null,
              "id": "resp_cmpl_0123456789abcdef01234567",
              "incomplete_details": null,
              "instructions": null,
              "max_output_tokens": null,
              "metadata": {},
              "model": "asked-model",
              "object": "response",
              "output": [],
              "parallel_tool_calls": true,
              "previous_response_id": null,
              "reasoning": {
                "effort": null,
                "summary": null,
              },
              "status": "in_progress",
              "store": false,
              "temperature": null,
              "text": {
                "format": {
                  "type": "text",
                },
              },
              "tool_choice": "auto",
              "tools": [],
              "top_p": null,
              "truncation": "disabled",
              "usage": null,
            },
            "sequence_number": 1,
            "type": "response.in_progress",
          },
        ],
        [
          "response.output_item.added",
          {
            "item": {
              "content": [],
              "id": "msg_cmpl_0123456789abcdef01234567",
              "role": "assistant",
              "status": "in_progress",
              "type": "message",
            },
            "output_index": 0,
            "sequence_number": 2,
            "type": "response.output_item.added",
          },
        ],
        [
          "response.content_part.added",
          {
            "content_index": 0,
            "item_id": "msg_cmpl_0123456789abcdef01234567",
            "output_index": 0,
            "part": {
              "annotations": [],
              "logprobs": [],
              "text": "",
              "type": "output_text",
            },
            "sequence_number": 3,
            "type": "response.content_part.added",
          },
        ],
        [
          "response.output_text.done",
          {
            "content_index": 0,
            "item_id": "msg_cmpl_0123456789abcdef01234567",
            "logprobs": [],
            "output_index": 0,
            "sequence_number": 4,
            "text": "",
            "type": "response.output_text.done",
          },
        ],
        [
          "response.content_part.done",
          {
            "content_index": 0,
            "item_id": "msg_cmpl_0123456789abcdef01234567",
            "output_index": 0,
            "part": {
              "annotations": [],
              "logprobs": [],
              "text": "",
              "type": "output_text",
            },
            "sequence_number": 5,
            "type": "response.content_part.done",
          },
        ],
        [
          "response.output_item.done",
          {
            "item": {
              "content": [
                {
                  "annotations": [],
                  "logprobs": [],
                  "text": "",
                  "type": "output_text",
                },
              ],
              "id": "msg_cmpl_0123456789abcdef01234567",
              "role": "assistant",
              "status": "incomplete",
              "type": "message",
            },
            "output_index": 0,
            "sequence_number": 6,
            "type": "response.output_item.done",
          },
        ],
        [
          "response.incomplete",
          {
            "response": {
              "background": false,
              "created_at": 1760000001,
              "error": null,
              "id": "resp_cmpl_0123456789abcdef01234567",
              "incomplete_details": {
                "reason": "max_output_tokens",
              },
              "instructions": null,
              "max_output_tokens": null,
              "metadata": {},
              "model": "asked-model",
              "object": "response",
              "output": [
                {
                  "content": [
                    {
                      "annotations": [],
                      "logprobs": [],
                      "text": "",
                      "type": "output_text",
                    },
                  ],
                  "id": "msg_cmpl_0123456789abcdef01234567",
                  "role": "assistant",
                  "status": "incomplete",
                  "type": "message",
                },
              ],
              "parallel_tool_calls": true,
              "previous_response_id": null,
              "reasoning": {
                "effort": null,
                "summary": null,
              },
              "status": "incomplete",
              "store": false,
              "temperature": null,
              "text": {
                "format": {
                  "type": "text",
                },
              },
              "tool_choice": "auto",
              "tools": [],
              "top_p": null,
              "truncation": "disabled",
              "usage": {
                "input_tokens": 120,
                "input_tokens_details": {
                  "cached_tokens": 20,
                },
                "output_tokens": 30,
                "output_tokens_details": {
                  "reasoning_tokens": 7,
                },
                "total_tokens": 150,
              },
            },
            "sequence_number": 7,
            "type": "response.incomplete",
          },
        ],
      ]
    `)
  })

  it('google', () => {
    expect(run('google', 'full')).toMatchInlineSnapshot(`
      [
        {
          "candidates": [
            {
              "content": {
                "parts": [
                  {
                    "text": "Think first.",
                    "thought": true,
                  },
                ],
                "role": "model",
              },
              "index": 0,
            },
          ],
          "modelVersion": "asked-model",
          "responseId": "cmpl_0123456789abcdef01234567",
        },
        {
          "candidates": [
            {
              "content": {
                "parts": [
                  {
                    "text": "Here you go.",
                  },
                  {
                    "functionCall": {
                      "args": {
                        "path": "a.txt",
                      },
                      "id": "call_cmpl_0123456789abcdef01234567_0",
                      "name": "read_file",
                    },
                    "thoughtSignature": "cmdnczEKY21wbF8wMTIzNDU2Nzg5YWJjZGVmMDEyMzQ1NjcKVGhpbmsgZmlyc3Qu",
                  },
                  {
                    "functionCall": {
                      "args": {},
                      "id": "call_cmpl_0123456789abcdef01234567_1",
                      "name": "apply_patch",
                    },
                  },
                ],
                "role": "model",
              },
              "finishReason": "STOP",
              "index": 0,
            },
          ],
          "modelVersion": "asked-model",
          "responseId": "cmpl_0123456789abcdef01234567",
          "usageMetadata": {
            "cachedContentTokenCount": 20,
            "candidatesTokenCount": 23,
            "promptTokenCount": 120,
            "thoughtsTokenCount": 7,
            "totalTokenCount": 150,
          },
        },
      ]
    `)
    expect(run('google', 'text')).toMatchInlineSnapshot(`
      [
        {
          "candidates": [
            {
              "content": {
                "parts": [
                  {
                    "text": "Done.",
                  },
                ],
                "role": "model",
              },
              "finishReason": "STOP",
              "index": 0,
            },
          ],
          "modelVersion": "asked-model",
          "responseId": "cmpl_0123456789abcdef01234567",
          "usageMetadata": {
            "cachedContentTokenCount": 20,
            "candidatesTokenCount": 23,
            "promptTokenCount": 120,
            "thoughtsTokenCount": 7,
            "totalTokenCount": 150,
          },
        },
      ]
    `)
    expect(run('google', 'thinking')).toMatchInlineSnapshot(`
      [
        {
          "candidates": [
            {
              "content": {
                "parts": [
                  {
                    "text": "Only thoughts.",
                    "thought": true,
                    "thoughtSignature": "cmdnczEKY21wbF8wMTIzNDU2Nzg5YWJjZGVmMDEyMzQ1NjcKT25seSB0aG91Z2h0cy4=",
                  },
                ],
                "role": "model",
              },
              "finishReason": "STOP",
              "index": 0,
            },
          ],
          "modelVersion": "asked-model",
          "responseId": "cmpl_0123456789abcdef01234567",
          "usageMetadata": {
            "cachedContentTokenCount": 20,
            "candidatesTokenCount": 23,
            "promptTokenCount": 120,
            "thoughtsTokenCount": 7,
            "totalTokenCount": 150,
          },
        },
      ]
    `)
  })

  it('errors, before and after the stream started', () => {
    const errors = Object.fromEntries(
      Object.entries(ENCODERS).map(([api, create]) => {
        const fresh = create(context(false))
        const started = create(context(false))
        const opened = started.start()
        return [api, { fresh: frames(fresh.error(ERROR)), started: frames(opened + started.error(ERROR)).slice(opened ? 2 : 0) }]
      }),
    )
    expect(errors).toMatchInlineSnapshot(`
      {
        "anthropic": {
          "fresh": [
            [
              "error",
              {
                "error": {
                  "message": "engine unreachable",
                  "type": "api_error",
                },
                "type": "error",
              },
            ],
          ],
          "started": [
            [
              "error",
              {
                "error": {
                  "message": "engine unreachable",
                  "type": "api_error",
                },
                "type": "error",
              },
            ],
          ],
        },
        "google": {
          "fresh": [
            {
              "error": {
                "code": 502,
                "message": "engine unreachable",
                "status": "INTERNAL",
              },
            },
          ],
          "started": [
            {
              "error": {
                "code": 502,
                "message": "engine unreachable",
                "status": "INTERNAL",
              },
            },
          ],
        },
        "openai-chat": {
          "fresh": [
            {
              "error": {
                "code": null,
                "message": "engine unreachable",
                "param": "model",
                "type": "upstream_error",
              },
            },
            "[DONE]",
          ],
          "started": [
            {
              "error": {
                "code": null,
                "message": "engine unreachable",
                "param": "model",
                "type": "upstream_error",
              },
            },
            "[DONE]",
          ],
        },
        "openai-responses": {
          "fresh": [
            [
              "error",
              {
                "code": "server_error",
                "message": "engine unreachable",
                "param": "model",
                "sequence_number": 0,
                "type": "error",
              },
            ],
          ],
          "started": [
            [
              "error",
              {
                "code": "server_error",
                "message": "engine unreachable",
                "param": "model",
                "sequence_number": 2,
                "type": "error",
              },
            ],
            [
              "response.failed",
              {
                "response": {
                  "background": false,
                  "created_at": 1760000001,
                  "error": {
                    "code": "server_error",
                    "message": "engine unreachable",
                  },
                  "id": "resp_cmpl_0123456789abcdef01234567",
                  "incomplete_details": null,
                  "instructions": null,
                  "max_output_tokens": null,
                  "metadata": {},
                  "model": "asked-model",
                  "object": "response",
                  "output": [],
                  "parallel_tool_calls": true,
                  "previous_response_id": null,
                  "reasoning": {
                    "effort": null,
                    "summary": null,
                  },
                  "status": "failed",
                  "store": false,
                  "temperature": null,
                  "text": {
                    "format": {
                      "type": "text",
                    },
                  },
                  "tool_choice": "auto",
                  "tools": [],
                  "top_p": null,
                  "truncation": "disabled",
                  "usage": null,
                },
                "sequence_number": 3,
                "type": "response.failed",
              },
            ],
          ],
        },
      }
    `)
  })
})
