/**
 * @module
 * `npm run fuzz`: ≥ 10,000 mutated requests across the four model APIs against the real edge (Miniflare /
 * workerd) and the stand-in engine. Seeds are the recorded request fixtures; mutations delete keys,
 * change types, break JSON, add unknown roles / blocks, grow strings and nest deeply. Prints counts of
 * 2xx / 4xx / 5xx, split by who answered (edge or relayed engine error). The edge must originate no 5xx.
 * Failing samples are written to `.bench/fuzz-failures/`. Last line: one JSON object.
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { numberOption, parseArgs } from './lib/cli-args.ts'
import { startEngine } from '../engine/server.ts'
import { startMiniflareEdge } from './lib/miniflare-edge.ts'
import { REPO_ROOT } from './lib/processes.ts'

const ARGS = {
  options: {
    requests: { type: 'string', default: '10000' },
    seed: { type: 'string', default: '1' },
    concurrency: { type: 'string', default: '8' },
    'max-seconds': { type: 'string', default: '600' },
  },
} as const
const { values } = parseArgs(ARGS)
const flags = {
  requests: numberOption(ARGS, 'requests', values.requests, { integer: true, min: 1 }),
  seed: numberOption(ARGS, 'seed', values.seed, { integer: true }),
  concurrency: numberOption(ARGS, 'concurrency', values.concurrency, { integer: true, min: 1, max: 256 }),
  maxSeconds: numberOption(ARGS, 'max-seconds', values['max-seconds'], { min: 1 }),
}
const ADMIN = 'fuzz-admin-token'

type Json = null | boolean | number | string | Json[] | { [key: string]: Json }
interface Seed {
  api: string
  path: string
  headers: Record<string, string>
  body: Json
}

/** mulberry32: small, seeded, deterministic. */
function rng(seed: number): () => number {
  let state = seed >>> 0
  return () => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

function loadSeeds(): Seed[] {
  const seeds: Seed[] = [
    {
      api: 'openai-chat',
      path: '/v1/chat/completions',
      headers: {},
      body: {
        model: 'gpt-x',
        messages: [
          { role: 'system', content: 'You are a coding agent.' },
          { role: 'user', content: 'create hello.txt containing hi' },
          {
            role: 'assistant',
            content: null,
            tool_calls: [
              { id: 'call_1', type: 'function', function: { name: 'write_file', arguments: '{"file_path":"hello.txt","content":"hi"}' } },
            ],
          },
          { role: 'tool', tool_call_id: 'call_1', content: 'ok' },
        ],
        tools: [
          {
            type: 'function',
            function: {
              name: 'write_file',
              parameters: { type: 'object', properties: { file_path: { type: 'string' }, content: { type: 'string' } } },
            },
          },
        ],
        temperature: 0.7,
        stream: false,
      },
    },
  ]
  for (const api of ['anthropic', 'openai-responses', 'google']) {
    const dir = join(REPO_ROOT, 'src/normalize/providers', api, '__fixtures__')
    for (const file of readdirSync(dir)) {
      if (!file.endsWith('.request.json') || file.includes('count-tokens')) continue
      // Recorded fixtures: `{ path, headers, body }` as the harness sent them.
      const fixture = JSON.parse(readFileSync(join(dir, file), 'utf8')) as { path: string; headers?: Record<string, string>; body: Json }
      seeds.push({ api, path: fixture.path, headers: fixture.headers ?? {}, body: fixture.body })
    }
  }
  return seeds
}

const ODD_VALUES: Json[] = [
  null,
  0,
  -1,
  1e308,
  '',
  'x'.repeat(5000),
  true,
  [],
  {},
  [[[]]],
  { type: 'wizard' },
  '\u0000\ud800',
  'user',
  'system',
  'tool',
]

function paths(value: Json, prefix: (string | number)[] = [], out: (string | number)[][] = []): (string | number)[][] {
  if (out.length > 400) return out
  if (Array.isArray(value))
    value.forEach((item, i) => {
      out.push([...prefix, i])
      paths(item, [...prefix, i], out)
    })
  else if (value && typeof value === 'object')
    for (const key of Object.keys(value)) {
      out.push([...prefix, key])
      paths(value[key] as Json, [...prefix, key], out)
    }
  return out
}

function mutate(body: Json, random: () => number): { text: string; stream: boolean } {
  const copy = structuredClone(body) as Json
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)] as T
  const all = paths(copy)
  const rounds = 1 + Math.floor(random() * 3)
  for (let round = 0; round < rounds && all.length; round++) {
    const path = pick(all)
    const parentPath = path.slice(0, -1)
    let parent: Json | undefined = copy
    for (const key of parentPath) {
      if (!parent || typeof parent !== 'object') break
      parent = (parent as Record<string, Json>)[key as string]
    }
    const key = path.at(-1) as string | number
    if (!parent || typeof parent !== 'object') continue
    const target = parent as Record<string | number, Json>
    switch (Math.floor(random() * 6)) {
      case 0:
        if (Array.isArray(parent)) parent.splice(key as number, 1)
        else delete target[key]
        break
      case 1:
        target[key] = pick(ODD_VALUES)
        break
      case 2:
        if (Array.isArray(target[key])) (target[key] as Json[]).push(...((target[key] as Json[]).slice(0, 3) as Json[]))
        else target[key] = [target[key] as Json]
        break
      case 3:
        target[key] = typeof target[key] === 'string' ? (target[key] as string).repeat(50) : String(target[key])
        break
      case 4: {
        let deep: Json = 'bottom'
        for (let i = 0; i < 200; i++) deep = { nested: deep }
        target[key] = deep
        break
      }
      default:
        target[`unknown_${Math.floor(random() * 100)}`] = pick(ODD_VALUES)
    }
  }
  const stream = random() < 0.3
  if (copy && typeof copy === 'object' && !Array.isArray(copy) && random() < 0.5) (copy as Record<string, Json>).stream = stream
  let text = JSON.stringify(copy)
  if (random() < 0.05) text = text.slice(0, Math.floor(random() * text.length))
  return { text, stream }
}

