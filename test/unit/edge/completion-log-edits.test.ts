/**
 * Schema v4: the body sent upstream is stored as copies of the harness body's new text (`request_edits`)
 * when the engine body renames keys the harness sent (`reasoning_content` → `reasoning`, moved to the end of
 * each assistant message). Every reader gives the same bytes as on the v3 layout of the same records
 * (GET completion, finalize with each builder, Polar-strict, exports, rollout results) on simulated sessions
 * with reasoning or without, tool calls, sub-agents, side calls, retries and abandoned calls; and a session
 * that replays its reasoning stores its text about once (the v3 layout stored each turn's messages twice).
 */
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { MemoryBucket, nodeSql } from '../../../scripts/lib/node-sqlite.ts'
import { BlobStore } from '../../../src/durable/session/blob-store.ts'
import { CompletionLog } from '../../../src/durable/session/completion-log.ts'
import type { CompletionInput } from '../../../src/durable/session/record.ts'
import { ensureSchema } from '../../../src/durable/session/schema.ts'
import { buildEngineRequest, engineRequestSplice } from '../../../src/normalize/engine/engine-request.ts'
import type { ChatRequest } from '../../../src/normalize/types.ts'
import { CAPTURE_SESSION, edgeInput, servedOutputs } from '../../support/edge-capture.ts'
import { completionInput } from '../../support/records.ts'
import { type SimOptions, simulateSession } from '../reconstruct-support/simulate-tokens.ts'

async function logOf(inputs: readonly CompletionInput[], requestEdits: boolean) {
  const { sql } = nodeSql()
  ensureSchema(sql)
  const bucket = new MemoryBucket()
  const id = CAPTURE_SESSION.session_id
  const writer = new CompletionLog(sql, new BlobStore(bucket), id, { requestEdits })
  for (const input of inputs) await writer.record(input)
  return { sql, writer, cold: () => new CompletionLog(sql, new BlobStore(bucket), id) }
}

const simOptions: fc.Arbitrary<SimOptions> = fc.record({
  seed: fc.integer({ min: 1, max: 2 ** 31 - 1 }),
  mainTurns: fc.integer({ min: 3, max: 8 }),
  thinking: fc.constantFrom('off', 'on-replay', 'on-strip'),
  retokenizeRate: fc.constantFrom(0, 0.3),
  nonce: fc.boolean(),
  subAgents: fc.integer({ min: 0, max: 2 }),
  labelSubAgents: fc.boolean(),
  sideCalls: fc.integer({ min: 0, max: 2 }),
  retryRate: fc.constantFrom(0, 0.2),
  abandonRate: fc.constantFrom(0, 0.2),
  truncateRate: fc.constantFrom(0, 0.2),
  compactAt: fc.option(fc.integer({ min: 1, max: 6 }), { nil: null }),
  noLogprobRate: fc.constantFrom(0, 0.1),
  deltaMode: fc.constant('true'),
})

