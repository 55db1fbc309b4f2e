/**
 * A 1,000-turn session through the session object (synthetic records): storage stays linear, finalize
 * streams both builders to R2 in parts, and the streamed text equals the in-memory builder's output on
 * the same records; every export format streams the same rows the in-memory exports give.
 */
import { env, SELF } from 'cloudflare:test'
import { beforeAll, describe, expect, it } from 'vitest'
import type { CompletionRecord } from '../../src/contract/completion-record.ts'
import type { SessionRpc } from '../../src/durable/session/session-object.ts'
import type { CompletionInput } from '../../src/durable/session/record.ts'
import { reconstructTrajectory, toJsonl, toNemoGymRows, toSessionResult, toSftRows, toSftTokenRows } from '../../src/reconstruct/index.ts'
import type { SessionResult } from '../../src/contract/trajectory.ts'
import type { SessionRolloutRpc } from '../../src/durable/session/session-rollout.ts'
import { growingSession, growingSessionInputs } from '../support/records.ts'
import { eventually, submit, TestRunner, taskBody, taskStatus } from './rollout-support.ts'

const ADMIN = { authorization: 'Bearer test-admin-token', 'content-type': 'application/json' }
const EDGE = 'https://edge.test'
const SESSION = { task_id: 'task-long', metadata: { group_id: 'g-long' } }

async function sessionWith(sessionId: string, inputs: Iterable<CompletionInput>): Promise<SessionRpc> {
  const res = await SELF.fetch(`${EDGE}/v1/sessions`, {
    method: 'POST',
    headers: ADMIN,
    body: JSON.stringify({ session_id: sessionId, ...SESSION }),
  })
  expect(res.status).toBe(201)
  const stub = env.SESSIONS.get(env.SESSIONS.idFromName(sessionId)) as unknown as SessionRpc
  for (const input of inputs) await stub.record(input)
  return stub
}

async function allRecords(stub: SessionRpc): Promise<CompletionRecord[]> {
  const out: CompletionRecord[] = []
  for (let after = -1; ; ) {
    const page = await stub.completions(after, 1000, 16 * 1024 * 1024)
    if (page.length === 0) return out
    out.push(...page)
    after = page.at(-1)!.seq
  }
}

function inMemory(sessionId: string, records: CompletionRecord[], builder: 'per_request' | 'prefix_merging') {
  return reconstructTrajectory(records, { builder, session: { session_id: sessionId, ...SESSION } })
}

