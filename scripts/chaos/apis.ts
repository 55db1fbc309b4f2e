/**
 * @module
 * One minimal request per model API (OpenAI chat, Anthropic Messages, OpenAI Responses, Gemini), streaming
 * or not, sent as a harness sends it, and a check that an error answer has that API's own shape.
 */
import { MODEL } from './stack.ts'

export const APIS = ['openai-chat', 'anthropic', 'openai-responses', 'google'] as const
export type Api = (typeof APIS)[number]

export function apiRequest(api: Api, stream: boolean, text = 'create hello.txt containing hi'): { path: string; body: unknown } {
  switch (api) {
    case 'openai-chat':
      return { path: '/v1/chat/completions', body: { model: MODEL, stream, messages: [{ role: 'user', content: text }] } }
    case 'anthropic':
      return { path: '/v1/messages', body: { model: MODEL, stream, max_tokens: 256, messages: [{ role: 'user', content: text }] } }
    case 'openai-responses':
      return { path: '/v1/responses', body: { model: MODEL, stream, input: text } }
    case 'google':
      return {
        path: `/v1beta/models/Qwen3-8B:${stream ? 'streamGenerateContent?alt=sse' : 'generateContent'}`,
        body: { contents: [{ role: 'user', parts: [{ text }] }] },
      }
  }
}

export interface SessionCall {
  /** 200 and, when streamed, a complete stream (`[DONE]`) without an error frame. */
  ok: boolean
  response: Response
  text: string
}

/** One call as a harness makes it: the session token in the base URL (`/s/<token>`), the chaos model asked for. */
export async function callSession(
  edgeUrl: string,
  token: string,
  api: Api,
  stream: boolean,
  text: string,
  timeoutMs: number,
): Promise<SessionCall> {
  const { path, body } = apiRequest(api, stream, text)
  const response = await fetch(`${edgeUrl}/s/${token}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ ...(body as object), model: MODEL }),
    signal: AbortSignal.timeout(timeoutMs),
  })
  const answer = await response.text()
  const ok = response.status === 200 && (!stream || (answer.includes('[DONE]') && !answer.includes('"error"')))
  return { ok, response, text: answer }
}

/** The edge itself answered 5xx (`x-rollgate-error-source: edge`). */
export function edge5xx(response: Response): boolean {
  return response.status >= 500 && response.headers.get('x-rollgate-error-source') === 'edge'
}

/** Whether a JSON error body has the API's own shape. */
export function errorShapeOk(api: Api, body: unknown): boolean {
  const value = body as Record<string, unknown> | null
  if (!value || typeof value !== 'object') return false
  const error = value.error as Record<string, unknown> | undefined
  switch (api) {
    case 'openai-chat':
    case 'openai-responses':
      return typeof error?.message === 'string' && typeof error?.type === 'string'
    case 'anthropic':
      return value.type === 'error' && typeof error?.type === 'string' && typeof error?.message === 'string'
    case 'google':
      return typeof error?.code === 'number' && typeof error?.message === 'string' && typeof error?.status === 'string'
  }
}

/** Whether an SSE body carries the API's own error event (a failure after a 200 stream started). */
export function streamErrorOk(api: Api, text: string): boolean {
  const frames = text
    .split('\n')
    .filter((line) => line.startsWith('data:'))
    .map((line) => line.slice(5).trim())
  const events = text.split('\n').filter((line) => line.startsWith('event:'))
  switch (api) {
    case 'openai-chat':
      return frames.some((frame) => frame.includes('"error"'))
    case 'anthropic':
      return events.some((line) => line.includes('error')) && frames.some((frame) => frame.includes('"type":"error"'))
    case 'openai-responses':
      return events.some((line) => /error|response\.failed/.test(line))
    case 'google':
      return frames.some((frame) => frame.includes('"error"'))
  }
}