describe('request text coded against the original (schema v4)', () => {
  it('every reader serves the same bytes as on the v3 layout of the same records', async () => {
    // Every session in every style: vLLM (renames replayed reasoning), SGLang (no rename: the harness's bytes
    // spliced), a spaced harness body (no copy long enough around each difference: stored plain).
    const combos = (['vllm', 'sglang', 'spaced'] as const).flatMap((style) => [true, false].map((reasoning) => ({ style, reasoning })))
    const coded: Record<string, number> = {}
    await fc.assert(
      fc.asyncProperty(simOptions, async (options) => {
        const { records } = simulateSession(options)
        for (const { style, reasoning } of combos) {
          const inputs = records.map((record) => edgeInput(record, style, reasoning))
          const v4 = await logOf(inputs, true)
          const v3 = await logOf(inputs, false)
          const key = `${style}${reasoning ? '+reasoning' : ''}`
          coded[key] =
            (coded[key] ?? 0) +
            (v4.sql.first<{ n: number }>('SELECT COUNT(*) AS n FROM rg_completions WHERE request_edits IS NOT NULL')?.n ?? 0)
          expect(v3.sql.first<{ n: number }>('SELECT COUNT(*) AS n FROM rg_completions WHERE request_edits IS NOT NULL')?.n).toBe(0)
          const seqs = records.map((record) => record.seq)
          const expected = await servedOutputs(v3.cold, seqs)
          const actual = await servedOutputs(v4.cold, seqs)
          expect(actual.length).toBe(expected.length)
          for (const [i, value] of actual.entries()) expect(value, `${key}: reader output ${i}`).toBe(expected[i])
          // And what was sent: the bodies read back exactly.
          for (const [i, input] of inputs.entries()) expect(await v4.cold().requestText(i)).toBe(input.request_text)
          expect(v4.writer.stats().text_bytes).toBeLessThanOrEqual(v3.writer.stats().text_bytes)
        }
      }),
      { numRuns: 12 },
    )
    // Replayed reasoning through vLLM codes nearly every turn after the first; without a rename nothing is coded.
    expect(coded['vllm+reasoning']).toBeGreaterThanOrEqual(2 * 12)
    expect(coded.sglang ?? 0).toBe(0)
    expect(coded['sglang+reasoning'] ?? 0).toBe(0)
  }, 240_000)

  it('a session that replays its reasoning stores its request text about once (bench:long-session shape)', async () => {
    const TURNS = 120
    const line = 'src/config/loader.ts:118: export function loadConfig(path: string): Config { // reads and validates\n'
    const messages: Record<string, unknown>[] = [
      { role: 'system', content: `You are a coding agent.\n${'Follow the repository conventions. '.repeat(120)}` },
      { role: 'user', content: 'Investigate why config loading fails and fix it.' },
    ]
    const tools = [{ type: 'function', function: { name: 'run_shell_command', parameters: { type: 'object' } } }]
    const inputs: CompletionInput[] = []
    let prompt: number[] = Array.from({ length: 900 }, (_, i) => i)
    let finalBody = ''
    for (let turn = 0; turn < TURNS; turn++) {
      finalBody = JSON.stringify({ model: 'bench', messages, tools })
      const parsed = JSON.parse(finalBody) as ChatRequest
      const options = { kind: 'vllm' as const, servedModel: null }
      const engineBody = buildEngineRequest(parsed, options)
      const requestText = engineRequestSplice(engineBody, { request: parsed, body: parsed, text: finalBody }, options).text
      const response = Array.from({ length: 40 }, (_, i) => 100_000 + turn * 40 + i)
      inputs.push(
        completionInput({
          completion_id: `cmpl_${turn}`,
          prompt_token_ids: Uint32Array.from(prompt),
          response_token_ids: Uint32Array.from(response),
          response_logprobs: Float64Array.from(response.map(() => -0.5)),
          request_text: requestText,
          original_text: finalBody,
        }),
      )
      prompt = [...prompt, ...response, ...Array.from({ length: 60 }, (_, i) => 200_000 + turn * 60 + i)]
      messages.push(
        {
          role: 'assistant',
          content: '',
          reasoning_content: `Turn ${turn}: the matches so far do not show the failing call, list more of them.`,
          tool_calls: [
            {
              id: `call_${turn}`,
              type: 'function',
              function: { name: 'run_shell_command', arguments: `{"command":"grep -rn loadConfig src | head -${turn}"}` },
            },
          ],
        },
        { role: 'tool', tool_call_id: `call_${turn}`, content: `turn ${turn}\n${line.repeat(8)}` },
      )
    }
    const ratio = async (requestEdits: boolean) => {
      const { writer, cold } = await logOf(inputs, requestEdits)
      for (const seq of [TURNS - 1, 0, TURNS >> 1]) expect(await cold().requestText(seq)).toBe(inputs[seq]?.request_text)
      return writer.stats().text_bytes / finalBody.length
    }
    // The v3 layout stored every turn's new messages twice: as the harness sent them and as the engine got them.
    expect(await ratio(false)).toBeGreaterThan(1.9)
    expect(await ratio(true)).toBeLessThan(1.15)
  })
})
