/**
 * @module
 * `npm run bench:tunnel-runner`: the runner's CPU per tunnelled call, without the edge. This process plays
 * the edge (a `ws` server speaking the tunnel protocol with `tunnel.binary` + `tunnel.credit`), the runners
 * are the scripted runner processes of `bench:tunnel` (`lib/tunnel-runner.ts`: the real runner's
 * `TunnelClient` behind a `ws` client), the engine is the canned vLLM-shaped stub in its own process. Each
 * round sends `--count` chat calls of `--size` bytes at `--concurrency` through each runner in turn, and
 * counts the runner process's CPU (every thread, scheduler nanoseconds: user + kernel) per call.
 *
 * `--runner-b DIR` (another checkout of this repo, with its `node_modules` resolvable) adds a second runner
 * running that checkout's runner code: two runner builds alternating round by round against the same
 * engine and load, so their CPU per call compares within one run (`b_over_a`). Bounded in count and time.
 * On a busy machine the figure swings by a third from round to round (how many calls one wake-up of the
 * runner handles changes its cost per call); `bench:tunnel --runner-b` is the steadier A/B.
 * Last line: one JSON object.
 */
import { loadavg } from 'node:os'
import { resolve } from 'node:path'
import { type WebSocket, WebSocketServer } from 'ws'
import { RUNNER_PROTOCOL_VERSION, TUNNEL_CAPABILITY, TUNNEL_WINDOW_BYTES } from '../src/contract/runner-protocol.ts'
import { decodeRunnerFrame, encodeTunnelFrame } from '../src/contract/tunnel-frames.ts'
import { parseArgs } from '../scripts/lib/cli-args.ts'
import { chatBody } from './lib/chat-bodies.ts'
import { cpuMs } from './lib/proc-stats.ts'
import { startStub } from './lib/start-stub.ts'
import { startTunnelRunner, type TunnelRunner } from './lib/tunnel-runner.ts'
import { median } from './lib/stats.ts'

const { values } = parseArgs({
  options: {
    size: { type: 'string', default: '55296' },
    concurrency: { type: 'string', default: '32' },
    count: { type: 'string', default: '1000' },
    rounds: { type: 'string', default: '5' },
    'max-seconds': { type: 'string', default: '300' },
    'runner-b': { type: 'string' },
  },
})

const round3 = (n: number) => Math.round(n * 1000) / 1000

/** One runner's socket as this fake edge sees it: calls in flight, answered by request id. */
class Link {
  readonly #ws: WebSocket
  readonly #waiting = new Map<string, { resolve(status: number): void; bytes: number }>()
  #next = 0

  constructor(ws: WebSocket) {
    this.#ws = ws
    ws.on('message', (data, isBinary) => {
      if (!isBinary) return
      const frame = decodeRunnerFrame(data as Buffer)
      const call = this.#waiting.get(frame.request_id)
      if (!call) return
      const payload = frame.type === 'tunnel.head' ? frame.body : frame.data
      call.bytes += typeof payload === 'string' ? payload.length : payload.byteLength
      if (frame.more) {
        // Credit back at once: the reader here takes everything.
        const bytes = typeof payload === 'string' ? payload.length : payload.byteLength
        ws.send(JSON.stringify({ type: 'tunnel.credit', request_id: frame.request_id, bytes }))
        return
      }
      this.#waiting.delete(frame.request_id)
      call.resolve(frame.type === 'tunnel.head' ? frame.status : 200)
    })
  }

  call(body: Uint8Array): Promise<number> {
    const requestId = `r${this.#next++}`
    return new Promise((resolveCall) => {
      this.#waiting.set(requestId, { resolve: resolveCall, bytes: 0 })
      this.#ws.send(
        encodeTunnelFrame({
          type: 'tunnel.request',
          request_id: requestId,
          method: 'POST',
          path: '/v1/chat/completions',
          headers: { 'content-type': 'application/json', accept: 'application/json' },
          body,
          more: false,
          timeout_ms: 60_000,
        }),
      )
    })
  }
}

