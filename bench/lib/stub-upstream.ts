/**
 * @module
 * A minimal vLLM-shaped upstream for gateway benchmarks: reads the whole body and answers a canned
 * chat completion with `prompt_token_ids` sized like the prompt (bytes ÷ 4) and 200 sampled tokens with
 * logprobs. It does no tokenization, so the numbers measure the gateway, not the engine.
 *
 * `node bench/lib/stub-upstream.ts --port 0` prints `listening <port>` on stdout.
 */
import { createServer } from 'node:http'
import { parseArgs } from 'node:util'

const RESPONSE_TOKENS = 200

function cannedResponse(promptTokens: number): string {
  const promptIds = Array.from({ length: promptTokens }, (_, i) => (i * 7919) % 151000)
  const tokenIds = Array.from({ length: RESPONSE_TOKENS }, (_, i) => (i * 104729) % 151000)
  tokenIds[RESPONSE_TOKENS - 1] = 151645
  return JSON.stringify({
    id: 'chatcmpl-stub',
    object: 'chat.completion',
    created: 1760000000,
    model: 'Qwen/Qwen3-8B',
    prompt_token_ids: promptIds,
    choices: [
      {
        index: 0,
        message: { role: 'assistant', content: 'ok '.repeat(RESPONSE_TOKENS - 1).trim(), reasoning: null, tool_calls: [] },
        logprobs: {
          content: tokenIds.map((id, i) => ({ token: `t${id}`, logprob: Math.fround(-(i + 1) / 1024), bytes: [116], top_logprobs: [] })),
        },
        finish_reason: 'stop',
        stop_reason: null,
        token_ids: tokenIds,
      },
    ],
    usage: { prompt_tokens: promptTokens, completion_tokens: RESPONSE_TOKENS, total_tokens: promptTokens + RESPONSE_TOKENS },
  })
}

/** Canned bodies per size bucket (powers of two of the prompt size), built once. */
const cache = new Map<number, Buffer>()
function responseFor(bodyBytes: number): Buffer {
  const bucket = 2 ** Math.max(6, Math.ceil(Math.log2(Math.max(1, bodyBytes / 4))))
  let body = cache.get(bucket)
  if (!body) {
    body = Buffer.from(cannedResponse(Math.min(bucket, 262_144)))
    cache.set(bucket, body)
  }
  return body
}

const { values } = parseArgs({ options: { port: { type: 'string', default: '0' } } })
const server = createServer((request, response) => {
  let bytes = 0
  request.on('data', (chunk: Buffer) => {
    bytes += chunk.length
  })
  request.on('end', () => {
    if (request.url === '/health') {
      response.writeHead(200).end()
      return
    }
    const body = responseFor(bytes)
    response.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length })
    response.end(body)
  })
})
server.keepAliveTimeout = 60_000
server.listen(Number(values.port), '127.0.0.1', () => {
  const address = server.address()
  console.log(`listening ${typeof address === 'object' && address ? address.port : 0}`)
})
const shutdown = () => {
  server.closeAllConnections()
  process.exit(0)
}
process.on('SIGTERM', shutdown)
process.on('SIGINT', shutdown)
