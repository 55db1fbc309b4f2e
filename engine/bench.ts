/**
 * @module engine/bench
 * Load generator for the stand-in engine: replays one chat request of a given size at a fixed
 * concurrency over keep-alive connections and prints requests/s and latency percentiles.
 * Run the engine in another process (`npm run engine -- --port 8000`), then
 * `npx node engine/bench.ts --url http://127.0.0.1:8000 --concurrency 16 --seconds 10 --body-kb 50`.
 */

import { Agent, request as httpRequest } from 'node:http'
import { parseArgs } from 'node:util'

const { values } = parseArgs({
  options: {
    url: { type: 'string', default: 'http://127.0.0.1:8000' },
    concurrency: { type: 'string', default: '16' },
    seconds: { type: 'string', default: '10' },
    'body-kb': { type: 'string', default: '50' },
    stream: { type: 'boolean', default: false },
    unique: { type: 'boolean', default: false },
  },
})
const concurrency = Number(values.concurrency)
const durationMs = Number(values.seconds) * 1000
const bodyKb = Number(values['body-kb'])
const target = new URL('/v1/chat/completions', values.url)
const agent = new Agent({ keepAlive: true, maxSockets: concurrency })

const filler = 'const value = compute(input) // keep the tokenizer busy with code-like text\n'
function body(nonce: number): string {
  const history = filler.repeat(Math.ceil((bodyKb * 1024) / filler.length)).slice(0, bodyKb * 1024)
  return JSON.stringify({
    model: 'Qwen/Qwen3-8B',
    messages: [
      { role: 'system', content: `You are a coding agent.${values.unique ? ` run ${nonce}` : ''}` },
      { role: 'user', content: history },
      { role: 'user', content: 'create hello.txt containing hi' },
    ],
    tools: [
      {
        type: 'function',
        function: {
          name: 'bash',
          parameters: {
            type: 'object',
            properties: { cmd: { type: 'string' } },
            required: ['cmd'],
          },
        },
      },
    ],
    logprobs: true,
    return_token_ids: true,
    stream: values.stream,
  })
}

function post(payload: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const started = performance.now()
    const outgoing = httpRequest(
      target,
      {
        method: 'POST',
        agent,
        headers: {
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(payload),
        },
      },
      (response) => {
        response.on('data', () => {})
        response.on('end', () => {
          if (response.statusCode !== 200) reject(new Error(`HTTP ${response.statusCode}`))
          else resolve(performance.now() - started)
        })
      },
    )
    outgoing.on('error', reject)
    outgoing.end(payload)
  })
}

const shared = body(0)
let counter = 0
const latencies: number[] = []
const deadline = performance.now() + durationMs
async function worker(): Promise<void> {
  while (performance.now() < deadline) {
    latencies.push(await post(values.unique ? body(++counter) : shared))
  }
}

await post(shared) // warm the caches and the connection
const started = performance.now()
await Promise.all(Array.from({ length: concurrency }, worker))
const elapsedS = (performance.now() - started) / 1000
latencies.sort((left, right) => left - right)
const at = (share: number) => latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * share))] ?? 0
console.log(
  `${latencies.length} requests in ${elapsedS.toFixed(1)} s → ${(latencies.length / elapsedS).toFixed(0)} req/s ` +
    `(body ${bodyKb} KB, concurrency ${concurrency}${values.stream ? ', stream' : ''}${values.unique ? ', unique bodies' : ''}); ` +
    `latency p50 ${at(0.5).toFixed(1)} ms, p99 ${at(0.99).toFixed(1)} ms`,
)
agent.destroy()
