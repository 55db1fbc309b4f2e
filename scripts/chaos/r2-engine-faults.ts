/**
 * @module
 * R2 engine faults: 5xx, timeout, reset, truncated body, garbage JSON and a slow first byte, on each of
 * the four APIs, streaming and not. Each failure must reach the client as a provider-shaped error with
 * the engine's status kept (or the gateway status that names it: 502 unreadable answer, 504 timeout),
 * leave a `failed` record that is never trainable, and the slow-first-byte call must succeed.
 */
import { APIS, apiRequest, errorShapeOk, streamErrorOk } from './apis.ts'
import { emptyRow, type Scenario, type ScenarioRow } from './scenario.ts'
import { createSession, records, startChaosStack } from './stack.ts'

const TIMEOUT_MS = 1_500

interface FaultCase {
  name: string
  fault: Record<string, unknown>
  /** Expected HTTP status for a non-streaming call (null: success). */
  status: number | null
}

const CASES: FaultCase[] = [
  { name: '500', fault: { status: 500 }, status: 500 },
  { name: '503', fault: { status: 503 }, status: 503 },
  { name: 'timeout', fault: { delay_ms: TIMEOUT_MS * 3 }, status: 504 },
  { name: 'reset', fault: { reset: true }, status: 502 },
  { name: 'truncated', fault: { truncate: true }, status: 502 },
  { name: 'garbage', fault: { status: 200, body: 'this is { not json' }, status: 502 },
  { name: 'slow-first-byte', fault: { delay_ms: Math.round(TIMEOUT_MS / 3) }, status: null },
]

export const r2EngineFaults: Scenario = {
  id: 'R2',
  title: 'engine faults × 4 APIs × stream/not',
  async run({ log }) {
    const row: ScenarioRow = { ...emptyRow(), http_status_for_stream_failures: 0, error_frames_in_200_streams: 0 }
    const stack = await startChaosStack({ ROLLGATE_UPSTREAM_TIMEOUT_MS: String(TIMEOUT_MS) })
    try {
      const session = await createSession(stack)
      const before = stack.engine.stats().requests.chat_completions ?? 0
      let expectedRecords = 0
      for (const api of APIS) {
        for (const stream of [false, true]) {
          for (const testCase of CASES) {
            stack.engine.injectFaults([testCase.fault as never])
            const { path, body } = apiRequest(api, stream)
            row.sent++
            const response = await fetch(`${stack.edge.url}/s/${session.token}${path}`, {
              method: 'POST',
              headers: { 'content-type': 'application/json' },
              body: JSON.stringify(body),
            })
            const text = await response.text()
            expectedRecords++
            const label = `${api}/${stream ? 'stream' : 'json'}/${testCase.name}`
            if (
              response.status >= 500 &&
              response.headers.get('x-rollgate-error-source') === 'edge' &&
              response.status !== testCase.status
            ) {
              row.edge_5xx++
            }
            const last = (await records(stack, session.session_id)).at(-1)
            if (testCase.status === null) {
              if (response.status !== 200 || last?.status !== 'ok' || !last.trainable) {
                row.errors++
                row.notes.push(`${label}: expected success, got ${response.status} / record ${last?.status}`)
              }
              continue
            }
            if (last?.status !== 'failed' || last.trainable) {
              row.errors++
              row.notes.push(`${label}: record ${last?.status} trainable=${last?.trainable}`)
            }
            if (response.status === 200 && stream) {
              row.error_frames_in_200_streams = (row.error_frames_in_200_streams as number) + 1
              if (!streamErrorOk(api, text)) {
                row.errors++
                row.notes.push(`${label}: 200 stream without the API's error event`)
              }
              continue
            }
            if (stream) row.http_status_for_stream_failures = (row.http_status_for_stream_failures as number) + 1
            let parsed: unknown = null
            try {
              parsed = JSON.parse(text)
            } catch {}
            if (response.status !== testCase.status || !errorShapeOk(api, parsed)) {
              row.errors++
              row.notes.push(`${label}: ${response.status} (want ${testCase.status}) ${text.slice(0, 120)}`)
            }
          }
          log(`R2 ${api} ${stream ? 'stream' : 'json'} done`)
        }
      }
      const all = await records(stack, session.session_id)
      row.captured = all.length
      row.served = (stack.engine.stats().requests.chat_completions ?? 0) - before
      row.trainable_from_failed = all.filter((record) => record.status === 'failed' && record.trainable).length
      if (all.length !== expectedRecords) {
        row.lost = Math.max(0, expectedRecords - all.length)
        row.notes.push(`${expectedRecords} calls, ${all.length} records`)
      }
      return row
    } finally {
      await stack.stop()
    }
  },
}
