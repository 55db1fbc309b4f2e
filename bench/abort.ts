/**
 * @module
 * `npm run bench:abort`: how fast the edge lets go of the engine when a streaming client disconnects. Each
 * round streams one call the stand-in engine would hold for a minute, aborts once the engine holds it, and
 * measures the time until the engine sees its request dropped and until the completion is recorded
 * `abandoned`. The edge notices a gone client at its next keep-alive write (`ROLLGATE_HEARTBEAT_MS`, 200 here),
 * so that cadence bounds the figure. Real edge (Miniflare/workerd) and stand-in engine; last line one JSON object.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from '../scripts/lib/cli-args.ts'
import OpenAI from 'openai'
import { startEngine } from '../engine/server.ts'
import { startMiniflareEdge } from '../scripts/lib/miniflare-edge.ts'

const { values } = parseArgs({ options: { rounds: { type: 'string', default: '8' } } })
const ROUNDS = Math.min(Math.max(Number(values.rounds) || 8, 1), 50)
const ADMIN = 'bench-admin-token'
const HEARTBEAT_MS = 200
const POLL_MS = 10
const ROUND_LIMIT_MS = 20_000

async function until(check: () => Promise<boolean> | boolean, what: string): Promise<number> {
  const started = performance.now()
  while (!(await check())) {
    if (performance.now() - started > ROUND_LIMIT_MS) throw new Error(`${what}: not within ${ROUND_LIMIT_MS} ms`)
    await new Promise((resolve) => setTimeout(resolve, POLL_MS))
  }
  return performance.now() - started
}

function quantile(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] as number
}

const engine = await startEngine({ seed: 5 })
const persistTo = mkdtempSync(join(tmpdir(), 'rollgate-bench-abort-'))
const edge = await startMiniflareEdge({
  persistTo,
  vars: {
    ROLLGATE_ADMIN_TOKEN: ADMIN,
    ROLLGATE_SIGNING_KEY: 'k',
    ROLLGATE_UPSTREAM_URL: engine.url,
    ROLLGATE_HEARTBEAT_MS: String(HEARTBEAT_MS),
  },
})
const toEngine: number[] = []
const toRecord: number[] = []
try {
  const session = (await (
    await fetch(`${edge.url}/v1/sessions`, { method: 'POST', headers: { authorization: `Bearer ${ADMIN}` }, body: '{}' })
  ).json()) as { session_id: string; token: string; base_urls: { openai: string } }
  const client = new OpenAI({ baseURL: session.base_urls.openai, apiKey: session.token, maxRetries: 0 })
  const abandoned = async () => {
    const page = (await (
      await fetch(`${edge.url}/v1/sessions/${session.session_id}/completions`, { headers: { authorization: `Bearer ${ADMIN}` } })
    ).json()) as { completions: { status: string }[] }
    return page.completions.filter((record) => record.status === 'abandoned').length
  }
  for (let round = 0; round < ROUNDS; round++) {
    engine.injectFaults([{ delay_ms: 60_000 }])
    const controller = new AbortController()
    const stream = await client.chat.completions.create(
      { model: 'bench', messages: [{ role: 'user', content: `round ${round}` }], stream: true },
      { signal: controller.signal },
    )
    const consumed = (async () => {
      for await (const _chunk of stream) {
        // consume
      }
    })().catch(() => {})
    await until(() => engine.stats().in_flight === 1, 'engine holds the call')
    const abortedAt = performance.now()
    controller.abort()
    await consumed
    await until(() => engine.stats().in_flight === 0, 'engine released')
    toEngine.push(performance.now() - abortedAt)
    await until(async () => (await abandoned()) === round + 1, 'record abandoned')
    toRecord.push(performance.now() - abortedAt)
  }
} finally {
  await edge.stop()
  await engine.close()
  rmSync(persistTo, { recursive: true, force: true })
}
const sortedEngine = [...toEngine].sort((a, b) => a - b)
const sortedRecord = [...toRecord].sort((a, b) => a - b)
const figures = {
  bench: 'abort',
  rounds: ROUNDS,
  heartbeat_ms: HEARTBEAT_MS,
  abort_to_engine_release_ms: { p50: Math.round(quantile(sortedEngine, 0.5)), max: Math.round(sortedEngine.at(-1) as number) },
  abort_to_record_abandoned_ms: { p50: Math.round(quantile(sortedRecord, 0.5)), max: Math.round(sortedRecord.at(-1) as number) },
}
console.log(`abort → engine released: p50 ${figures.abort_to_engine_release_ms.p50} ms, max ${figures.abort_to_engine_release_ms.max} ms`)
console.log(
  `abort → record abandoned: p50 ${figures.abort_to_record_abandoned_ms.p50} ms, max ${figures.abort_to_record_abandoned_ms.max} ms`,
)
console.log(JSON.stringify(figures))
