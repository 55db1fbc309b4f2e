/**
 * Tunnel flow control through the real `RunnerLink` (issue #10, item 3): a runner that asks for
 * `tunnel.binary` + `tunnel.credit` gets them in `registered`, receives a 3 MiB request body never more
 * than one window ahead of the credit it grants, and answers 4 MiB to a slow reader within the window the
 * edge grants back as that reader takes the bytes; the link's counters stay within one window.
 */
import { env } from 'cloudflare:test'
import { describe, expect, it } from 'vitest'
import { TUNNEL_CAPABILITY, TUNNEL_FRAME_BYTES, TUNNEL_WINDOW_BYTES } from '../../src/contract/runner-protocol.ts'
import { decodeEdgeFrame, type EdgeBodyFrame, encodeTunnelFrame } from '../../src/contract/tunnel-frames.ts'
import { linkStub } from '../../src/worker/pipeline/rollout-stubs.ts'
import { runnerTunnelFetch } from '../../src/worker/pipeline/runner-tunnel.ts'
import { eventually, TestRunner } from './rollout-support.ts'

const WINDOW = TUNNEL_WINDOW_BYTES
const UPLOAD = 3 * WINDOW + 17
const ANSWER = 4 * WINDOW + 5

describe('tunnel credit through the runner link', () => {
  it('bounds both directions to one window per request, with binary frames', async () => {
    const runner = await TestRunner.start('credit-r1', { capabilities: [TUNNEL_CAPABILITY.binary, TUNNEL_CAPABILITY.credit, 'unknown.x'] })
    const registered = runner.received.find((message) => message.type === 'registered')
    expect(registered).toMatchObject({ capabilities: [TUNNEL_CAPABILITY.binary, TUNNEL_CAPABILITY.credit], tunnel_window_bytes: WINDOW })

    // The runner's side of the upload: count what arrived beyond the credit granted, grant only once stalled.
    const frames: EdgeBodyFrame[] = []
    let received = 0
    let granted = 0
    let worstAhead = 0
    // workerd hands a client socket's binary messages over as Blobs unless asked otherwise.
    ;(runner.ws as WebSocket & { binaryType: string }).binaryType = 'arraybuffer'
    runner.ws.addEventListener('message', (event) => {
      if (typeof event.data === 'string') return
      const frame = decodeEdgeFrame(new Uint8Array(event.data as ArrayBuffer))
      frames.push(frame)
      received += frame.type === 'tunnel.request' ? frame.body.length : frame.data.length
      worstAhead = Math.max(worstAhead, received - granted)
      if (received - granted === WINDOW) {
        runner.send({ type: 'tunnel.credit', request_id: frame.request_id, bytes: WINDOW })
        granted += WINDOW
      }
    })
    const upload = new Uint8Array(UPLOAD).map((_, i) => i % 253)
    // The Worker's own path to the link, as the pipeline's engine call takes it.
    const pending = runnerTunnelFetch(
      env,
      'credit-r1',
      30_000,
    )('runner://credit-r1/v1/echo', {
      method: 'POST',
      body: upload,
      headers: { 'content-type': 'application/json' },
    })
    await eventually(async () => expect(frames.at(-1)).toMatchObject({ more: false }))
    expect(worstAhead).toBeLessThanOrEqual(WINDOW)
    const got = new Uint8Array(received)
    let at = 0
    for (const frame of frames) {
      const part = frame.type === 'tunnel.request' ? frame.body : frame.data
      got.set(part as Uint8Array, at)
      at += part.length
    }
    // Compared in a loop: `toEqual` walks 3 MiB of bytes one at a time (most of this test's time).
    let differs = got.length === upload.length ? -1 : Math.min(got.length, upload.length)
    for (let i = 0; differs < 0 && i < upload.length; i++) if (got[i] !== upload[i]) differs = i
    expect({ differs, length: got.length }).toEqual({ differs: -1, length: upload.length })
    const requestId = frames[0]?.request_id as string

    // The answer: never more than the edge's credit allows; the reader below takes it slowly.
    const send = async () => {
      let sent = 0
      let allowance = WINDOW
      while (sent < ANSWER) {
        while (allowance <= 0) allowance += (await runner.next('tunnel.credit', (message) => message.request_id === requestId)).bytes
        const size = Math.min(TUNNEL_FRAME_BYTES, allowance, ANSWER - sent)
        const data = new Uint8Array(size).fill(sent % 251)
        const more = sent + size < ANSWER
        runner.ws.send(
          encodeTunnelFrame(
            sent === 0
              ? {
                  type: 'tunnel.head',
                  request_id: requestId,
                  status: 200,
                  headers: { 'content-type': 'application/octet-stream' },
                  body: data,
                  more,
                }
              : { type: 'tunnel.chunk', request_id: requestId, data, more },
          ),
        )
        sent += size
        allowance -= size
      }
    }
    const sending = send()
    const response = await pending
    expect(response.status).toBe(200)
    const reader = response.body?.getReader() as ReadableStreamDefaultReader<Uint8Array>
    let read = 0
    let sincePause = 0
    for (;;) {
      const { value, done } = await reader.read()
      if (done) break
      read += value.byteLength
      sincePause += value.byteLength
      // A slow reader: a pause every 64 KiB (reads come 4 KiB at a time: a pause each was 1,000 timers), still far
      // slower than a runner sending 256 KiB frames on credit granted before the bytes were taken.
      if (sincePause >= 64 * 1024) {
        sincePause = 0
        await new Promise((resolve) => setTimeout(resolve, 2))
      }
    }
    await sending
    expect(read).toBe(ANSWER)

    const { tunnel } = await linkStub(env, 'credit-r1').stats()
    expect(tunnel.max_upload_unacked_bytes).toBeLessThanOrEqual(WINDOW)
    expect(tunnel.max_answer_queued_bytes).toBeLessThanOrEqual(WINDOW)
    expect(tunnel.credits_received).toBeGreaterThanOrEqual(3)
    expect(tunnel.credits_sent).toBeGreaterThanOrEqual(3)
    expect(tunnel.window_violations).toBe(0)
    runner.close()
  }, 30_000) // 7 MiB through workerd both ways: more work than the 5 s default, not a race
})
