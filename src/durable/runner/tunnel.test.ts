/**
 * The edge's tunnel flow control against a scripted runner: request bodies go out only as far as the
 * runner's credit allows, answer bytes are acknowledged only as the reader takes them (a stalled reader
 * holds its window, other requests keep flowing), a runner that overruns its window is cut off, a
 * cancelled request releases its state, and a plain v1 runner still gets text frames without credits.
 */
import { describe, expect, it } from 'vitest'
import type { EdgeMessage } from '../../contract/runner-protocol.ts'
import { TUNNEL_FRAME_BYTES } from '../../contract/runner-protocol.ts'
import type { EdgeBodyFrame } from '../../contract/tunnel-frames.ts'
import { type TunnelFeatures, TunnelRequests } from './tunnel.ts'

const WINDOW = 64 * 1024
const CREDIT: TunnelFeatures = { binary: true, credit: true, windowBytes: WINDOW }
const V1: TunnelFeatures = { binary: false, credit: false, windowBytes: WINDOW }

function link(features: TunnelFeatures) {
  const sent: (EdgeMessage | EdgeBodyFrame)[] = []
  const tunnel = new TunnelRequests({ features: () => features, send: (_runnerId, message) => sent.push(message) > 0 })
  const bodyBytes = (requestId: string) =>
    sent.reduce((sum, message) => {
      if (message.type === 'tunnel.request' && message.request_id === requestId) return sum + message.body.length
      if (message.type === 'tunnel.body' && message.request_id === requestId) return sum + message.data.length
      return sum
    }, 0)
  return { sent, tunnel, bodyBytes }
}

function open(tunnel: TunnelRequests, body: string | Uint8Array = '') {
  const controller = new AbortController()
  const response = tunnel.open('r1', {
    method: 'POST',
    path: '/v1/x',
    headers: new Headers(),
    body,
    timeoutMs: 10_000,
    signal: controller.signal,
  })
  return { response, controller }
}

const requestIdOf = (sent: (EdgeMessage | EdgeBodyFrame)[], index = 0) =>
  (sent.filter((message) => message.type === 'tunnel.request')[index] as { request_id: string }).request_id

/** Answer `total` bytes as a well-behaved credit sender would: never beyond the window the edge granted. */
function answerer(tunnel: TunnelRequests, requestId: string, total: number, frame = 16 * 1024) {
  let sentBytes = 0
  let allowance = WINDOW
  let headSent = false
  const pump = () => {
    while (sentBytes < total && allowance > 0) {
      const size = Math.min(frame, allowance, total - sentBytes)
      const data = new Uint8Array(size).fill(sentBytes % 251)
      sentBytes += size
      allowance -= size
      const more = sentBytes < total
      if (!headSent) tunnel.onMessage('r1', { type: 'tunnel.head', request_id: requestId, status: 200, headers: {}, body: data, more })
      else tunnel.onMessage('r1', { type: 'tunnel.chunk', request_id: requestId, data, more })
      headSent = true
    }
  }
  return {
    pump,
    grant(bytes: number) {
      allowance += bytes
      pump()
    },
    get sent() {
      return sentBytes
    },
  }
}

/** Read a whole answer, handing the sender each credit the edge sent back; returns the bytes read. */
async function drain(
  response: Response,
  sender: ReturnType<typeof answerer>,
  credited: () => number,
  afterRead: (taken: number) => void = () => {},
  reader = response.body?.getReader() as ReadableStreamDefaultReader<Uint8Array>,
): Promise<number> {
  let read = 0
  let passed = 0
  for (;;) {
    const { value, done } = await reader.read()
    if (done) return read
    read += value.byteLength
    afterRead(read)
    const fresh = credited() - passed
    passed += fresh
    if (fresh) sender.grant(fresh)
  }
}

