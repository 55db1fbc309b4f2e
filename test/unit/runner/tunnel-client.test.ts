/**
 * The runner's tunnel client against a real local HTTP server standing in for the engine: large bodies split
 * into frames and reassembled exactly, SSE forwarded as it arrives, cancellation reaching the engine,
 * backpressure (no engine reads while the link is saturated), bounded request bodies, no upstream; and with
 * `tunnel.binary` + `tunnel.credit` negotiated: an answer never more than one window ahead of the edge's
 * credit (a stalled reader holds only its own request), request bodies streamed into the engine call with
 * credit granted as the engine reads, cancellation releasing a stalled request, an overrunning edge refused.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import { afterEach, describe, expect, it } from 'vitest'
import { type RunnerMessageInput, TUNNEL_CHUNK_CHARS } from '../../../src/contract/runner-protocol.ts'
import { TunnelClient, type TunnelFeatures } from '../../../runner/connection/tunnel-client.ts'
import type { RunnerBodyFrame } from '../../../src/contract/tunnel-frames.ts'

type Frame = RunnerBodyFrame | Extract<RunnerMessageInput, { type: 'tunnel.error' | 'tunnel.credit' }>

const WINDOW = 64 * 1024
const CREDIT: TunnelFeatures = { binary: true, credit: true, windowBytes: WINDOW }

let server: Server | null = null

async function engine(handler: (request: IncomingMessage, response: ServerResponse) => void): Promise<string> {
  server = createServer(handler)
  await new Promise<void>((resolve) => server?.listen(0, '127.0.0.1', resolve))
  const address = server.address()
  return `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`
}

afterEach(async () => {
  server?.closeAllConnections()
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()))
  server = null
})

function port(gate: { open: boolean } = { open: true }, features: TunnelFeatures | null = null) {
  const frames: Frame[] = []
  const waiters: (() => void)[] = []
  const stats = { flushedWhileClosed: 0 }
  return {
    frames,
    stats,
    gate,
    release() {
      gate.open = true
      for (const wake of waiters.splice(0)) wake()
    },
    features: () => features,
    send(message: RunnerMessageInput | RunnerBodyFrame) {
      frames.push(message as Frame)
      for (const wake of waiters.splice(0)) wake()
      return true
    },
    flushed(): Promise<void> {
      if (!gate.open) stats.flushedWhileClosed++
      return gate.open ? Promise.resolve() : new Promise((resolve) => waiters.push(() => (gate.open ? resolve() : undefined)))
    },
    async until(check: () => boolean, timeoutMs = 5_000) {
      const deadline = Date.now() + timeoutMs
      while (!check()) {
        if (Date.now() > deadline) throw new Error(`timed out; frames: ${frames.map((f) => f.type).join(',')}`)
        await new Promise((resolve) => setTimeout(resolve, 5))
      }
    },
  }
}

/** Body bytes sent for a request. */
function sentBytes(frames: Frame[], requestId: string): number {
  return frames
    .filter((frame) => frame.request_id === requestId)
    .reduce(
      (sum, frame) =>
        sum + (frame.type === 'tunnel.head' ? (frame.body?.length ?? 0) : frame.type === 'tunnel.chunk' ? frame.data.length : 0),
      0,
    )
}

const finished = (frames: Frame[], requestId: string) =>
  frames.some((frame) => frame.request_id === requestId && (frame.type === 'tunnel.error' || ('more' in frame && frame.more === false)))

function body(frames: Frame[], requestId: string): string {
  return frames
    .filter((frame) => frame.request_id === requestId)
    .map((frame) => {
      const payload = frame.type === 'tunnel.head' ? (frame.body ?? '') : frame.type === 'tunnel.chunk' ? frame.data : ''
      return typeof payload === 'string' ? payload : Buffer.from(payload).toString('latin1')
    })
    .join('')
}

const request = (id: string, extra: Partial<{ body: string; more: boolean; path: string }> = {}) => ({
  type: 'tunnel.request' as const,
  request_id: id,
  method: 'POST',
  path: extra.path ?? '/v1/chat/completions',
  headers: { 'content-type': 'application/json' },
  body: extra.body ?? '{}',
  more: extra.more ?? false,
  timeout_ms: 10_000,
})

