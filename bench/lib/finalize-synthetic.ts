/**
 * @module
 * The session object's plain classes in Node on a synthetic agent session shaped like `bench:long-session`'s
 * (a tool call and a text tool result every turn, the edge's served body = the harness's with the model
 * renamed and capture keys appended, sent as a delta): records every turn through `CompletionLog.record`
 * (per-call CPU time, first and last turns), then finalizes prefix_merging (`trajectoryChunks`) and reports
 * its wall and CPU time. No Miniflare: an A/B tool for the plain classes (run with `--cpu-prof` to profile).
 *
 * Usage: node bench/lib/finalize-synthetic.ts [turns=1000] [result chars=600] [prompt growth tokens=150]
 * Last line: one JSON object.
 */
import { cpuUsage } from 'node:process'
import { MemoryBucket, nodeSql } from '../../scripts/lib/node-sqlite.ts'
import { BlobStore } from '../../src/durable/session/blob-store.ts'
import { CompletionLog } from '../../src/durable/session/completion-log.ts'
import type { CompletionInput } from '../../src/durable/session/record.ts'
import { ensureSchema } from '../../src/durable/session/schema.ts'
import { diffText } from '../../src/durable/session/text-delta.ts'
import { trajectoryChunks } from '../../src/durable/session/trajectory-stream.ts'
import { upperMedian as median } from './stats.ts'

const [turns = 1000, resultChars = 600, growth = 150] = process.argv.slice(2).map(Number)
const TOOLS = [{ type: 'function', function: { name: 'run_shell_command', parameters: { type: 'object', properties: {} } } }]
const LINE = 'src/config/loader.ts:118: export function loadConfig(path: string): Config { // reads and validates\n'

const cpuMs = (from: NodeJS.CpuUsage) => {
  const used = cpuUsage(from)
  return (used.user + used.system) / 1000
}

const { sql } = nodeSql()
ensureSchema(sql)
const log = new CompletionLog(sql, new BlobStore(new MemoryBucket()), 'ses_synth')
const messages: Record<string, unknown>[] = [
  { role: 'system', content: 'You are a coding agent.' },
  { role: 'user', content: 'Find where the config is loaded.' },
]
const prompt: number[] = Array.from({ length: 1200 }, (_, i) => (i * 7919) % 150000)
const captureCpu: number[] = []
for (let turn = 0; turn < turns; turn++) {
  const original = JSON.stringify({ model: 'gpt-agent', messages, tools: TOOLS, stream: true })
  const served = `${original.slice(0, -1)},"logprobs":true,"return_tokens_as_token_ids":true}`
  const response = Array.from({ length: 30 }, (_, i) => (turn * 1000 + i * 31) % 150000)
  response[29] = 151645
  const input: CompletionInput = {
    completion_id: `cmpl_${turn}`,
    timestamp: new Date(1_700_000_000_000 + turn * 1000).toISOString(),
    api: 'openai_chat',
    agent: 'main',
    model_requested: 'gpt-agent',
    model_used: 'Qwen/Qwen3-8B',
    stream: true,
    status: 'ok',
    prompt_token_ids: Uint32Array.from(prompt),
    response_token_ids: Uint32Array.from(response),
    response_logprobs: Float64Array.from(response, (_, i) => -i / 64),
    finish_reason: 'tool_calls',
    stop_reason: null,
    request_text: '',
    request_delta: diffText(original, served),
    original_text: original,
    response_message: { role: 'assistant', content: null },
    usage: null,
    warnings: [],
    error: null,
    timing: { started_at: new Date(0).toISOString(), upstream_ms: 1, total_ms: 2 },
    provenance: { upstream_kind: 'vllm', engine_prompt_ids: true },
    metadata: {},
  } as unknown as CompletionInput
  const before = cpuUsage()
  await log.record(input)
  captureCpu.push(cpuMs(before))
  const call = {
    id: `call_${turn}`,
    type: 'function',
    function: { name: 'run_shell_command', arguments: `{"command":"grep -n x${turn}"}` },
  }
  messages.push({ role: 'assistant', content: null, tool_calls: [call] })
  messages.push({ role: 'tool', tool_call_id: call.id, content: LINE.repeat(Math.ceil(resultChars / LINE.length)).slice(0, resultChars) })
  prompt.push(...response, 198)
  for (let i = 0; i < growth; i++) prompt.push((turn * 77 + i) % 150000)
}

const session = { session_id: 'ses_synth', task_id: null, metadata: {} }
const wall = performance.now()
const cpu = cpuUsage()
let bytes = 0
for await (const chunk of trajectoryChunks(log, { builder: 'prefix_merging', config: { preset: 'tolerant' } }, session)) {
  bytes += chunk.length
}
console.log(
  JSON.stringify({
    turns,
    final_prompt_tokens: prompt.length,
    capture_cpu_ms_first10_p50: Math.round(median(captureCpu.slice(0, 10)) * 100) / 100,
    capture_cpu_ms_last10_p50: Math.round(median(captureCpu.slice(-10)) * 100) / 100,
    capture_cpu_ms_last100_p50: Math.round(median(captureCpu.slice(-100)) * 100) / 100,
    finalize_prefix_merging_ms: Math.round(performance.now() - wall),
    finalize_prefix_merging_cpu_ms: Math.round(cpuMs(cpu)),
    trajectory_bytes: bytes,
  }),
)