const stub = await startStub()
const server = new WebSocketServer({ host: '127.0.0.1', port: 0, perMessageDeflate: false, maxPayload: 64 * 1024 * 1024 })
const links = new Map<string, Link>()
const connected = new Map<string, () => void>()
server.on('connection', (ws, request) => {
  const runnerId = new URL(request.url ?? '/', 'http://edge').searchParams.get('runner_id') ?? ''
  ws.once('message', () => {
    // The `register`: answer with the features a current edge accepts.
    ws.send(
      JSON.stringify({
        type: 'registered',
        protocol_version: RUNNER_PROTOCOL_VERSION,
        runner_id: runnerId,
        heartbeat_interval_ms: 60_000,
        keep: [],
        drop: [],
        capabilities: [TUNNEL_CAPABILITY.binary, TUNNEL_CAPABILITY.credit],
        tunnel_window_bytes: TUNNEL_WINDOW_BYTES,
      }),
    )
    links.set(runnerId, new Link(ws))
    connected.get(runnerId)?.()
  })
})
await new Promise<void>((resolveListen) => server.once('listening', () => resolveListen()))
const address = server.address()
const edgeUrl = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`

const runners: { name: string; runner: TunnelRunner; link: Link }[] = []
const figures: Record<string, unknown> = { bench: 'tunnel-runner-cpu', loadavg_start: loadavg() }
try {
  const base = { edgeUrl, token: 'bench', engineUrl: stub.url, reconnect: false, tunnel: 'credit' as const, deflate: false }
  const builds: [string, string | undefined][] = [['a', undefined]]
  if (values['runner-b']) builds.push(['b', resolve(values['runner-b'], 'bench/lib/tunnel-runner.ts')])
  for (const [name, script] of builds) {
    const runnerId = `cpu-runner-${name}`
    const up = new Promise<void>((resolveUp) => connected.set(runnerId, resolveUp))
    const runner = await startTunnelRunner({ ...base, runnerId }, script)
    await up
    runners.push({ name, runner, link: links.get(runnerId) as Link })
  }
  const body = Buffer.from(JSON.stringify(chatBody(Number(values.size))))
  const concurrency = Number(values.concurrency)
  const count = Number(values.count)
  const rounds = Number(values.rounds)
  const deadline = performance.now() + Number(values['max-seconds']) * 1000
  const perCall: Record<string, number[]> = Object.fromEntries(runners.map(({ name }) => [name, []]))
  const throughput: Record<string, number[]> = Object.fromEntries(runners.map(({ name }) => [name, []]))
  let errors = 0
  const load = async (link: Link, calls: number) => {
    let issued = 0
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (issued < calls && performance.now() < deadline) {
          issued++
          if ((await link.call(body)) !== 200) errors++
        }
      }),
    )
    return issued
  }
  for (const { link } of runners) await load(link, Math.min(count, 1000)) // warm: JIT, sockets
  for (let r = 0; r < rounds && performance.now() < deadline; r++) {
    const order = r % 2 ? [...runners].reverse() : runners
    for (const { name, runner, link } of order) {
      const c0 = cpuMs([runner.pid])
      const t0 = performance.now()
      const done = await load(link, count)
      const seconds = (performance.now() - t0) / 1000
      if (done < count) break // out of time: a partial round would not compare
      perCall[name]?.push((cpuMs([runner.pid]) - c0) / done)
      throughput[name]?.push(done / seconds)
    }
  }
  const summary = Object.fromEntries(
    runners.map(({ name }) => [
      name,
      {
        runner_cpu_ms_per_call: round3(median(perCall[name] ?? [])),
        rounds: (perCall[name] ?? []).map(round3),
        calls_per_s: Math.round(median(throughput[name] ?? [])),
      },
    ]),
  )
  Object.assign(figures, { body_bytes: body.length, concurrency, count, errors, ...summary })
  for (const [name, s] of Object.entries(summary)) {
    console.log(`runner ${name}: ${s.runner_cpu_ms_per_call} CPU ms/call (rounds ${s.rounds.join(' ')}), ${s.calls_per_s} calls/s`)
  }
  if (summary.b) {
    figures.b_over_a = round3((summary.b.runner_cpu_ms_per_call as number) / (summary.a?.runner_cpu_ms_per_call as number))
    console.log(`b ÷ a: ${figures.b_over_a}`)
  }
  figures.loadavg_end = loadavg()
} finally {
  for (const { runner } of runners) await runner.shutdown().catch(() => {})
  server.close()
  for (const client of server.clients) client.terminate()
  await stub.stop()
}
console.log(JSON.stringify(figures))
