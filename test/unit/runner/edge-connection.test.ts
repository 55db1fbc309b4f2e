/**
 * The runner's edge connection against a real WebSocket server (`ws`) speaking the registration part of the
 * protocol, behind a TCP proxy that can black-hole the link (a half-open connection: no FIN, no RST):
 * enrolment (secret stored 0600, sent on every later connection), re-registration with what is held after an
 * abnormal close, a rejected secret (401) retried with backoff, and a silent link detected and replaced.
 */
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs'
import { createServer, type Server, type Socket, connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import WebSocket, { WebSocketServer } from 'ws'
import { ConnectRefusedError, EdgeConnection, rawFraming, sendTunnelFrame, zeroMask } from '../../../runner/connection/edge-connection.ts'
import { SecretStore } from '../../../runner/connection/secret-store.ts'
import { RUNNER_SECRET_HEADER, type RunnerMessageInput } from '../../../src/contract/runner-protocol.ts'
import { decodeRunnerFrame } from '../../../src/contract/tunnel-frames.ts'

const cleanups: (() => Promise<void> | void)[] = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

/** A minimal edge: answers `register` with `registered` (minting a secret on first enrolment). */
async function fakeEdge(options: {
  secret: string
  rejectSecret?: string
  graceMs?: number
  /** Refuse every upgrade with this status and body (the token check's or a proxy's answer). */
  refuse?: { status: number; body: string }
  /** Ask for `secret.kept` with a minted secret (`registered.confirm_secret`), as the edge does now. */
  confirmSecret?: boolean
}) {
  let attempts = 0
  let rejectMissing = false
  const connections: { secret: string | undefined; registers: RunnerMessageInput[] }[] = []
  const wss = new WebSocketServer({
    port: 0,
    host: '127.0.0.1',
    verifyClient: (info, done) => {
      const sent = info.req.headers[RUNNER_SECRET_HEADER] as string | undefined
      attempts++
      if (options.refuse) return done(false, options.refuse.status, options.refuse.body)
      // The runner link's answer (src/durable/runner/runner-link.ts): a secret refusal, retried (a token refusal stops).
      const body = JSON.stringify({
        error: { message: 'runner r1 is enrolled: send its per-runner secret', type: 'runner_hub_error', code: 401 },
      })
      if ((options.rejectSecret && sent === options.rejectSecret) || (rejectMissing && sent === undefined)) done(false, 401, body)
      else done(true)
    },
  })
  await new Promise<void>((resolve) => wss.once('listening', () => resolve()))
  wss.on('connection', (ws, request) => {
    const connection = { secret: request.headers[RUNNER_SECRET_HEADER] as string | undefined, registers: [] as RunnerMessageInput[] }
    connections.push(connection)
    ws.on('message', (data) => {
      const message = JSON.parse(String(data)) as RunnerMessageInput
      if (message.type !== 'register') return
      connection.registers.push(message)
      ws.send(
        JSON.stringify({
          type: 'registered',
          protocol_version: 1,
          runner_id: 'r1',
          heartbeat_interval_ms: 100,
          keep: [],
          drop: [],
          ...(options.graceMs === undefined ? {} : { reconnect_grace_ms: options.graceMs }),
          ...(connection.secret ? {} : { runner_secret: options.secret, ...(options.confirmSecret ? { confirm_secret: true } : {}) }),
        }),
      )
    })
  })
  const address = wss.address()
  const port = typeof address === 'object' && address ? address.port : 0
  cleanups.push(
    () =>
      new Promise<void>((resolve) => {
        for (const client of wss.clients) client.terminate()
        wss.close(() => resolve())
      }),
  )
  return {
    port,
    connections,
    wss,
    attempts: () => attempts,
    /** Refuse (as the runner link does for an enrolled id) an upgrade that sends no secret. */
    rejectMissing: () => {
      rejectMissing = true
    },
  }
}

/** TCP proxy whose live connections can be black-holed (bytes swallowed both ways, nothing closed). */
async function proxy(targetPort: number) {
  const pairs: { client: Socket; upstream: Socket; dead: boolean }[] = []
  const server: Server = createServer((client) => {
    const upstream = connect(targetPort, '127.0.0.1')
    const pair = { client, upstream, dead: false }
    pairs.push(pair)
    client.on('data', (chunk) => {
      if (!pair.dead) upstream.write(chunk)
    })
    upstream.on('data', (chunk) => {
      if (!pair.dead) client.write(chunk)
    })
    const end = () => {
      if (pair.dead) return
      client.destroy()
      upstream.destroy()
    }
    client.on('close', end)
    upstream.on('close', end)
    client.on('error', () => {})
    upstream.on('error', () => {})
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const address = server.address()
  cleanups.push(
    () =>
      new Promise<void>((resolve) => {
        for (const pair of pairs) {
          pair.client.destroy()
          pair.upstream.destroy()
        }
        server.close(() => resolve())
      }),
  )
  return {
    port: typeof address === 'object' && address ? address.port : 0,
    blackhole() {
      for (const pair of pairs) pair.dead = true
    },
  }
}

function connection(
  port: number,
  stateDir: string,
  held: () => { session_id: string; status: 'RUNNING' }[] = () => [],
  backoff = { baseMs: 10, maxMs: 50 },
) {
  const events: { event: string; fields: Record<string, unknown> }[] = []
  const refusals: ConnectRefusedError[] = []
  let registered = 0
  const conn = new EdgeConnection({
    edgeUrl: `http://127.0.0.1:${port}`,
    token: 't',
    runnerId: 'r1',
    secrets: new SecretStore(stateDir, 'r1'),
    register: () => ({
      type: 'register',
      protocol_version: 1,
      runner_id: 'r1',
      capacity: { max_init_workers: 1, max_run_workers: 1, max_postrun_workers: 1 },
      sessions: held(),
    }),
    heartbeat: () => ({ type: 'heartbeat', metrics: {} }),
    onMessage: () => {},
    onRegistered: () => {
      registered++
    },
    onRefused: (error) => refusals.push(error),
    log: (event, fields = {}) => events.push({ event, fields }),
    backoff,
  })
  cleanups.push(() => conn.close('shutdown'))
  return { conn, events, refusals, registeredCount: () => registered }
}

async function until(check: () => boolean, label: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${label}`)
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
}

function stateDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'rollgate-conn-'))
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }))
  return join(dir, 'state')
}

describe('edge connection', () => {
  it('enrols (secret kept 0600), then sends it and what it holds on every reconnect', async () => {
    const edge = await fakeEdge({ secret: 'minted-secret' })
    const dir = stateDir()
    const { conn, registeredCount } = connection(edge.port, dir, () => [{ session_id: 'ses_1', status: 'RUNNING' }])
    conn.start()
    await conn.whenRegistered()
    const file = join(dir, 'r1.secret')
    expect(readFileSync(file, 'utf8').trim()).toBe('minted-secret')
    expect(statSync(file).mode & 0o777).toBe(0o600)
    expect(edge.connections[0]?.secret).toBeUndefined()
    for (const client of edge.wss.clients) client.terminate() // abnormal close: reconnect
    await until(() => registeredCount() === 2, 'second registration')
    expect(edge.connections[1]?.secret).toBe('minted-secret')
    expect(edge.connections[1]?.registers[0]).toMatchObject({ sessions: [{ session_id: 'ses_1', status: 'RUNNING' }] })
  })

  it('confirms a minted secret with secret.kept once it is on disk, when the edge asks (never to an edge that did not)', async () => {
    for (const confirmSecret of [true, false]) {
      const edge = await fakeEdge({ secret: 'minted-secret', confirmSecret })
      const dir = stateDir()
      // What the runner sent after its register, and what its secret file held when each message arrived.
      const after: { type: string; runner_secret?: string; onDisk: string | null }[] = []
      edge.wss.on('connection', (ws) => {
        ws.on('message', (data) => {
          const message = JSON.parse(String(data)) as { type: string; runner_secret?: string }
          if (message.type !== 'register') after.push({ ...message, onDisk: new SecretStore(dir, 'r1').read() })
        })
      })
      const { conn } = connection(edge.port, dir)
      conn.start()
      await conn.whenRegistered()
      // The first heartbeat follows `registered` on the same tick as any secret.kept: waiting for it waits for both.
      await until(() => after.some((message) => message.type === 'heartbeat'), 'first heartbeat')
      const kept = after.filter((message) => message.type === 'secret.kept')
      expect(kept).toEqual(confirmSecret ? [{ type: 'secret.kept', runner_secret: 'minted-secret', onDisk: 'minted-secret' }] : [])
      await conn.close('shutdown')
    }
  })

  it('a link dropped right after enrolment: the secret is on disk before the reconnect presents it (confirms it)', async () => {
    const edge = await fakeEdge({ secret: 'minted-secret' })
    const dir = stateDir()
    const file = join(dir, 'r1.secret')
    // What the file held when each later upgrade arrived: presenting the secret is what confirms it at the edge.
    const onDisk: (string | null)[] = []
    edge.wss.on('headers', () => onDisk.push(new SecretStore(dir, 'r1').read()))
    edge.wss.on('connection', (ws) => {
      ws.on('message', (data) => {
        if (JSON.parse(String(data)).type === 'register' && edge.connections.length === 1) setImmediate(() => ws.terminate())
      })
    })
    const { conn, registeredCount } = connection(edge.port, dir)
    conn.start()
    await until(() => registeredCount() === 2, 'registration after the drop')
    expect(edge.connections[0]?.secret).toBeUndefined()
    expect(edge.connections[1]?.secret).toBe('minted-secret')
    expect(onDisk[1]).toBe('minted-secret')
    expect(readFileSync(file, 'utf8').trim()).toBe('minted-secret')
  })

  it('a rejected secret (401 from the runner link) stops at the first attempt, naming the secret file and the reset', async () => {
    const edge = await fakeEdge({ secret: 'x', rejectSecret: 'stale' })
    const dir = stateDir()
    new SecretStore(dir, 'r1').write('stale')
    const { conn, events, refusals } = connection(edge.port, dir)
    conn.start()
    await until(() => refusals.length > 0, 'refusal')
    const refusal = refusals[0] as ConnectRefusedError
    expect(refusal.status).toBe(401)
    expect(refusal.summary).toMatch(/^the edge rejected the per-runner secret in .*r1\.secret$/)
    expect(refusal.fix).toMatch(/another --runner-id, or an admin can DELETE \/rollout\/runners\/r1\/credential .*restart the runner/)
    expect(events.map((entry) => entry.event)).toEqual(['edge.refused'])
    expect(edge.attempts()).toBe(1)
    expect(edge.connections).toHaveLength(0)
  })

  it('an enrolled id asked for its secret with none held (file lost) stops, naming the missing file, not the token', async () => {
    const edge = await fakeEdge({ secret: 'x' })
    const dir = stateDir()
    const { conn, refusals } = connection(edge.port, dir)
    edge.rejectMissing()
    conn.start()
    await until(() => refusals.length > 0, 'refusal')
    const refusal = refusals[0] as ConnectRefusedError
    expect(refusal.summary).toMatch(/^runner id r1 is enrolled but no per-runner secret is at .*r1\.secret$/)
    expect(refusal.fix).toMatch(/^restore that file .*another --runner-id, or an admin can DELETE \/rollout\/runners\/r1\/credential/)
    expect(`${refusal.summary} ${refusal.fix}`).not.toMatch(/token/i)
    expect(edge.attempts()).toBe(1)
    expect(edge.connections).toHaveLength(0)
  })

  it("an answer that is not an edge's upgrade (404, 200, 302, 400, 426) stops at the first attempt, naming --edge", async () => {
    for (const status of [404, 200, 302, 400, 426]) {
      const edge = await fakeEdge({ secret: 'x', refuse: { status, body: 'not here' } })
      const { conn, events, refusals } = connection(edge.port, stateDir())
      conn.start()
      await until(() => refusals.length > 0, `refusal of ${status}`)
      const refusal = refusals[0] as ConnectRefusedError
      expect(refusal.status).toBe(status)
      expect(refusal.message).toBe(`HTTP ${status}: not here`)
      expect(refusal.summary).toBe(`http://127.0.0.1:${edge.port} is not a Rollgate edge (no WebSocket upgrade at /runners/connect)`)
      expect(refusal.fix).toMatch(/^--edge \/ ROLLGATE_EDGE_URL must be the Rollgate edge's base URL .*not the engine/)
      expect(events.map((entry) => entry.event)).toEqual(['edge.refused'])
      expect(edge.attempts()).toBe(1)
    }
  })

  it('transient answers (5xx, 408, 409, 425, 429) are retried with backoff, never stopped', async () => {
    for (const status of [500, 502, 503, 408, 409, 425, 429]) {
      const edge = await fakeEdge({ secret: 'x', refuse: { status, body: 'later' } })
      const { conn, events, refusals } = connection(edge.port, stateDir())
      conn.start()
      await until(() => edge.attempts() >= 2, `two attempts at ${status}`)
      expect(refusals).toHaveLength(0)
      expect(events.find((entry) => entry.event === 'edge.connect_failed')?.fields.error).toBe(`HTTP ${status}: later`)
      await conn.close('shutdown')
    }
  })

  it('a refused runner token (401 or 403, any body) stops the connection at the first attempt and says why', async () => {
    const tokenCheck = JSON.stringify({ error: { message: 'runner token required', type: 'authentication_error', code: 401 } })
    for (const [status, body, secret] of [
      [401, tokenCheck, undefined],
      [403, 'Forbidden', undefined],
      // A secret was sent, but the refusal is not the runner link's secret check: the token (or a proxy) is wrong.
      [401, tokenCheck, 'held'],
      [401, 'not json', 'held'],
      // A long answer is cut to its first 500 characters in the message.
      [403, `<html>${'x'.repeat(3000)}</html>`, undefined],
    ] as const) {
      const edge = await fakeEdge({ secret: 'x', refuse: { status, body } })
      const dir = stateDir()
      if (secret) new SecretStore(dir, 'r1').write(secret)
      const { conn, events, refusals } = connection(edge.port, dir)
      conn.start()
      await until(() => refusals.length > 0, `refusal of ${status} ${body}`)
      expect(refusals).toHaveLength(1)
      const refusal = refusals[0] as ConnectRefusedError
      expect(refusal).toBeInstanceOf(ConnectRefusedError)
      expect(refusal.name).toBe('ConnectRefusedError')
      expect(refusal.status).toBe(status)
      expect(refusal.message).toBe(`HTTP ${status}: ${body.slice(0, 500)}`)
      expect(events.map((entry) => entry.event)).toEqual(['edge.refused'])
      expect(events[0]?.fields).toEqual({ status, error: refusal.message })
      expect(conn.stats.failedConnects).toBe(1)
      expect(edge.attempts()).toBe(1)
    }
  })

  it('an edge error that is not a refusal (500) is retried', async () => {
    const edge = await fakeEdge({ secret: 'x', refuse: { status: 500, body: 'overloaded' } })
    const { conn, events, refusals } = connection(edge.port, stateDir())
    conn.start()
    await until(() => edge.attempts() >= 3, 'three attempts')
    expect(refusals).toHaveLength(0)
    expect(events.find((entry) => entry.event === 'edge.connect_failed')?.fields.error).toBe('HTTP 500: overloaded')
  })

  it('a silent (half-open) link is declared dead and replaced', async () => {
    const edge = await fakeEdge({ secret: 's' })
    const tcp = await proxy(edge.port)
    const { conn, events, registeredCount } = connection(tcp.port, stateDir())
    conn.start()
    await conn.whenRegistered()
    tcp.blackhole()
    await until(() => events.some((entry) => entry.event === 'edge.silent'), 'silence detected')
    await until(() => registeredCount() === 2, 're-registration over a fresh connection')
    expect(conn.registered).toBe(true)
  })

  it("retries at least every third of the edge's reconnect grace, whatever its own backoff (a live runner never outwaits the grace)", async () => {
    // A backoff of minutes would outlast any grace; the edge's `reconnect_grace_ms` caps it at grace / 3.
    const edge = await fakeEdge({ secret: 's', graceMs: 300 })
    const { conn, registeredCount } = connection(edge.port, stateDir(), () => [], { baseMs: 60_000, maxMs: 600_000 })
    conn.start()
    await conn.whenRegistered()
    for (let round = 2; round <= 4; round++) {
      for (const client of edge.wss.clients) client.terminate()
      await until(() => registeredCount() === round, `registration ${round}`)
    }
    expect(conn.registered).toBe(true)
  })

  it('a binary tunnel frame goes out in two fragments the receiver gets as one message, body intact', async () => {
    const wss = new WebSocketServer({ port: 0, host: '127.0.0.1' })
    await new Promise<void>((resolve) => wss.once('listening', () => resolve()))
    cleanups.push(() => new Promise<void>((resolve) => wss.close(() => resolve())))
    const received: { data: Buffer; binary: boolean }[] = []
    wss.on('connection', (socket) => socket.on('message', (data, binary) => received.push({ data: data as Buffer, binary })))
    const client = new WebSocket(`ws://127.0.0.1:${(wss.address() as { port: number }).port}`)
    await new Promise<void>((resolve) => client.once('open', () => resolve()))
    cleanups.push(() => client.terminate())
    const body = new Uint8Array(70_000).map((_, i) => i % 251)
    sendTunnelFrame(client, { type: 'tunnel.head', request_id: 'a', status: 200, headers: { x: 'y' }, body, more: true })
    sendTunnelFrame(client, { type: 'tunnel.chunk', request_id: 'a', data: new Uint8Array(0), more: false })
    const deadline = Date.now() + 5_000
    while (received.length < 2 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 5))
    expect(received.map((message) => message.binary)).toEqual([true, true])
    const head = decodeRunnerFrame(new Uint8Array(received[0]?.data as Buffer))
    expect(head).toMatchObject({ type: 'tunnel.head', request_id: 'a', status: 200, headers: { x: 'y' }, more: true })
    expect(head.type === 'tunnel.head' && Buffer.from(head.body as Uint8Array).equals(Buffer.from(body))).toBe(true)
    expect(decodeRunnerFrame(new Uint8Array(received[1]?.data as Buffer))).toMatchObject({ type: 'tunnel.chunk', more: false })
  })

  it('a frame whose body continues in more parts goes out as one message, the parts joined in order', async () => {
    const wss = new WebSocketServer({ port: 0, host: '127.0.0.1' })
    await new Promise<void>((resolve) => wss.once('listening', () => resolve()))
    cleanups.push(() => new Promise<void>((resolve) => wss.close(() => resolve())))
    const received: Buffer[] = []
    wss.on('connection', (socket) => socket.on('message', (data) => received.push(data as Buffer)))
    const client = new WebSocket(`ws://127.0.0.1:${(wss.address() as { port: number }).port}`)
    await new Promise<void>((resolve) => client.once('open', () => resolve()))
    cleanups.push(() => client.terminate())
    const parts = [70_000, 0, 3, 65_536].map((size, p) => new Uint8Array(size).map((_, i) => (i * 7 + p) % 251))
    sendTunnelFrame(
      client,
      { type: 'tunnel.head', request_id: 'p', status: 200, headers: {}, body: parts[0] as Uint8Array, more: false },
      parts.slice(1),
    )
    sendTunnelFrame(client, { type: 'tunnel.chunk', request_id: 'q', data: new Uint8Array(0), more: false }, [parts[2] as Uint8Array])
    const deadline = Date.now() + 5_000
    while (received.length < 2 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 5))
    const head = decodeRunnerFrame(new Uint8Array(received[0] as Buffer))
    expect(head).toMatchObject({ type: 'tunnel.head', request_id: 'p', more: false })
    expect(head.type === 'tunnel.head' && Buffer.from(head.body as Uint8Array).equals(Buffer.concat(parts))).toBe(true)
    const chunk = decodeRunnerFrame(new Uint8Array(received[1] as Buffer))
    expect(chunk.type === 'tunnel.chunk' && Buffer.from(chunk.data as Uint8Array).equals(Buffer.from(parts[2] as Uint8Array))).toBe(true)
  })

  it('on a raw-framed (zero-mask) connection, frames of every length encoding arrive whole, in order with ws messages', async () => {
    const wss = new WebSocketServer({ port: 0, host: '127.0.0.1' })
    await new Promise<void>((resolve) => wss.once('listening', () => resolve()))
    cleanups.push(() => new Promise<void>((resolve) => wss.close(() => resolve())))
    const received: { data: Buffer; binary: boolean }[] = []
    wss.on('connection', (socket) => socket.on('message', (data, binary) => received.push({ data: data as Buffer, binary })))
    const client = new WebSocket(`ws://127.0.0.1:${(wss.address() as { port: number }).port}`, {
      perMessageDeflate: false,
      generateMask: zeroMask,
    })
    rawFraming(client)
    await new Promise<void>((resolve) => client.once('open', () => resolve()))
    cleanups.push(() => client.terminate())
    // Payloads (header included) under 126 bytes, under 64 KiB and above: the three length encodings.
    const sizes = [0, 10, 1_000, 65_400, 70_000]
    const bodies = sizes.map((size, p) => new Uint8Array(size).map((_, i) => (i * 13 + p) % 251))
    for (const [i, body] of bodies.entries()) {
      sendTunnelFrame(
        client,
        { type: 'tunnel.head', request_id: `r${i}`, status: 200, headers: {}, body: body.subarray(0, 5), more: true },
        [body.subarray(5)],
      )
      client.send(JSON.stringify({ after: i }))
    }
    const deadline = Date.now() + 5_000
    while (received.length < 2 * sizes.length && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 5))
    expect(received.map((message) => message.binary)).toEqual(sizes.flatMap(() => [true, false]))
    for (const [i, body] of bodies.entries()) {
      const frame = decodeRunnerFrame(new Uint8Array((received[2 * i] as { data: Buffer }).data))
      expect(frame).toMatchObject({ type: 'tunnel.head', request_id: `r${i}`, status: 200, more: true })
      expect(frame.type === 'tunnel.head' && Buffer.from(frame.body as Uint8Array).equals(Buffer.from(body))).toBe(true)
      expect(JSON.parse(String((received[2 * i + 1] as { data: Buffer }).data))).toEqual({ after: i })
    }
  })
})
