/**
 * @module
 * `npm run bench:gateway-cold`: what the first call after the session object was evicted costs, against
 * the calls of a warm object, in one run. workerd drops an object left idle (an agent thinking for a while);
 * its next record must find its delta bases again. Here the eviction is forced
 * (`MiniflareEdge.evictObject`, Miniflare's `unsafeEvictDurableObject`: the next call constructs a new
 * instance over the same SQLite), so a run needs no idle waits.
 *
 * Per size: one session is filled with `--depth` calls of the same chat body (a chain as deep as a
 * `bench:gateway` session's), then `--rounds` rounds of: evict, one cold call, `--warm` warm calls.
 * Reported: the medians (and max) of the cold and the warm calls' `capture` phase (the edge's
 * `server-timing`: the record call to the session object, commit included) and of their whole latency;
 * and the filling calls' capture (p50, p99).
 *
 * `--agents 2`: the session's calls alternate between a main agent and a sub-agent (another system prompt,
 * header `x-rollgate-agent: sub`), each extending its own chain; `--pressure N`: N other sessions, filled
 * alike, and one call to one of them (in turn) before every measured call, so the isolate's delta-base budget
 * (`src/durable/session/base-cache-budget.ts`) is under pressure. The warm calls are then also reported by
 * agent: a warm call whose agent's base had been evicted walks its chain back, as a cold call does.
 *
 * Last line: one JSON object.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from '../scripts/lib/cli-args.ts'
import { startMiniflareEdge } from '../scripts/lib/miniflare-edge.ts'
import { chatBody } from './lib/chat-bodies.ts'
import { runLoad, type Sample } from './lib/load.ts'
import { startStub } from './lib/start-stub.ts'
import { median, percentile } from './lib/stats.ts'

const ADMIN_TOKEN = 'bench-admin-token'
const SIZES = [
  { name: '2KB', bytes: 2 * 1024 },
  { name: '54KB', bytes: 54 * 1024 },
  { name: '524KB', bytes: 524 * 1024 },
]

const { values } = parseArgs({
  options: {
    sizes: { type: 'string', default: '54KB,524KB' },
    /** Calls recorded before the first eviction (the chain a cold object finds). */
    depth: { type: 'string', default: '400' },
    rounds: { type: 'string', default: '15' },
    /** Warm calls after each cold one. */
    warm: { type: 'string', default: '5' },
    'persist-dir': { type: 'string', default: tmpdir() },
    /** A prebuilt edge bundle (`npx wrangler deploy --dry-run --outdir DIR`): before/after runs. */
    'edge-bundle': { type: 'string' },
    'max-seconds': { type: 'string', default: '600' },
    /** 2: a main agent and a sub-agent take turns in the measured session. */
    agents: { type: 'string', default: '1' },
    /** Other sessions, one call to one of them before every measured call (isolate memory pressure). */
    pressure: { type: 'string', default: '0' },
  },
})
const AGENTS = Math.max(1, Math.min(2, Number(values.agents)))
const PRESSURE = Math.max(0, Number(values.pressure))

const r3 = (n: number) => Math.round(n * 1000) / 1000
const phaseMs = (sample: Sample, phase: string): number => {
  const match = sample.serverTiming?.match(new RegExp(`${phase};dur=([\\d.]+)`))
  if (!match) throw new Error(`no ${phase} in server-timing: ${sample.serverTiming}`)
  return Number(match[1])
}
const summary = (samples: Sample[]) => ({
  calls: samples.length,
  prepare_p50_ms: r3(median(samples.map((sample) => phaseMs(sample, 'prepare')))),
  capture_p50_ms: r3(median(samples.map((sample) => phaseMs(sample, 'capture')))),
  capture_max_ms: r3(Math.max(...samples.map((sample) => phaseMs(sample, 'capture')))),
  total_p50_ms: r3(median(samples.map((sample) => sample.ms))),
  total_max_ms: r3(Math.max(...samples.map((sample) => sample.ms))),
})

