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
import type { CompletionRecord } from '../../../src/contract/completion-record.ts'
import { BlobStore } from '../../../src/durable/session/blob-store.ts'
import { CompletionLog } from '../../../src/durable/session/completion-log.ts'
import type { CompletionInput } from '../../../src/durable/session/record.ts'
import { streamRunResult } from '../../../src/durable/session/result-stream.ts'
import { ensureSchema } from '../../../src/durable/session/schema.ts'
import type { LifecycleState } from '../../../src/durable/session/session-lifecycle.ts'
import { type StreamRequest, trajectoryChunks } from '../../../src/durable/session/trajectory-stream.ts'
import { LogRecords } from '../../../src/durable/session/log-records.ts'
import { buildEngineRequest, engineRequestSplice } from '../../../src/normalize/engine/engine-request.ts'
import type { ChatRequest } from '../../../src/normalize/types.ts'
import { completionInput } from '../../support/records.ts'
import { type SimOptions, simulateSession } from '../reconstruct-support/simulate-tokens.ts'

const SESSION = { session_id: 'ses_edits', task_id: 'task-edits', metadata: { group_id: 'g1' } }

/** How the harness writes its body and which engine gets it. */
type Style = 'vllm' | 'sglang' | 'spaced'

/** A message as a harness sends it back: replayed reasoning, a tool call on assistant turns with tools, long tool output. */
function harnessMessage(message: Record<string, unknown>, index: number, reasoning: boolean): Record<string, unknown> {
  const content = String(message.content)
  if (message.role === 'assistant') {
    return {
      role: 'assistant',
      content,
      ...(reasoning ? { reasoning_content: `Let me think about ${content} first: the last output does not show it yet. é😀` } : {}),
      tool_calls: [
        {
          id: `call_${index}`,
          type: 'function',
          function: { name: 'bash', arguments: JSON.stringify({ command: `grep -rn ${content}` }) },
        },
      ],
    }
  }
  if (message.role === 'tool') return { role: 'tool', tool_call_id: `call_${index - 1}`, content: `src/a.ts:1: ${content}\n`.repeat(12) }
  return message
}

/** The record's call as the edge would capture it: the harness's body, and the engine body made from it. */
function edgeInput(record: CompletionRecord, style: Style, reasoning: boolean): CompletionInput {
  const messages = (record.request.messages as Record<string, unknown>[]).map((m, i) => harnessMessage(m, i, reasoning))
  const harness = { model: 'qwen3', messages, ...(record.request.tools ? { tools: record.request.tools } : {}), stream: true }
  const originalText = style === 'spaced' ? JSON.stringify(harness, null, 1) : JSON.stringify(harness)
  const parsed = JSON.parse(originalText) as ChatRequest
  const options = { kind: style === 'sglang' ? ('sglang' as const) : ('vllm' as const), servedModel: 'Qwen/Qwen3-8B' }
  const engineBody = buildEngineRequest(parsed, options)
  const requestText = engineRequestSplice(engineBody, { request: parsed, body: parsed, text: originalText }, options).text
  return completionInput({
    completion_id: record.completion_id,
    timestamp: record.timestamp,
    agent: record.agent,
    status: record.status,
    prompt_token_ids: record.status === 'ok' || record.prompt_token_ids.length ? Uint32Array.from(record.prompt_token_ids) : null,
    response_token_ids: Uint32Array.from(record.response_token_ids),
    response_logprobs: record.response_logprobs === null ? null : Float64Array.from(record.response_logprobs),
    finish_reason: record.finish_reason,
    stop_reason: record.stop_reason,
    request_text: requestText,
    original_text: originalText,
    response_message: record.response_message,
    metadata: record.metadata,
  })
}

async function logOf(inputs: readonly CompletionInput[], requestEdits: boolean) {
  const { sql } = nodeSql()
  ensureSchema(sql)
  const bucket = new MemoryBucket()
  const writer = new CompletionLog(sql, new BlobStore(bucket), SESSION.session_id, { requestEdits })
  for (const input of inputs) await writer.record(input)
  return { sql, writer, cold: () => new CompletionLog(sql, new BlobStore(bucket), SESSION.session_id) }
}

async function text(chunks: AsyncIterable<string>): Promise<string> {
  let out = ''
  for await (const chunk of chunks) out += chunk
  return out
}

const BUILDS: StreamRequest[] = [
  { builder: 'prefix_merging', config: { preset: 'tolerant' } },
  { builder: 'prefix_merging', config: { preset: 'exact' } },
  { builder: 'prefix_merging', config: { preset: 'strict' } },
  { builder: 'per_request' },
  ...(['session_result', 'nemo-gym', 'sft', 'sft-tokens'] as const).map(
    (format): StreamRequest => ({ builder: 'prefix_merging', config: { preset: 'tolerant' }, format }),
  ),
]

function runState(): LifecycleState {
  return {
    spec: {
      task_id: SESSION.task_id,
      run_id: 'run-1',
      index: 0,
      timeout_seconds: 600,
      agent_timeout_seconds: null,
      builder: { strategy: 'prefix_merging', config: { preset: 'tolerant' } },
      evaluator: null,
      metadata: SESSION.metadata,
      route: 'direct',
    },
    build: true,
    agent_result: { status: 'completed', timeout_source: null },
    built_through_seq: null,
    final_status: null,
    error: null,
    runner_id: null,
  } as unknown as LifecycleState
}

/** Everything a reader serves from `log`, as text: GET completion(s), each build and export, a rollout result. */
async function served(log: () => CompletionLog, seqs: readonly number[]): Promise<string[]> {
  const out: string[] = [JSON.stringify(await log().all())]
  const reader = log()
  // Cold reads in an order that is not the chain's.
  for (const seq of [...seqs].reverse()) out.push(JSON.stringify(await reader.get(seq)), await log().requestText(seq))
  for (const request of BUILDS) out.push(await text(trajectoryChunks(log(), request, SESSION)))
  const result = await streamRunResult(SESSION.session_id, log(), runState(), {
    register_to_init_queue_ms: 0,
    init_ms: 0,
    run_ms: 1,
    postrun_ms: 0,
  })
  out.push(await text(result.chunks))
  // The streamed build's own loads (messages from the parent and the message index) against the whole bodies.
  const source = new LogRecords(log())
  for (const record of await source.open()) {
    await source.load(record)
    out.push(JSON.stringify(record.request.messages))
    source.reduce(record)
  }
  return out
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
          const expected = await served(v3.cold, seqs)
          const actual = await served(v4.cold, seqs)
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