describe('long sessions', () => {
  // 5 tokens of growth (2 sampled) per turn: 1,000 turns end at a ~5k-token prompt; per_request ≈ 2.7M tokens (≈ 17 MB).
  // prefix_merging is built from records read lazily from the log (`log-records.ts`), per_request record by record.
  for (const builder of ['prefix_merging', 'per_request'] as const) {
    it(`1,000 turns: linear storage; ${builder} finalize streams to R2 in parts and equals the in-memory builder`, async () => {
      const sessionId = `long-${builder}`
      let last: CompletionInput | null = null
      let outputTokens = 0
      const stub = await sessionWith(
        sessionId,
        (function* () {
          for (const [turn, input] of [...growingSessionInputs(1000)].entries()) {
            last = input
            outputTokens += input.response_token_ids!.length
            // ≈ 9 KB of assistant text a turn: the one prefix_merging trace is ≈ 9 MB, more than one R2 part.
            yield { ...input, response_message: { role: 'assistant' as const, content: `turn ${turn}: ${'reasoned answer '.repeat(560)}` } }
          }
        })(),
      )
      const final = last as unknown as CompletionInput
      const summary = (await stub.summary())!
      const floor = 4 * final.prompt_token_ids!.length + 8 * outputTokens
      expect(summary.storage.token_bytes).toBeLessThanOrEqual(1.2 * floor)
      expect(summary.storage.text_bytes).toBeLessThanOrEqual(2 * (final.original_text.length + final.request_text.length))

      const records = await allRecords(stub)
      const expected = JSON.stringify(inMemory(sessionId, records, builder))
      const outcome = await stub.finalize({ builder })
      expect(outcome.ok).toBe(true)
      const { finalization } = outcome
      const object = await env.BLOBS.get(finalization.trajectory_key)
      const stored = await object!.text()
      expect(stored.trim().length).toBe(expected.length)
      expect(stored.trim() === expected).toBe(true)
      expect(finalization.trajectory_bytes).toBe(stored.length)
      // Both are MBs (per_request ~O(turns²)): they must have gone up in parts, never as one string.
      expect(finalization.trajectory_parts).toBeGreaterThan(1)
      if (builder === 'prefix_merging') expect(finalization.trace_count).toBe(1)

      // GET streams the stored object after finalize; built on the fly for another config.
      const got = await SELF.fetch(`${EDGE}/v1/sessions/${sessionId}/trajectory?builder=${builder}`, { headers: ADMIN })
      expect(got.headers.get('x-rollgate-trajectory-key')).toBe(finalization.trajectory_key)
      expect((await got.text()).trim() === expected).toBe(true)
    }, 120_000)
  }

  it('a 1,000-turn rollout session hands its task the prefix_merging result the in-memory builder gives', async () => {
    const runner = await TestRunner.start('long-rollout-r')
    const taskId = 'long-rollout'
    const builder = { strategy: 'prefix_merging', config: { preset: 'tolerant' } }
    expect((await submit(taskBody(taskId, { builder }))).status).toBe(200)
    const assigned = await runner.takeAssignment(taskId)
    const session = env.SESSIONS.get(env.SESSIONS.idFromName(assigned.session_id)) as unknown as SessionRolloutRpc & SessionRpc
    await eventually(async () => expect((await session.lifecycle())?.status).toBe('RUNNING'))
    for (const input of growingSessionInputs(1000)) {
      const admission = await session.admit()
      if (!admission.ok || !admission.managed) throw new Error('not admitted')
      await session.recordAdmitted(admission.ticket, input)
    }
    const records = await allRecords(session)
    runner.send({ type: 'session.finished', session_id: assigned.session_id, agent_result: { status: 'completed', return_code: 0 } })
    // Polled without the results (no R2 object read per poll); read whole once it is done.
    await eventually(async () => expect((await taskStatus(taskId, { results: false })).status).toBe('completed'), 60_000)
    const status = await taskStatus(taskId)
    // What the task stored in R2 (and the trainer bridges read): the streamed build's traces and stats.
    const result = status.results[0] as SessionResult
    expect(result).toMatchObject({ session_id: assigned.session_id, status: 'COMPLETED', error: null })
    const expected = reconstructTrajectory(records, {
      builder: 'prefix_merging',
      config: builder.config,
      session: { session_id: assigned.session_id, task_id: taskId, metadata: result.metadata },
    })
    expect(result.trajectory.traces).toHaveLength(1)
    expect(JSON.stringify(result.trajectory.traces.map((trace) => ({ ...trace, reward: null })))).toBe(JSON.stringify(expected.traces))
    expect(result.trajectory.metadata.reconstruction_stats).toEqual(expected.metadata.reconstruction_stats)
    expect(result.trajectory.metadata.record_count).toBe(1000)
    runner.close()
  }, 180_000)

  describe('streams every export format with the rows of the in-memory exports', () => {
    const sessionId = 'long-exports'
    let records: CompletionRecord[] = []
    beforeAll(async () => {
      // 40 turns: the last prompt holds 80 messages, past a streamed trace's 64-message slices, and the builds
      // route past their 8-record batches; short prompts and tool outputs (the rows stream the same code either way).
      records = await allRecords(await sessionWith(sessionId, growingSession(40, 40, 8, 4, 2)))
    })
    // One test per builder (each streams five formats): the work of one is a third of the whole.
    for (const [name, builder, config] of [
      ['per_request', 'per_request', null],
      ['prefix_merging', 'prefix_merging', null],
      // Polar-strict: over records read lazily in two passes (`strictShell`), the same as over the records read whole.
      ['prefix_merging (Polar-strict)', 'prefix_merging', { strict: true }],
    ] as const) {
      it(name, async () => {
        expect(records).toHaveLength(40)
        const trajectory = config
          ? reconstructTrajectory(records, { builder, config, session: { session_id: sessionId, ...SESSION } })
          : inMemory(sessionId, records, builder)
        const expected: Record<string, string> = {
          trajectory: JSON.stringify(trajectory),
          session_result: JSON.stringify(toSessionResult(trajectory, { session_id: sessionId, task_id: SESSION.task_id })),
          'nemo-gym': toJsonl(toNemoGymRows(trajectory)),
          sft: toJsonl(toSftRows(trajectory)),
          'sft-tokens': toJsonl(toSftTokenRows(trajectory)),
        }
        for (const [format, text] of Object.entries(expected)) {
          const query = `builder=${builder}&format=${format}${config ? `&config=${encodeURIComponent(JSON.stringify(config))}` : ''}`
          const res = await SELF.fetch(`${EDGE}/v1/sessions/${sessionId}/trajectory?${query}`, { headers: ADMIN })
          expect(res.status).toBe(200)
          const body = await res.text()
          if (format === 'trajectory' || format === 'session_result') expect(JSON.parse(body)).toEqual(JSON.parse(text))
          // NDJSON too starts with the one space sent before the build (it leads the first row's line).
          else expect(body).toBe(` ${text}`)
        }
      })
    }
  })
})