const stub = await startStub()
const persistTo = mkdtempSync(join(values['persist-dir'] ?? tmpdir(), 'rollgate-bench-'))
const edge = await startMiniflareEdge({
  persistTo,
  ...(values['edge-bundle'] ? { scriptPath: values['edge-bundle'] } : {}),
  vars: { ROLLGATE_ADMIN_TOKEN: ADMIN_TOKEN, ROLLGATE_SIGNING_KEY: 'bench-signing-key' },
  onLog: (level, message) => {
    if (level === 'warn' || level === 'error') console.error(message)
  },
})
const loadStart = loadavg()[0] as number
const deadline = Date.now() + Number(values['max-seconds']) * 1000
const perSize: Record<string, unknown> = {}
try {
  for (const size of SIZES.filter((size) => (values.sizes ?? '').split(',').includes(size.name))) {
    const createSession = async () => {
      const created = await fetch(`${edge.url}/v1/sessions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ upstream: { url: stub.url, kind: 'vllm', served_model: 'Qwen/Qwen3-8B' } }),
      })
      if (created.status !== 201) throw new Error(`session create failed: ${created.status} ${await created.text()}`)
      return (await created.json()) as { token: string; session_id: string }
    }
    const session = await createSession()
    const others = await Promise.all(Array.from({ length: PRESSURE }, createSession))
    const chat = chatBody(size.bytes)
    const bodies = [
      Buffer.from(JSON.stringify(chat)),
      // The sub-agent's own conversation: another system prompt, so its prompts never extend the main agent's.
      Buffer.from(
        JSON.stringify({
          ...chat,
          messages: [
            { role: 'system', content: 'You are a sub-agent: search the repository and report.' },
            ...(chat.messages as unknown[]).slice(1),
          ],
        }),
      ),
    ]
    let sent = 0
    let pressed = 0
    const byAgent: Sample[][] = [[], []]
    /** One call of the measured session (the next agent's turn), after one call to a pressure session. */
    const one = async (): Promise<Sample> => {
      if (others.length > 0) {
        const other = others[pressed++ % others.length] as { token: string }
        const load = await runLoad(
          () => ({
            url: `${edge.url}/v1/chat/completions`,
            headers: { authorization: `Bearer ${other.token}` },
            body: bodies[0] as Buffer,
          }),
          { concurrency: 1, count: 1, maxMs: Math.max(1, deadline - Date.now()) },
        )
        if (load.errors > 0) throw new Error('a pressure call failed')
      }
      const agent = sent++ % AGENTS
      const samples: Sample[] = []
      const headers: Record<string, string> = {
        authorization: `Bearer ${session.token}`,
        ...(agent === 1 ? { 'x-rollgate-agent': 'sub' } : {}),
      }
      const load = await runLoad(() => ({ url: `${edge.url}/v1/chat/completions`, headers, body: bodies[agent] as Buffer }), {
        concurrency: 1,
        count: 1,
        maxMs: Math.max(1, deadline - Date.now()),
        samples,
      })
      if (load.errors > 0 || samples.length !== 1) throw new Error(`a call of agent ${agent} failed`)
      return samples[0] as Sample
    }
    const calls = async (count: number, record?: boolean): Promise<Sample[]> => {
      if (AGENTS === 1 && PRESSURE === 0) {
        const samples: Sample[] = []
        const target = () => ({
          url: `${edge.url}/v1/chat/completions`,
          headers: { authorization: `Bearer ${session.token}` },
          body: bodies[0] as Buffer,
        })
        const load = await runLoad(target, { concurrency: 1, count, maxMs: Math.max(1, deadline - Date.now()), samples })
        if (load.errors > 0) throw new Error(`${load.errors} of ${load.requests} calls failed`)
        return samples
      }
      const samples: Sample[] = []
      for (let i = 0; i < count && Date.now() < deadline; i++) {
        const agent = sent % AGENTS
        const sample = await one()
        samples.push(sample)
        if (record) byAgent[agent]?.push(sample)
      }
      return samples
    }
    const fill = await calls(Number(values.depth))
    const cold: Sample[] = []
    const warm: Sample[] = []
    for (let round = 0; round < Number(values.rounds) && Date.now() < deadline; round++) {
      await edge.evictObject('SessionObject', session.session_id)
      cold.push(...(await calls(1)))
      // The other agent's first call after the wake walks its own chain back (cold for it): not counted.
      if (AGENTS > 1) await calls(AGENTS - 1)
      warm.push(...(await calls(Number(values.warm), true)))
    }
    const figures = {
      agents: AGENTS,
      pressure_sessions: PRESSURE,
      ...(AGENTS > 1 || PRESSURE > 0
        ? {
            warm_by_agent: byAgent.slice(0, AGENTS).map((samples, agent) => ({
              agent: agent === 0 ? 'main' : 'sub',
              ...summary(samples),
              capture_p99_ms: r3(
                percentile(
                  samples.map((sample) => phaseMs(sample, 'capture')),
                  99,
                ),
              ),
            })),
          }
        : {}),
      depth: Number(values.depth),
      cold: summary(cold),
      warm: summary(warm),
      // The warm calls by their place after the cold one (1: the call right after it): a slow step some calls
      // after a wake (a collection of what the wake allocated, say) shows up here.
      warm_by_place: Array.from({ length: Number(values.warm) }, (_, place) => {
        const at = warm.filter((_, i) => i % Number(values.warm) === place)
        return { place: place + 1, prepare_max_ms: r3(Math.max(...at.map((sample) => phaseMs(sample, 'prepare')))), ...summary(at) }
      }),
      fill_calls: {
        ...summary(fill),
        capture_p99_ms: r3(
          percentile(
            fill.map((sample) => phaseMs(sample, 'capture')),
            99,
          ),
        ),
      },
    }
    const ratio = figures.cold.capture_p50_ms / Math.max(0.001, figures.warm.capture_p50_ms)
    perSize[size.name] = { ...figures, cold_over_warm_capture_p50: Math.round(ratio * 100) / 100 }
    console.log(`${size.name.padEnd(6)} ${JSON.stringify(perSize[size.name])}`)
  }
} finally {
  await edge.stop()
  await stub.stop()
  rmSync(persistTo, { recursive: true, force: true })
}
console.log(
  JSON.stringify({
    bench: 'gateway-cold',
    note: 'capture ms (server-timing) of the first call after the session object was evicted vs warm calls, same run',
    load_average: { start: Math.round(loadStart * 100) / 100, end: Math.round((loadavg()[0] as number) * 100) / 100 },
    sizes: perSize,
  }),
)
