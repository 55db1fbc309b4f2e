/**
 * The first bytes of every built trajectory and export reach the client while the build is still under
 * way (issue #15.3), through the real route, session object and RPC stream: the build is held at one of
 * its records (`buildHooks`) until the client has read its first chunk. A stream that held its leading
 * bytes until the build ended (or until more output came) never delivers that chunk, and the test fails
 * by its timeout. Each answer is then read to its end and must parse; it says it is sent uncompressed
 * (an encoder in front of the Worker would hold the leading bytes again).
 */
import { env, SELF } from 'cloudflare:test'
import { afterEach, beforeAll, describe, expect, it } from 'vitest'
import type { SessionRpc } from '../../src/durable/session/session-object.ts'
import { buildHooks } from '../../src/durable/session/trajectory-stream.ts'
import { growingSession } from '../support/records.ts'

const ADMIN = { authorization: 'Bearer test-admin-token', 'content-type': 'application/json' }
const EDGE = 'https://edge.test'
const SESSION_ID = 'first-byte'
const RECORDS = 24
/** The build is held before reading this record: mid-build for every builder. */
const HOLD_AT = 12

beforeAll(async () => {
  const res = await SELF.fetch(`${EDGE}/v1/sessions`, {
    method: 'POST',
    headers: ADMIN,
    body: JSON.stringify({ session_id: SESSION_ID, task_id: 'task-fb' }),
  })
  expect(res.status).toBe(201)
  const stub = env.SESSIONS.get(env.SESSIONS.idFromName(SESSION_ID)) as unknown as SessionRpc
  for (const input of growingSession(RECORDS, 400, 60, 20)) await stub.record(input)
})

afterEach(() => {
  buildHooks.beforeRecord = null
})

const TOLERANT = encodeURIComponent(JSON.stringify({ preset: 'tolerant' }))
const STRICT = encodeURIComponent(JSON.stringify({ strict: true }))
const CASES: [string, string, number][] = [
  // [name, query, step the build is held at (prefix_merging, Polar-strict too: before it reads record HOLD_AT)]
  ['prefix_merging', `builder=prefix_merging&config=${TOLERANT}`, HOLD_AT],
  ['prefix_merging (default preset)', 'builder=prefix_merging', HOLD_AT],
  ['prefix_merging Polar-strict', `builder=prefix_merging&config=${STRICT}`, HOLD_AT],
  // per_request writes a trace per record: held before its first (more output would wait for the reader).
  ['per_request', 'builder=per_request', 0],
]
const FORMATS = ['trajectory', 'session_result', 'nemo-gym', 'sft', 'sft-tokens']

describe('first byte of a built trajectory or export', () => {
  for (const [name, query, holdAt] of CASES) {
    for (const format of FORMATS) {
      it(`${name}, format=${format}: the first chunk arrives while the build is held`, async () => {
        let release: () => void = () => {}
        const released = new Promise<void>((resolve) => {
          release = resolve
        })
        let reach: () => void = () => {}
        const reached = new Promise<void>((resolve) => {
          reach = resolve
        })
        let passed = false
        buildHooks.beforeRecord = async (step) => {
          if (step === holdAt) {
            reach()
            await released
          } else if (step > holdAt) passed = true
        }
        const res = await SELF.fetch(`${EDGE}/v1/sessions/${SESSION_ID}/trajectory?${query}&format=${format}`, { headers: ADMIN })
        expect(res.status).toBe(200)
        expect(res.headers.get('content-encoding')).toBe('identity')
        expect(res.headers.get('cache-control')).toBe('no-transform')
        const reader = res.body!.getReader()
        // The build cannot go past `holdAt` until release(): this chunk left before the build ended.
        const first = await reader.read()
        expect(first.done).toBe(false)
        expect(passed).toBe(false)
        // Read on (what was written up to the hold may be more than the stream buffers); the build
        // really reaches the hold mid-way (the session has records past it), then goes on.
        const rest = (async () => {
          let text = ''
          for (;;) {
            const chunk = await reader.read()
            if (chunk.done) return text
            text += new TextDecoder().decode(chunk.value)
          }
        })()
        await reached
        release()
        const text = new TextDecoder().decode(first.value) + (await rest)
        if (format === 'trajectory' || format === 'session_result') expect(JSON.parse(text)).toHaveProperty('status')
        else {
          const lines = text.split('\n').filter((line) => line.length > 0)
          expect(lines.length).toBeGreaterThan(0)
          for (const line of lines) expect(typeof JSON.parse(line)).toBe('object')
        }
      }, 20_000)
    }
  }
})
