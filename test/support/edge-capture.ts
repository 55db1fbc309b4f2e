/**
 * @module
 * Simulated sessions captured the way the edge captures them (the harness's body as sent, the engine body
 * made from it by `buildEngineRequest`), and everything the readers serve from a log as text: the storage
 * layout tests compare those outputs byte for byte (v3 against v4 layout, and a session written by an older
 * version against what that version served). Used by `test/fixtures/session-v3/generate.ts` too, so it
 * imports nothing the v3 code (44a1eaa) lacks.
 */
import type { CompletionRecord } from '../../src/contract/completion-record.ts'
import type { CompletionLog } from '../../src/durable/session/completion-log.ts'
import { LogRecords } from '../../src/durable/session/log-records.ts'
import type { CompletionInput } from '../../src/durable/session/record.ts'
import { streamRunResult } from '../../src/durable/session/result-stream.ts'
import type { LifecycleState } from '../../src/durable/session/session-lifecycle.ts'
import { type StreamRequest, trajectoryChunks } from '../../src/durable/session/trajectory-stream.ts'
import { buildEngineRequest, engineRequestSplice } from '../../src/normalize/engine/engine-request.ts'
import type { ChatRequest } from '../../src/normalize/types.ts'
import { completionInput } from './records.ts'

export const CAPTURE_SESSION = { session_id: 'ses_edits', task_id: 'task-edits', metadata: { group_id: 'g1' } }

/** How the harness writes its body and which engine gets it. */
export type CaptureStyle = 'vllm' | 'sglang' | 'spaced'

/** A message as a harness sends it back: replayed reasoning, a tool call on assistant turns, long tool output. */
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
export function edgeInput(record: CompletionRecord, style: CaptureStyle, reasoning: boolean): CompletionInput {
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
    timing: { started_at: record.timestamp, upstream_ms: 1, total_ms: 2 },
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
      task_id: CAPTURE_SESSION.task_id,
      run_id: 'run-1',
      index: 0,
      timeout_seconds: 600,
      agent_timeout_seconds: null,
      builder: { strategy: 'prefix_merging', config: { preset: 'tolerant' } },
      evaluator: null,
      metadata: CAPTURE_SESSION.metadata,
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

/**
 * Everything the readers serve from the log `log()` opens (a new object each time: cold reads), as text:
 * GET completion(s) and the bodies, each build and export format, a rollout result, and the requests the
 * streamed build loads (from the parent's messages and the message index).
 */
export async function servedOutputs(log: () => CompletionLog, seqs: readonly number[]): Promise<string[]> {
  const out: string[] = [JSON.stringify(await log().all())]
  const reader = log()
  // Cold reads in an order that is not the chain's.
  for (const seq of [...seqs].reverse()) out.push(JSON.stringify(await reader.get(seq)), await log().requestText(seq))
  for (const request of BUILDS) out.push(await text(trajectoryChunks(log(), request, CAPTURE_SESSION)))
  const timing = { register_to_init_queue_ms: 0, init_ms: 0, run_ms: 1, postrun_ms: 0 }
  const result = await streamRunResult(CAPTURE_SESSION.session_id, log(), runState(), timing)
  out.push(await text(result.chunks))
  const source = new LogRecords(log())
  for (const record of await source.open()) {
    await source.load(record)
    out.push(JSON.stringify(record.request.messages))
    source.reduce(record)
  }
  return out
}
