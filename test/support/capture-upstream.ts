/**
 * @module
 * A canned vLLM-shaped upstream on 127.0.0.1 that records every request it gets (method, path,
 * headers, body): for tests about what the edge sends where (API keys, credentials). Answers
 * `POST …/chat/completions` with a fixed completion carrying token ids and logprobs, `POST /tokenize`
 * with a token list, `GET /v1/models` with one model.
 */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http'

export interface SeenRequest {
  method: string
  path: string
  headers: IncomingHttpHeaders
  body: string
}

export interface CaptureUpstream {
  url: string
  port: number
  seen: SeenRequest[]
  close(): Promise<void>
}

const COMPLETION = {
  id: 'chatcmpl-capture',
  object: 'chat.completion',
  created: 1760000000,
  model: 'Qwen/Qwen3-8B',
  prompt_token_ids: [1, 2, 3, 4],
  choices: [
    {
      index: 0,
      message: { role: 'assistant', content: 'ok', reasoning: null, tool_calls: [] },
      logprobs: { content: [11, 151645].map((id) => ({ token: `t${id}`, logprob: -0.5, bytes: [116], top_logprobs: [] })) },
      finish_reason: 'stop',
      stop_reason: null,
      token_ids: [11, 151645],
    },
  ],
  usage: { prompt_tokens: 4, completion_tokens: 2, total_tokens: 6 },
}

export async function startCaptureUpstream(): Promise<CaptureUpstream> {
  const seen: SeenRequest[] = []
  const server: Server = createServer((request, response) => {
    let body = ''
    request.on('data', (chunk: Buffer) => {
      body += chunk.toString()
    })
    request.on('end', () => {
      const path = request.url ?? '/'
      seen.push({ method: request.method ?? 'GET', path, headers: request.headers, body })
      const json = (status: number, value: unknown) =>
        response.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(value))
      if (path.endsWith('/chat/completions')) return json(200, COMPLETION)
      if (path.endsWith('/tokenize')) return json(200, { count: 4, tokens: [1, 2, 3, 4], max_model_len: 32768 })
      if (path.endsWith('/v1/models')) return json(200, { object: 'list', data: [{ id: 'Qwen/Qwen3-8B', max_model_len: 32768 }] })
      return json(404, { error: { message: `no route ${path}` } })
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const address = server.address()
  const port = typeof address === 'object' && address ? address.port : 0
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    seen,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}