const engine = await startEngine({ seed: 11, acceptAnyModel: true })
const persistTo = mkdtempSync(join(tmpdir(), 'rollgate-fuzz-'))
const edge = await startMiniflareEdge({
  persistTo,
  vars: { ROLLGATE_ADMIN_TOKEN: ADMIN, ROLLGATE_SIGNING_KEY: 'fuzz', ROLLGATE_UPSTREAM_URL: engine.url, ROLLGATE_HEARTBEAT_MS: '1000' },
})
const failuresDir = join(REPO_ROOT, '.bench/fuzz-failures')
const counts = { '2xx': 0, '4xx': 0, '5xx_edge': 0, '5xx_upstream': 0, transport_errors: 0 }
const byApi: Record<string, Record<string, number>> = {}
try {
  const session = (await (
    await fetch(`${edge.url}/v1/sessions`, { method: 'POST', headers: { authorization: `Bearer ${ADMIN}` }, body: '{}' })
  ).json()) as { token: string }
  const seeds = loadSeeds()
  const random = rng(flags.seed)
  const total = flags.requests
  const deadline = Date.now() + flags.maxSeconds * 1000
  let issued = 0
  let failuresSaved = 0
  const worker = async () => {
    while (issued < total && Date.now() < deadline) {
      issued++
      const seed = seeds[Math.floor(random() * seeds.length)]!
      const { text } = mutate(seed.body, random)
      const url = `${edge.url}${seed.path}`
      const headers: Record<string, string> = {
        ...seed.headers,
        'content-type': 'application/json',
        authorization: `Bearer ${session.token}`,
      }
      let status = 0
      let source = ''
      try {
        const response = await fetch(url, { method: 'POST', headers, body: text, signal: AbortSignal.timeout(30_000) })
        status = response.status
        source = response.headers.get('x-rollgate-error-source') ?? ''
        const answer = await response.text()
        if (status >= 500 && source !== 'upstream' && failuresSaved < 50) {
          mkdirSync(failuresDir, { recursive: true })
          writeFileSync(
            join(failuresDir, `${seed.api}-${issued}.json`),
            JSON.stringify({ url, status, request: text.slice(0, 200_000), answer: answer.slice(0, 5000) }, null, 1),
          )
          failuresSaved++
        }
      } catch {
        counts.transport_errors++
        continue
      }
      const bucket = status < 300 ? '2xx' : status < 500 ? '4xx' : source === 'upstream' ? '5xx_upstream' : '5xx_edge'
      counts[bucket]++
      byApi[seed.api] ??= { '2xx': 0, '4xx': 0, '5xx_edge': 0, '5xx_upstream': 0 }
      byApi[seed.api]![bucket] = (byApi[seed.api]![bucket] ?? 0) + 1
    }
  }
  const started = Date.now()
  await Promise.all(Array.from({ length: flags.concurrency }, worker))
  const seconds = (Date.now() - started) / 1000
  console.log(`${issued} mutated requests in ${seconds.toFixed(1)} s across ${Object.keys(byApi).length} APIs (${seeds.length} seeds)`)
  for (const [api, bucket] of Object.entries(byApi)) console.log(`  ${api.padEnd(17)} ${JSON.stringify(bucket)}`)
  console.log(
    `2xx ${counts['2xx']}, 4xx ${counts['4xx']}, 5xx from the edge ${counts['5xx_edge']}, 5xx relayed from the engine ${counts['5xx_upstream']}, transport errors ${counts.transport_errors}`,
  )
  if (counts['5xx_edge'] > 0) console.log(`edge-originated 5xx samples in ${failuresDir}`)
  console.log(
    JSON.stringify({ requests: issued, seconds, ...counts, by_api: byApi, ok: counts['5xx_edge'] === 0 && counts.transport_errors === 0 }),
  )
  process.exitCode = counts['5xx_edge'] === 0 && counts.transport_errors === 0 ? 0 : 1
} finally {
  await edge.stop()
  await engine.close()
  rmSync(persistTo, { recursive: true, force: true })
}
