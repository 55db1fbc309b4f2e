/**
 * @module
 * The runner's operator endpoint on loopback (`--status-port`, 0 = any free port), routed with itty-router:
 * - `GET /health`   → `{ok, runner_id, connected, draining, held}` (503 while not registered with the edge)
 * - `GET /metrics`  → Prometheus text: sessions per stage, slots in use / capacity per pool, finished sessions
 *                     by outcome, tunnel requests, edge connects
 * - `GET /sessions` → every session held, with its stage
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import { AutoRouter, json, text } from 'itty-router'
import type { RunnerAgent } from '../agent.ts'

export interface StatusServer {
  server: Server
  port: number
  url: string
  close(): Promise<void>
}

/** Prometheus exposition of the agent's state. */
export function prometheus(agent: RunnerAgent): string {
  const { pipeline, tunnel, connection } = agent
  const metrics = pipeline.metrics()
  const id = agent.options.runnerId.replace(/["\\\n]/g, '_')
  const lines: string[] = []
  const gauge = (name: string, help: string, rows: [Record<string, string>, number][], type = 'gauge') => {
    lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`)
    for (const [labels, value] of rows) {
      const all = { runner_id: id, ...labels }
      lines.push(
        `${name}{${Object.entries(all)
          .map(([key, val]) => `${key}="${val}"`)
          .join(',')}} ${value}`,
      )
    }
  }
  gauge('rollgate_runner_sessions', 'Sessions held per stage.', [
    [{ stage: 'init_queue' }, metrics.init_queue_depth],
    [{ stage: 'init' }, metrics.init_inflight],
    [{ stage: 'ready' }, metrics.ready_depth],
    [{ stage: 'running' }, metrics.run_inflight],
    [{ stage: 'postrun_queue' }, metrics.postrun_queue_depth],
    [{ stage: 'postrun' }, metrics.postrun_inflight],
  ])
  gauge(
    'rollgate_runner_slots_in_use',
    'Slots in use per stage pool.',
    [pipeline.init, pipeline.run, pipeline.postrun].map((pool) => [{ pool: pool.name }, pool.inUse]),
  )
  gauge('rollgate_runner_slots_capacity', 'Slots per stage pool (ready: the READY buffer).', [
    ...[pipeline.init, pipeline.run, pipeline.postrun].map((pool): [Record<string, string>, number] => [
      { pool: pool.name },
      pool.capacity,
    ]),
    [{ pool: 'ready' }, pipeline.readyBuffer],
  ])
  gauge(
    'rollgate_runner_sessions_finished_total',
    'Sessions ended, by outcome.',
    (['completed', 'failed', 'timeout', 'cancelled'] as const).map((outcome) => [{ outcome }, pipeline.counters[outcome]]),
    'counter',
  )
  gauge('rollgate_runner_unreported_sessions', 'Finished sessions whose result waits for the edge link.', [[{}, agent.unreported]])
  gauge('rollgate_runner_tunnel_requests_total', 'Tunnelled engine requests served.', [[{}, tunnel.stats.requests]], 'counter')
  gauge('rollgate_runner_tunnel_errors_total', 'Tunnelled engine requests that failed.', [[{}, tunnel.stats.errors]], 'counter')
  gauge('rollgate_runner_tunnel_inflight', 'Tunnelled engine requests in flight.', [[{}, tunnel.inflight]])
  gauge('rollgate_runner_edge_connected', '1 while registered with the edge.', [[{}, connection.registered ? 1 : 0]])
  gauge('rollgate_runner_edge_connects_total', 'Successful edge connections.', [[{}, connection.stats.connects]], 'counter')
  gauge('rollgate_runner_draining', '1 while draining.', [[{}, agent.draining ? 1 : 0]])
  return `${lines.join('\n')}\n`
}

export function statusRouter(agent: RunnerAgent) {
  const router = AutoRouter()
  router.get('/health', () => {
    const body = {
      ok: agent.connection.registered,
      runner_id: agent.options.runnerId,
      connected: agent.connection.registered,
      draining: agent.draining,
      held: agent.pipeline.size,
      model: agent.model,
      uptime_s: Math.round((Date.now() - agent.startedAt) / 1000),
    }
    return json(body, { status: body.ok ? 200 : 503 })
  })
  router.get('/metrics', () => text(prometheus(agent), { headers: { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' } }))
  router.get('/sessions', () =>
    json({
      sessions: agent.pipeline.held().map((entry) => ({ ...entry, stage: agent.pipeline.stageOf(entry.session_id) })),
      unreported: agent.unreported,
      metrics: agent.pipeline.metrics(),
    }),
  )
  return router
}

async function toRequest(request: IncomingMessage, origin: string): Promise<Request> {
  return new Request(new URL(request.url ?? '/', origin), {
    method: request.method ?? 'GET',
    headers: request.headers as Record<string, string>,
  })
}

export async function startStatusServer(agent: RunnerAgent, port: number, host = '127.0.0.1'): Promise<StatusServer> {
  const router = statusRouter(agent)
  const server = createServer((request: IncomingMessage, response: ServerResponse) => {
    void (async () => {
      try {
        const answer: Response = await router.fetch(await toRequest(request, `http://${host}`))
        const headers: Record<string, string> = {}
        answer.headers.forEach((value, key) => {
          headers[key] = value
        })
        response.writeHead(answer.status, headers)
        response.end(Buffer.from(await answer.arrayBuffer()))
      } catch (error) {
        response.writeHead(500, { 'content-type': 'application/json' })
        response.end(JSON.stringify({ error: { message: (error as Error).message } }))
      }
    })()
  })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, host, () => resolve())
  })
  const address = server.address()
  const bound = typeof address === 'object' && address ? address.port : port
  return {
    server,
    port: bound,
    url: `http://${host}:${bound}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  }
}