describe('edge tunnel flow control', () => {
  it('sends a large request body only as far as the runner credits it', async () => {
    const { sent, tunnel, bodyBytes } = link(CREDIT)
    const body = new Uint8Array(5 * WINDOW + 123).fill(7)
    const { response } = open(tunnel, body)
    const requestId = requestIdOf(sent)
    expect(bodyBytes(requestId)).toBe(WINDOW)
    // The runner drains half a window to the engine: exactly that much more goes out.
    tunnel.onMessage('r1', { type: 'tunnel.credit', request_id: requestId, bytes: WINDOW / 2 })
    expect(bodyBytes(requestId)).toBe(WINDOW + WINDOW / 2)
    for (let i = 0; i < 10; i++) tunnel.onMessage('r1', { type: 'tunnel.credit', request_id: requestId, bytes: WINDOW })
    expect(bodyBytes(requestId)).toBe(body.length)
    expect(tunnel.stats.max_upload_unacked_bytes).toBeLessThanOrEqual(WINDOW)
    const frames = sent.filter((message) => message.type === 'tunnel.body' || message.type === 'tunnel.request')
    expect(frames.at(-1)).toMatchObject({ more: false })
    tunnel.onMessage('r1', {
      type: 'tunnel.head',
      request_id: requestId,
      status: 200,
      headers: {},
      body: new Uint8Array([123]),
      more: false,
    })
    expect(new Uint8Array(await (await response).arrayBuffer())).toEqual(new Uint8Array([123]))
  })

  it('acknowledges answer bytes only as a slow reader takes them; another request keeps flowing', async () => {
    const { sent, tunnel } = link(CREDIT)
    const slow = open(tunnel)
    const fast = open(tunnel)
    const slowId = requestIdOf(sent, 0)
    const fastId = requestIdOf(sent, 1)
    const total = 8 * WINDOW
    const slowSender = answerer(tunnel, slowId, total)
    const credits = (requestId: string) =>
      sent
        .filter((message) => message.type === 'tunnel.credit' && message.request_id === requestId)
        .reduce((sum, m) => sum + (m as { bytes: number }).bytes, 0)
    slowSender.pump()
    const reader = (await slow.response).body?.getReader() as ReadableStreamDefaultReader<Uint8Array>
    // Nothing read yet: the sender is stalled on a full window, and no credit went back.
    expect(slowSender.sent).toBe(WINDOW)
    expect(credits(slowId)).toBe(0)
    // Meanwhile the other request on the same link is answered in full.
    const fastSender = answerer(tunnel, fastId, 3 * WINDOW)
    fastSender.pump()
    expect(await drain(await fast.response, fastSender, () => credits(fastId))).toBe(3 * WINDOW)
    // The slow reader takes its bytes one read at a time; credit follows what it took.
    const read = await drain(
      await slow.response,
      slowSender,
      () => credits(slowId),
      (taken) => expect(credits(slowId)).toBeLessThanOrEqual(taken),
      reader,
    )
    expect(read).toBe(total)
    expect(tunnel.stats.max_answer_queued_bytes).toBeLessThanOrEqual(WINDOW)
    expect(tunnel.size).toBe(0)
  })

  it('cuts off a runner that sends beyond its window, and a cancelled reader releases the request', async () => {
    const { sent, tunnel } = link(CREDIT)
    const { response } = open(tunnel)
    const requestId = requestIdOf(sent)
    tunnel.onMessage('r1', {
      type: 'tunnel.head',
      request_id: requestId,
      status: 200,
      headers: {},
      body: new Uint8Array(WINDOW),
      more: true,
    })
    const reader = (await response).body?.getReader() as ReadableStreamDefaultReader<Uint8Array>
    tunnel.onMessage('r1', { type: 'tunnel.chunk', request_id: requestId, data: new Uint8Array(1), more: true })
    expect(tunnel.stats.window_violations).toBe(1)
    expect(sent.at(-1)).toMatchObject({ type: 'tunnel.cancel', request_id: requestId, reason: 'credit window exceeded' })
    await expect(reader.read()).rejects.toThrow(/credit window/)
    expect(tunnel.size).toBe(0)

    const second = open(tunnel)
    const secondId = requestIdOf(sent, 1)
    tunnel.onMessage('r1', { type: 'tunnel.head', request_id: secondId, status: 200, headers: {}, body: new Uint8Array(10), more: true })
    expect(tunnel.size).toBe(1)
    await (await second.response).body?.cancel()
    expect(sent.at(-1)).toMatchObject({ type: 'tunnel.cancel', request_id: secondId, reason: 'consumer cancelled' })
    expect(tunnel.size).toBe(0)
    // Frames still in flight for it are ignored.
    expect(tunnel.onMessage('r1', { type: 'tunnel.chunk', request_id: secondId, data: new Uint8Array(5), more: false })).toBe(false)
  })

  it('a plain v1 runner gets text frames all at once and answers without credits', async () => {
    const { sent, tunnel } = link(V1)
    const text = 'é'.repeat(3 * 128 * 1024)
    const { response } = open(tunnel, text)
    const requestId = requestIdOf(sent)
    const frames = sent.filter((message) => message.type === 'tunnel.request' || message.type === 'tunnel.body')
    expect(frames.length).toBe(3)
    expect(
      frames.map((frame) => (frame.type === 'tunnel.request' ? frame.body : frame.type === 'tunnel.body' ? frame.data : '')).join(''),
    ).toBe(text)
    for (const frame of frames)
      expect(typeof (frame.type === 'tunnel.request' ? frame.body : (frame as { data: unknown }).data)).toBe('string')
    const big = 'x'.repeat(4 * TUNNEL_FRAME_BYTES)
    tunnel.onMessage('r1', { type: 'tunnel.head', request_id: requestId, status: 200, headers: {}, body: big, more: true })
    tunnel.onMessage('r1', { type: 'tunnel.chunk', request_id: requestId, data: 'end', more: false })
    expect(await (await response).text()).toBe(`${big}end`)
    expect(sent.some((message) => message.type === 'tunnel.credit')).toBe(false)
    expect(tunnel.stats.window_violations).toBe(0)
  })
})
