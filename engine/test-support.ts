/**
 * @module engine/test-support
 * Shared helpers for the engine's vitest suites: raw JSON calls and the vLLM-only response
 * fields the OpenAI SDK types do not know about.
 */

import type OpenAI from 'openai'

export interface VllmLogprobEntry {
  token: string
  logprob: number
  bytes: number[]
  top_logprobs: Array<{ token: string; logprob: number; bytes: number[] }>
}

export interface VllmChoice {
  index: number
  finish_reason: string
  stop_reason: string | number | null
  token_ids: number[]
  logprobs: { content: VllmLogprobEntry[] } | null
  message: {
    role: string
    content: string | null
    reasoning: string | null
    tool_calls?: Array<{ id: string; type: string; function: { name: string; arguments: string } }>
  }
}

export interface VllmChatCompletion {
  id: string
  prompt_token_ids: number[]
  choices: VllmChoice[]
  usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number }
}

/** Chat-completions params plus vLLM extras (`return_token_ids`, `chat_template_kwargs`, …). */
export type VllmChatParams = Omit<OpenAI.Chat.ChatCompletionCreateParamsNonStreaming, 'model'> & {
  model?: string
} & Record<string, unknown>

/** The stand-in accepts requests without `model`, like vLLM; the SDK type wants one. */
export async function createChat(client: OpenAI, params: VllmChatParams): Promise<VllmChatCompletion> {
  const body = {
    model: 'Qwen/Qwen3-8B',
    ...params,
  } as OpenAI.Chat.ChatCompletionCreateParamsNonStreaming
  const completion = await client.chat.completions.create(body)
  return completion as unknown as VllmChatCompletion
}

export async function postJson(url: string, body: unknown): Promise<{ status: number; json: unknown; text: string }> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  })
  const text = await response.text()
  let json: unknown = null
  try {
    json = JSON.parse(text)
  } catch {
    json = null
  }
  return { status: response.status, json, text }
}

export async function tokenizeMessages(baseUrl: string, body: Record<string, unknown>): Promise<number[]> {
  const { status, json } = await postJson(`${baseUrl}/tokenize`, body)
  if (status !== 200) throw new Error(`tokenize failed: ${status}`)
  return (json as { tokens: number[] }).tokens
}

/** The message a client sends back for an assistant turn (vLLM's `reasoning` included). */
export function assistantMessageFrom(choice: VllmChoice): Record<string, unknown> {
  return {
    role: 'assistant',
    content: choice.message.content,
    reasoning: choice.message.reasoning,
    tool_calls: choice.message.tool_calls,
  }
}
