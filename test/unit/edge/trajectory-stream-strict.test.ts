/**
 * The streamed Polar-strict build (`strictShell` in `trajectory-stream.ts`: a plan over the prompts, then one
 * trace at a time with each record's request loaded just before it is read) against the in-memory builder on
 * the same records: byte-identical trajectory text and export rows on random sessions; and, in a child process
 * under a Durable Object's 128 MB heap, a 1,000-turn session whose template strips thinking from history (a
 * trace per turn: 15 M prompt tokens in all) finalizes with bounded heap growth to the in-memory builder's bytes.
 */
import { spawnSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { MemoryBucket, nodeSql } from '../../../scripts/lib/node-sqlite.ts'
import type { CompletionRecord } from '../../../src/contract/completion-record.ts'
import { BlobStore } from '../../../src/durable/session/blob-store.ts'
import { CompletionLog } from '../../../src/durable/session/completion-log.ts'
import type { CompletionInput } from '../../../src/durable/session/record.ts'
import { ensureSchema } from '../../../src/durable/session/schema.ts'
import { jsonChunks, type TrajectoryFormat, trajectoryChunks } from '../../../src/durable/session/trajectory-stream.ts'
import { reconstructTrajectory, toNemoGymRows, toSftRows, toSftTokenRows } from '../../../src/reconstruct/index.ts'
import { completionInput, strippedThinkingInputs } from '../../support/records.ts'
import { type SimOptions, simulateSession } from '../reconstruct-support/simulate-tokens.ts'

const SESSION = { session_id: 'ses_strict_stream', task_id: 'task-strict', metadata: { group_id: 'g1' } }
const STRICT = { preset: 'strict' }

function inputOf(record: CompletionRecord, served: boolean): CompletionInput {
  const upstream = served ? { ...record.request, model: 'Qwen/Qwen3-8B-served', logprobs: true } : record.request
  return completionInput({
    completion_id: record.completion_id,
    timestamp: record.timestamp,
    agent: record.agent,
    status: record.status,
    prompt_token_ids: Uint32Array.from(record.prompt_token_ids),
    response_token_ids: Uint32Array.from(record.response_token_ids),
    response_logprobs: record.response_logprobs === null ? null : Float64Array.from(record.response_logprobs),
    finish_reason: record.finish_reason,
    stop_reason: record.stop_reason,
    request_text: JSON.stringify(upstream),
    original_text: JSON.stringify(record.original_request ?? record.request),
    response_message: record.response_message,
    metadata: record.metadata,
  })
}

async function logOf(inputs: Iterable<CompletionInput>, path = ':memory:') {
  const { sql, db } = nodeSql(path)
  // A file is only handed to a child process once closed: no fsync per commit (1,000 records waited ~8 s on the
  // disk for 1.4 s of CPU, and far longer while other processes wrote).
  if (path !== ':memory:') db.exec('PRAGMA synchronous = OFF')
  ensureSchema(sql)
  const log = new CompletionLog(sql, new BlobStore(new MemoryBucket()), SESSION.session_id)
  for (const input of inputs) await log.record(input)
  return { log, db }
}

async function streamed(log: CompletionLog, config: Record<string, unknown>, format: TrajectoryFormat = 'trajectory') {
  let text = ''
  for await (const chunk of trajectoryChunks(log, { builder: 'prefix_merging', config, format }, SESSION)) text += chunk
  return text.trim()
}

async function inMemory(log: CompletionLog, config: Record<string, unknown>) {
  return reconstructTrajectory(await log.all({ withoutOriginal: true }), { builder: 'prefix_merging', config, session: SESSION })
}

const simOptions: fc.Arbitrary<SimOptions> = fc.record({
  seed: fc.integer({ min: 1, max: 2 ** 31 - 1 }),
  mainTurns: fc.integer({ min: 1, max: 9 }),
  thinking: fc.constantFrom('off', 'on-replay', 'on-strip'),
  retokenizeRate: fc.constantFrom(0, 0.3, 1),
  nonce: fc.boolean(),
  subAgents: fc.integer({ min: 0, max: 2 }),
  labelSubAgents: fc.boolean(),
  sideCalls: fc.integer({ min: 0, max: 2 }),
  retryRate: fc.constantFrom(0, 0.2),
  abandonRate: fc.constantFrom(0, 0.2),
  truncateRate: fc.constantFrom(0, 0.3),
  compactAt: fc.option(fc.integer({ min: 1, max: 6 }), { nil: null }),
  noLogprobRate: fc.constantFrom(0, 0.1),
  deltaMode: fc.constantFrom('true', 'best', 'previous', 'none'),
})

const strictConfig = fc.constantFrom<Record<string, unknown>>(
  STRICT,
  { strict: true, end_of_turn_token_id: 99 },
  { preset: 'strict', tokenizer_name_or_path: 'Qwen/Qwen3-8B' },
)

describe('streamed Polar-strict', () => {
  it('equals the in-memory builder byte for byte on random sessions (trajectory and every export format)', async () => {
    await fc.assert(
      fc.asyncProperty(simOptions, strictConfig, fc.boolean(), async (options, config, served) => {
        const { records } = simulateSession(options)
        const { log } = await logOf(records.map((record) => inputOf(record, served)))
        const expected = await inMemory(log, config)
        expect(await streamed(log, config)).toBe(JSON.stringify(expected))
        const rows = { 'nemo-gym': toNemoGymRows, sft: toSftRows, 'sft-tokens': toSftTokenRows } as const
        for (const [format, toRows] of Object.entries(rows)) {
          const text = toRows(expected)
            .map((row) => JSON.stringify(row))
            .join('\n')
          expect(await streamed(log, config, format as TrajectoryFormat)).toBe(text)
        }
      }),
      { numRuns: 50 },
    )
  }, 120_000)

  it('a session that strips thinking: a trace per turn, the same text as in memory', async () => {
    const { log } = await logOf(strippedThinkingInputs(40, 300, 30))
    const expected = await inMemory(log, STRICT)
    expect(expected.traces).toHaveLength(40)
    expect(await streamed(log, STRICT)).toBe(JSON.stringify(expected))
  })

  it('finalizes a 1,000-turn session that strips thinking under a 128 MB heap to the in-memory builder bytes', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'rollgate-strict-'))
    try {
      const path = join(dir, 'session.sqlite')
      // 30 prompt tokens a turn: a 30k-token final prompt, a trace per turn, 15 M prompt tokens in the output.
      const { log, db } = await logOf(strippedThinkingInputs(1000, 200, 30), path)
      db.prepare("INSERT INTO rg_meta (key, value) VALUES ('session', ?)").run(JSON.stringify({ ...SESSION, created_at: '' }))
      // The expected text hashed as written (one trace at a time, not one string of ~100 MB).
      const expected = createHash('sha256')
      {
        const trajectory = await inMemory(log, STRICT)
        expect(trajectory.traces).toHaveLength(1000)
        const { traces, error, ...head } = trajectory
        expected.update(` ${JSON.stringify(head).slice(0, -1)},"traces":[`)
        for (const [index, trace] of traces.entries()) {
          if (index > 0) expected.update(',')
          for (const chunk of jsonChunks(trace)) expected.update(chunk)
        }
        expected.update(`],"error":${JSON.stringify(error)}}`)
      }
      db.close()
      const run = spawnSync(
        process.execPath,
        ['--max-old-space-size=128', 'bench/lib/finalize-in-node.ts', path, 'prefix_merging', JSON.stringify(STRICT)],
        { encoding: 'utf8', timeout: 150_000 },
      )
      expect(run.status, run.stderr.slice(-800)).toBe(0)
      const result = JSON.parse(run.stdout.trim().split('\n').at(-1) ?? '{}') as {
        sha256: string
        heap_growth_mb: number
        heap_and_external_growth_mb: number
        bytes: number
      }
      expect(result.bytes).toBeGreaterThan(64 * 1024 * 1024)
      expect(result.sha256).toBe(expected.digest('hex'))
      expect(result.heap_growth_mb).toBeLessThanOrEqual(64)
      // A Durable Object's 128 MB also counts ArrayBuffers (packed prompts, the 8 MiB R2 part being filled):
      // with them the growth stays well under it, far below the ~120 MB written.
      expect(result.heap_and_external_growth_mb).toBeLessThanOrEqual(96)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  }, 240_000)
})