describe('tunnel client', () => {
  it('forwards a request body sent in frames and returns a large answer split into frames, reassembled exactly', async () => {
    const big = `{"text":"${'é'.repeat(TUNNEL_CHUNK_CHARS * 2 + 17)}"}`
    let received = ''
    const url = await engine((req, res) => {
      req.on('data', (chunk: Buffer) => {
        received += chunk.toString()
      })
      req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end(big))
    })
    const link = port()
    const client = new TunnelClient({ upstreamUrl: url, port: link })
    client.onMessage(request('r1', { body: '{"a":', more: true }))
    client.onMessage({ type: 'tunnel.body', request_id: 'r1', data: '1}', more: false })
    await link.until(() => link.frames.some((frame) => 'more' in frame && frame.more === false))
    expect(received).toBe('{"a":1}')
    expect(link.frames[0]).toMatchObject({ type: 'tunnel.head', status: 200 })
    expect(link.frames.length).toBeGreaterThanOrEqual(3)
    for (const frame of link.frames) if (frame.type === 'tunnel.chunk') expect(frame.data.length).toBeLessThanOrEqual(TUNNEL_CHUNK_CHARS)
    expect(body(link.frames, 'r1')).toBe(big)
  })

  it('binary: an answer that arrived in several reads goes out as one frame of its parts, not joined, and spends its credit', async () => {
    const answer = Buffer.alloc(200_000).map((_, i) => 97 + (i % 26)) // > one socket read, < one frame
    const url = await engine((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(answer))
    const link = port({ open: true }, { binary: true, credit: true, windowBytes: 1024 * 1024 })
    const sentParts: { frame: RunnerBodyFrame; rest: readonly Uint8Array[] }[] = []
    const client = new TunnelClient({
      upstreamUrl: url,
      port: {
        ...link,
        sendParts(frame, rest) {
          sentParts.push({ frame, rest })
          return link.send(frame)
        },
      },
    })
    client.onMessage({ ...request('p1'), body: new Uint8Array(Buffer.from('{}')) })
    await link.until(() => sentParts.length > 0 || finished(link.frames, 'p1'))
    expect(link.frames).toHaveLength(1)
    const [{ frame, rest }] = sentParts as [{ frame: RunnerBodyFrame; rest: readonly Uint8Array[] }]
    expect(frame).toMatchObject({ type: 'tunnel.head', request_id: 'p1', status: 200, more: false })
    expect(rest.length).toBeGreaterThan(0)
    const joined = Buffer.concat([frame.type === 'tunnel.head' ? (frame.body as Uint8Array) : new Uint8Array(0), ...rest])
    expect(joined.equals(answer)).toBe(true)
    expect(client.stats.maxUnackedBytes).toBe(answer.length)
  })

  it('forwards SSE as it arrives, and a cancel reaches the engine', async () => {
    let engineSawClose = false
    const url = await engine((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' })
      res.write('data: one\n\n')
      res.on('close', () => {
        engineSawClose = true
      })
    })
    const link = port()
    const client = new TunnelClient({ upstreamUrl: url, port: link })
    client.onMessage(request('s1'))
    await link.until(() => body(link.frames, 's1').includes('data: one'))
    expect(link.frames.at(-1)).toMatchObject({ more: true })
    client.onMessage({ type: 'tunnel.cancel', request_id: 's1', reason: 'client gone' })
    await link.until(() => engineSawClose)
    const count = link.frames.length
    await new Promise((resolve) => setTimeout(resolve, 50))
    expect(link.frames.length).toBe(count)
    expect(client.inflight).toBe(0)
  })

  it('backpressure: while the link is saturated, the engine stream is not read further', async () => {
    let written = 0
    let engineBlocked = false
    const url = await engine((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' })
      const line = `data: ${'x'.repeat(16 * 1024)}\n\n`
      const pump = () => {
        while (written < 2_000) {
          written++
          if (!res.write(line)) {
            engineBlocked = true
            res.once('drain', pump)
            return
          }
        }
        res.end()
      }
      pump()
    })
    const link = port({ open: false })
    const client = new TunnelClient({ upstreamUrl: url, port: link })
    client.onMessage(request('b1'))
    await link.until(() => engineBlocked && link.stats.flushedWhileClosed > 0)
    // An absence can only be checked over a window: give a client without backpressure time to read on.
    await new Promise((resolve) => setTimeout(resolve, 300))
    // The engine is held back by TCP: far fewer than 2,000 events were written, and at most one read was forwarded.
    expect(written).toBeLessThan(2_000)
    expect(link.frames.length).toBeLessThanOrEqual(1)
    link.release()
    await link.until(() => link.frames.some((frame) => 'more' in frame && frame.more === false), 20_000)
    expect(body(link.frames, 'b1').split('data: ').length - 1).toBe(2_000)
  })

  it('refuses an oversized request body and answers tunnel.error without an upstream', async () => {
    const link = port()
    const bounded = new TunnelClient({ upstreamUrl: 'http://127.0.0.1:9', port: link, maxBodyChars: 10 })
    bounded.onMessage(request('big', { body: '{"x":"0123456789"}', more: true }))
    expect(link.frames).toEqual([{ type: 'tunnel.error', request_id: 'big', message: 'request body too large for this runner' }])
    bounded.onMessage({ type: 'tunnel.body', request_id: 'big', data: '', more: false })
    expect(link.frames).toHaveLength(1)
    const none = new TunnelClient({ upstreamUrl: null, port: link })
    none.onMessage(request('n1'))
    await link.until(() => link.frames.length === 2)
    expect(link.frames[1]).toMatchObject({ type: 'tunnel.error', request_id: 'n1' })
  })

  it('credit: a stalled reader holds its answer to one window, other requests flow, a cancel releases it', async () => {
    const total = 16 * WINDOW
    let bigClosed = 0
    const url = await engine((req, res) => {
      if (req.url === '/small') {
        res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}')
        return
      }
      res.on('close', () => bigClosed++)
      res.writeHead(200, { 'content-type': 'application/octet-stream' })
      res.end(Buffer.alloc(total, 'a'))
    })
    const link = port({ open: true }, CREDIT)
    const client = new TunnelClient({ upstreamUrl: url, port: link })
    const binary = (id: string, path: string) => ({ ...request(id, { path }), body: new Uint8Array(Buffer.from('{}')) })
    client.onMessage(binary('big', '/big'))
    // No credit comes back: the client stops at one window and waits.
    await link.until(() => sentBytes(link.frames, 'big') === WINDOW && client.stats.creditWaits > 0)
    expect(link.frames.every((frame) => frame.type !== 'tunnel.head' || frame.body instanceof Uint8Array)).toBe(true)
    // Another request on the same link is answered meanwhile.
    client.onMessage(binary('small', '/small'))
    await link.until(() => finished(link.frames, 'small'))
    expect(body(link.frames, 'small')).toBe('{"ok":true}')
    expect(sentBytes(link.frames, 'big')).toBe(WINDOW)
    // A slow reader: half a window of credit at a time, each only once the client used what it had.
    while (!finished(link.frames, 'big')) {
      const before = sentBytes(link.frames, 'big')
      client.onMessage({ type: 'tunnel.credit', request_id: 'big', bytes: WINDOW / 2 })
      await link.until(() => sentBytes(link.frames, 'big') === Math.min(total, before + WINDOW / 2))
    }
    expect(sentBytes(link.frames, 'big')).toBe(total)
    expect(body(link.frames, 'big')).toBe('a'.repeat(total))
    expect(client.stats.maxUnackedBytes).toBeLessThanOrEqual(WINDOW)

    // A stalled request that is cancelled lets go of its engine call and its window.
    client.onMessage(binary('stalled', '/big'))
    await link.until(() => sentBytes(link.frames, 'stalled') === WINDOW)
    expect(client.inflight).toBe(1)
    client.onMessage({ type: 'tunnel.cancel', request_id: 'stalled', reason: 'client gone' })
    await link.until(() => client.inflight === 0 && bigClosed === 2)
    expect(sentBytes(link.frames, 'stalled')).toBe(WINDOW)
  })

  it('credit: a request body in frames streams into the engine call, credit granted as the engine reads', async () => {
    const total = 10 * WINDOW + 5
    const chunks: Buffer[] = []
    const url = await engine((req, res) => {
      req.on('data', (chunk: Buffer) => chunks.push(chunk))
      req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end(`{"got":${Buffer.concat(chunks).length}}`))
    })
    const link = port({ open: true }, CREDIT)
    const client = new TunnelClient({ upstreamUrl: url, port: link })
    const payload = Buffer.alloc(total)
    for (let i = 0; i < total; i++) payload[i] = i % 251
    // The edge's side: one window up front, more only as credit comes back.
    let offset = WINDOW
    client.onMessage({ ...request('up', { more: true }), body: new Uint8Array(payload.subarray(0, WINDOW)) })
    let credited = 0
    while (offset < total) {
      await link.until(() => creditSum(link.frames) > credited)
      const grant = creditSum(link.frames) - credited
      credited += grant
      const end = Math.min(total, offset + grant)
      for (let at = offset; at < end; at += 16 * 1024) {
        const stop = Math.min(end, at + 16 * 1024)
        client.onMessage({ type: 'tunnel.body', request_id: 'up', data: new Uint8Array(payload.subarray(at, stop)), more: stop < total })
      }
      offset = end
    }
    await link.until(() => finished(link.frames, 'up'))
    expect(body(link.frames, 'up')).toBe(`{"got":${total}}`)
    expect(Buffer.concat(chunks).equals(payload)).toBe(true)
    expect(client.stats.maxBodyQueuedBytes).toBeLessThanOrEqual(WINDOW)
    expect(client.stats.creditsSent).toBeGreaterThan(0)
  })

  it('credit: an edge that sends beyond the window is refused', async () => {
    const url = await engine((req, res) => {
      req.pause() // never reads: the body queues in the client
      res.on('close', () => {})
    })
    const link = port({ open: true }, CREDIT)
    const client = new TunnelClient({ upstreamUrl: url, port: link })
    client.onMessage({ ...request('over', { more: true }), body: new Uint8Array(WINDOW) })
    for (let i = 0; i < 4 && !finished(link.frames, 'over'); i++) {
      client.onMessage({ type: 'tunnel.body', request_id: 'over', data: new Uint8Array(WINDOW), more: true })
    }
    await link.until(() => finished(link.frames, 'over'))
    expect(link.frames.find((frame) => frame.type === 'tunnel.error')).toMatchObject({
      message: 'request body sent beyond the credit window',
    })
    await link.until(() => client.inflight === 0)
  })
})

function creditSum(frames: Frame[]): number {
  return frames.reduce((sum, frame) => sum + (frame.type === 'tunnel.credit' ? frame.bytes : 0), 0)
}
