/**
 * Polar-strict prefix_merging (`strict: true`) at 1,000 turns in workerd: a synthetic session recorded
 * through the session object (real Durable Object SQLite), finalized with the strict builder (two passes over
 * the log: `strictShell` in `trajectory-stream.ts`) to R2, equals byte for byte the in-memory builder on the
 * same records (the Node path) and the verbatim port of Polar's algorithm the unit tests keep as reference.
 * Small prompts (5 tokens of growth a turn) keep it fast; three turns sampled under an edited prompt (its
 * last token changed) break the conversation, so the plan holds four chains of about 250 turns each.
 */
import { env, SELF } from 'cloudflare:test'
import { describe, expect, it } from 'vitest'
import type { CompletionRecord } from '../../src/contract/completion-record.ts'
import type { SessionRpc } from '../../src/durable/session/session-object.ts'
import type { CompletionInput } from '../../src/durable/session/record.ts'
import { reconstructTrajectory } from '../../src/reconstruct/index.ts'
import { growingSessionInputs } from '../support/records.ts'
import { buildPrefixMergingStrictReference } from '../unit/reconstruct-support/polar-strict-reference.ts'

const ADMIN = { authorization: 'Bearer test-admin-token', 'content-type': 'application/json' }
const EDGE = 'https://edge.test'
const SESSION_ID = 'long-strict'
const SESSION = { session_id: SESSION_ID, task_id: 'task-long-strict', metadata: { group_id: 'g-long-strict' } }
/** Turns sampled under an edited prompt (its last token changed): no chain tip is a prefix of it. */
const SIDE_TURNS = new Set([250, 500, 750])

function* inputs(): Generator<CompletionInput> {
  for (const [turn, input] of [...growingSessionInputs(1000)].entries()) {
    if (!SIDE_TURNS.has(turn)) {
      yield input
      continue
    }
    const prompt = Uint32Array.from(input.prompt_token_ids as Uint32Array)
    prompt[prompt.length - 1] = 4242
    yield { ...input, prompt_token_ids: prompt }
  }
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

describe('Polar-strict at 1,000 turns in workerd', () => {
  it('finalize streams the strict trajectory to R2: the bytes of the in-memory builder and of the reference port', async () => {
    const created = await SELF.fetch(`${EDGE}/v1/sessions`, { method: 'POST', headers: ADMIN, body: JSON.stringify(SESSION) })
    expect(created.status).toBe(201)
    const stub = env.SESSIONS.get(env.SESSIONS.idFromName(SESSION_ID)) as unknown as SessionRpc
    for (const input of inputs()) await stub.record(input)
    const records = await allRecords(stub)
    expect(records).toHaveLength(1000)

    const config = { strict: true }
    const expected = JSON.stringify(reconstructTrajectory(records, { builder: 'prefix_merging', config, session: SESSION }))
    const reference = JSON.stringify(buildPrefixMergingStrictReference(records, SESSION, null))
    expect(expected === reference).toBe(true)

    const outcome = await stub.finalize({ builder: 'prefix_merging', config })
    expect(outcome.ok).toBe(true)
    const { finalization } = outcome
    const stored = (await (await env.BLOBS.get(finalization.trajectory_key))!.text()).trim()
    expect(stored.length).toBe(expected.length)
    expect(stored === expected).toBe(true)
    const trajectory = JSON.parse(stored) as { traces: { metadata: { source_completion_ids: string[] } }[] }
    expect(finalization.trace_count).toBe(4)
    const merged = trajectory.traces.map((trace) => trace.metadata.source_completion_ids.length)
    expect(merged.reduce((sum, count) => sum + count, 0)).toBe(1000)
    expect(Math.min(...merged)).toBeGreaterThan(200)
  }, 120_000)
})
