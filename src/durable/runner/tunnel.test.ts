/**
 * The edge's tunnel flow control against a scripted runner: request bodies go out only as far as the
 * runner's credit allows, answer bytes are acknowledged only as the reader takes them (a stalled reader
 * holds its window, other requests keep flowing), a runner that overruns its window is cut off, a
 * cancelled request releases its state, and a plain v1 runner still gets text frames without credits.
 */
import { describe, expect, it, vi } from 'vitest'
import type { EdgeMessage } from '../../contract/runner-protocol.ts'
import { TUNNEL_FRAME_BYTES } from '../../contract/runner-protocol.ts'
import type { EdgeBodyFrame } from '../../contract/tunnel-frames.ts'
import { type TunnelAnswer, type TunnelFeatures, TunnelRequests } from './tunnel.ts'

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

let calls = 0

function open(tunnel: TunnelRequests, body: string | Uint8Array = '', timeoutMs = 10_000) {
  const requestId = `q${calls++}`
  const answer = tunnel.open('r1', { request_id: requestId, method: 'POST', path: '/v1/x', headers: {}, body, timeout_ms: timeoutMs })
  const response = answer.then((value) => new Response(value.body, { status: value.status, headers: value.headers }))
  return { response, answer, requestId }
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

/** The named error of a failed answer (its JSON body's `error.code`) and its status. */
async function errorOf(answer: Promise<TunnelAnswer>): Promise<{ status: number; code: string; message: string }> {
  const value = await answer
  const body = JSON.parse(new TextDecoder().decode(value.body as Uint8Array)) as { error: { code: string; message: string } }
  return { status: value.status, code: body.error.code, message: body.error.message }
}

describe('edge tunnel bounds', () => {
  it('a v1 runner (no credit) is held to the answer cap: beyond it the call fails, named, and the runner is told', async () => {
    const sent: (EdgeMessage | EdgeBodyFrame)[] = []
    const tunnel = new TunnelRequests(
      { features: () => V1, send: (_runnerId, message) => sent.push(message) > 0 },
      { v1AnswerQueueBytes: 4096 },
    )
    const { response, requestId } = open(tunnel, '{}')
    tunnel.onMessage('r1', { type: 'tunnel.head', request_id: requestId, status: 200, headers: {}, body: 'x'.repeat(2048), more: true })
    const reader = (await response).body?.getReader() as ReadableStreamDefaultReader<Uint8Array>
    // The reader does not read: 4 KiB queue, the next byte is beyond the cap.
    tunnel.onMessage('r1', { type: 'tunnel.chunk', request_id: requestId, data: 'y'.repeat(2048), more: true })
    expect(tunnel.buffered).toBe(4096)
    tunnel.onMessage('r1', { type: 'tunnel.chunk', request_id: requestId, data: 'z', more: true })
    expect(sent.at(-1)).toMatchObject({ type: 'tunnel.cancel', request_id: requestId, reason: 'answer queue full' })
    await expect(reader.read()).rejects.toThrow(/^tunnel_answer_overflow: /)
    expect(tunnel.size).toBe(0)
    expect(tunnel.buffered).toBe(0)
  })

  it('the link holds at most its buffer bound: a call beyond it is refused before sending, an answer beyond it fails its call', async () => {
    const sent: (EdgeMessage | EdgeBodyFrame)[] = []
    const bound = 2 * WINDOW + WINDOW / 2
    const tunnel = new TunnelRequests(
      { features: () => CREDIT, send: (_runnerId, message) => sent.push(message) > 0 },
      { linkBufferBytes: bound },
    )
    // Two answers a window each, unread: two windows held.
    const unread = [open(tunnel, new Uint8Array(1)), open(tunnel, new Uint8Array(1))]
    for (const call of unread) {
      tunnel.onMessage('r1', {
        type: 'tunnel.head',
        request_id: call.requestId,
        status: 200,
        headers: {},
        body: new Uint8Array(WINDOW),
        more: true,
      })
    }
    expect(tunnel.buffered).toBe(2 * WINDOW)
    // A request body that does not fit what is left: refused, nothing sent for it.
    const requests = sent.filter((message) => message.type === 'tunnel.request').length
    const big = open(tunnel, new Uint8Array(WINDOW))
    expect(await errorOf(big.answer)).toMatchObject({ status: 503, code: 'tunnel_buffer_full' })
    expect(sent.filter((message) => message.type === 'tunnel.request').length).toBe(requests)
    // A small one fits; its answer's first window does not: that call fails with the same name.
    const small = open(tunnel, new Uint8Array(10))
    tunnel.onMessage('r1', {
      type: 'tunnel.head',
      request_id: small.requestId,
      status: 200,
      headers: {},
      body: new Uint8Array(WINDOW),
      more: true,
    })
    expect(await errorOf(small.answer)).toMatchObject({ status: 503, code: 'tunnel_buffer_full' })
    expect(sent.at(-1)).toMatchObject({ type: 'tunnel.cancel', request_id: small.requestId, reason: 'link buffer full' })
    expect(tunnel.stats.max_buffered_bytes).toBeLessThanOrEqual(bound)
    // Reading frees the link.
    for (const call of unread) {
      const reader = (await call.response).body?.getReader() as ReadableStreamDefaultReader<Uint8Array>
      expect((await reader.read()).value?.byteLength).toBe(WINDOW)
      tunnel.onMessage('r1', { type: 'tunnel.chunk', request_id: call.requestId, data: new Uint8Array(0), more: false })
      expect((await reader.read()).done).toBe(true)
    }
    expect(tunnel.buffered).toBe(0)
    expect(tunnel.size).toBe(0)
  })

  it('a request body is held until all of it is sent (under credit)', async () => {
    const sent: (EdgeMessage | EdgeBodyFrame)[] = []
    const tunnel = new TunnelRequests({ features: () => CREDIT, send: (_runnerId, message) => sent.push(message) > 0 })
    const call = open(tunnel, new Uint8Array(3 * WINDOW))
    expect(tunnel.buffered).toBe(3 * WINDOW)
    for (let i = 0; i < 2; i++) tunnel.onMessage('r1', { type: 'tunnel.credit', request_id: call.requestId, bytes: WINDOW })
    expect(tunnel.buffered).toBe(0)
  })

  it('at most maxPending calls in flight; the rest are refused, named', async () => {
    const tunnel = new TunnelRequests({ features: () => CREDIT, send: () => true }, { maxPending: 2 })
    open(tunnel)
    open(tunnel)
    expect(await errorOf(open(tunnel).answer)).toMatchObject({ status: 503, code: 'tunnel_saturated' })
    expect(tunnel.size).toBe(2)
  })

  it('deadlines: one timer for the link, calls fail named when theirs passes, no timer left when idle', async () => {
    vi.useFakeTimers()
    try {
      const sent: (EdgeMessage | EdgeBodyFrame)[] = []
      const tunnel = new TunnelRequests({ features: () => CREDIT, send: (_runnerId, message) => sent.push(message) > 0 })
      const early = open(tunnel, '', 50)
      const late = open(tunnel, '', 100)
      const answered = open(tunnel, '', 30)
      tunnel.onMessage('r1', {
        type: 'tunnel.head',
        request_id: answered.requestId,
        status: 200,
        headers: {},
        body: new Uint8Array(1),
        more: false,
      })
      expect(vi.getTimerCount()).toBe(1)
      await vi.advanceTimersByTimeAsync(60)
      expect(await errorOf(early.answer)).toMatchObject({ status: 504, code: 'tunnel_timeout' })
      expect(sent.at(-1)).toMatchObject({ type: 'tunnel.cancel', request_id: early.requestId, reason: 'timeout' })
      expect(tunnel.size).toBe(1)
      await vi.advanceTimersByTimeAsync(50)
      expect(await errorOf(late.answer)).toMatchObject({ status: 504, code: 'tunnel_timeout' })
      expect(tunnel.size).toBe(0)
      expect(vi.getTimerCount()).toBe(0)
      // An answered call leaves no timer behind either.
      const quick = open(tunnel, '', 1_000)
      tunnel.onMessage('r1', {
        type: 'tunnel.head',
        request_id: quick.requestId,
        status: 204,
        headers: {},
        body: new Uint8Array(0),
        more: false,
      })
      expect((await quick.answer).status).toBe(204)
      expect(vi.getTimerCount()).toBe(0)
    } finally {
      vi.useRealTimers()
    }
  })

  it('a caller that gives up cancels at the runner and gets a named answer', async () => {
    const sent: (EdgeMessage | EdgeBodyFrame)[] = []
    const tunnel = new TunnelRequests({ features: () => CREDIT, send: (_runnerId, message) => sent.push(message) > 0 })
    const call = open(tunnel, '{}')
    tunnel.cancel(call.requestId, 'client disconnected')
    expect(sent.at(-1)).toMatchObject({ type: 'tunnel.cancel', request_id: call.requestId, reason: 'client disconnected' })
    expect(await errorOf(call.answer)).toMatchObject({ status: 499, code: 'client_disconnected' })
    expect(tunnel.size).toBe(0)
  })
})
