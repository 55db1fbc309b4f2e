/**
 * @module
 * A recording proxy in front of the engine: forwards every request unchanged and keeps, per generation
 * call (`/v1/chat/completions`, `/v1/completions`), the request body and the engine's answer, so tests can
 * compare what the edge captured with what the engine actually served and sampled. Non-streaming answers
 * only are parsed (the edge always calls the engine non-streaming); anything else is forwarded as is.
 */
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'

export interface ServedCall {
  path: string
  at: number
  body: { messages?: unknown[]; tools?: unknown[]; chat_template_kwargs?: Record<string, unknown>; [key: string]: unknown }
  status: number
  answer: {
    prompt_token_ids?: number[] | null
    choices?: { token_ids?: number[] | null; logprobs?: { content?: { logprob: number }[] } | null }[]
    [key: string]: unknown
  } | null
}

export interface EngineTap {
  url: string
  /** Generation calls, in the order the engine answered them. */
  calls: ServedCall[]
  close(): Promise<void>
}

const GENERATION = /\/v1\/(chat\/)?completions$/

export async function startEngineTap(target: string): Promise<EngineTap> {
  const calls: ServedCall[] = []
  const server: Server = createServer(async (req, res) => {
    try {
      const chunks: Buffer[] = []
      for await (const chunk of req) chunks.push(chunk as Buffer)
      const body = Buffer.concat(chunks)
      const controller = new AbortController()
      res.on('close', () => {
        if (!res.writableFinished) controller.abort()
      })
      const headers: Record<string, string> = {}
      for (const name of ['content-type', 'authorization', 'accept']) {
        const value = req.headers[name]
        if (typeof value === 'string') headers[name] = value
      }
      const upstream = await fetch(`${target}${req.url}`, {
        method: req.method,
        headers,
        body: req.method === 'GET' || req.method === 'HEAD' ? undefined : body,
        signal: controller.signal,
      })
      const text = await upstream.text()
      const path = (req.url ?? '').split('?')[0]!
      if (req.method === 'POST' && GENERATION.test(path)) {
        let parsedBody: ServedCall['body'] = {}
        let answer: ServedCall['answer'] = null
        try {
          parsedBody = JSON.parse(body.toString('utf8'))
        } catch {}
        try {
          answer = JSON.parse(text)
        } catch {}
        calls.push({ path, at: Date.now(), body: parsedBody, status: upstream.status, answer })
      }
      res.writeHead(upstream.status, { 'content-type': upstream.headers.get('content-type') ?? 'application/json' })
      res.end(text)
    } catch (error) {
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' })
      res.end(`engine tap: ${error}`)
    }
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    calls,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}
