/**
 * @module
 * `npm run bench:long-session`: one long agent session through the real edge (the bundled Worker in
 * Miniflare/workerd, SessionObject SQLite, R2 emulation) against the stand-in engine (real Qwen3
 * tokenizer and template, `script` policy: a tool call every turn, a text tool result back, so the
 * prompt grows every turn and prefix_merging yields one trace).
 *
 * Flags: `--turns` (200), `--result-tokens` (≈ tokens of tool output per turn, 500), `--skip-per-request`.
 * Figures: edge cost per call (Server-Timing prepare + capture) over the first and last 10 turns; stored
 * token bytes ÷ floor (4 B × final prompt + 8 B × output tokens); stored request text ÷ final request
 * body; finalize and GET trajectory times (first byte and total) for both builders; workerd RSS after
 * the turns and at its peak after finalize (sampled every 50 ms). Last line: one JSON object.
 */
import { execFileSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { startEngine } from '../engine/server.ts'
import { startMiniflareEdge } from '../scripts/lib/miniflare-edge.ts'

const { values } = parseArgs({
  options: {
    turns: { type: 'string', default: '200' },
    'result-tokens': { type: 'string', default: '500' },
    'skip-per-request': { type: 'boolean', default: false },
  },
})
const TURNS = Number(values.turns)
const RESULT_TOKENS = Number(values['result-tokens'])
const ADMIN = 'bench-admin-token'
const TOOLS = [
  {
    type: 'function',
    function: {
      name: 'run_shell_command',
      description: 'Run a shell command.',
      parameters: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] },
    },
  },
]
/** ≈ 25 Qwen3 tokens per line. */
const OUTPUT_LINE = 'src/config/loader.ts:118: export function loadConfig(path: string): Config { // reads and validates\n'
const script = Array.from({ length: TURNS }, (_, turn) => ({
  tool_calls: [{ name: 'run_shell_command', arguments: { command: `grep -n loadConfig src -r | head -${turn + 10}` } }],
}))

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)] ?? 0
}
const round = (value: number, digits = 2) => Math.round(value * 10 ** digits) / 10 ** digits

/** RSS (MB) of the workerd processes this bench started (children of this process). */
function workerdRssMb(): number {
  try {
    const out = execFileSync('ps', ['-o', 'rss=,comm=', '--ppid', String(process.pid)], { encoding: 'utf8' })
    let kb = 0
    for (const line of out.split('\n')) if (line.includes('workerd')) kb += Number(line.trim().split(/\s+/)[0])
    return round(kb / 1024, 0)
  } catch {
    return 0
  }
}

/** Run `work` while sampling workerd RSS; returns its result and the peak. */
async function withPeakRss<T>(work: () => Promise<T>): Promise<{ result: T; peakMb: number }> {
  let peakMb = workerdRssMb()
  const timer = setInterval(() => {
    peakMb = Math.max(peakMb, workerdRssMb())
  }, 50)
  try {
    const result = await work()
    return { result, peakMb: Math.max(peakMb, workerdRssMb()) }
  } finally {
    clearInterval(timer)
  }
}

function parseTiming(header: string | null): Record<string, number> {
  const out: Record<string, number> = {}
  for (const part of (header ?? '').split(',')) {
    const match = /^\s*(\w+);dur=([\d.]+)/.exec(part)
    if (match) out[match[1] as string] = Number(match[2])
  }
  return out
}

const engine = await startEngine({ seed: 3, policy: 'script', script, maxModelLen: 1_048_576 })
const persistTo = mkdtempSync(join(tmpdir(), 'rollgate-bench-long-'))
const edge = await startMiniflareEdge({
  persistTo,
  vars: { ROLLGATE_ADMIN_TOKEN: ADMIN, ROLLGATE_SIGNING_KEY: 'k', ROLLGATE_UPSTREAM_URL: engine.url },
})
const admin = { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' }
try {
  const session = (await (await fetch(`${edge.url}/v1/sessions`, { method: 'POST', headers: admin, body: '{}' })).json()) as {
    session_id: string
    token: string
  }
  const messages: Record<string, unknown>[] = [
    { role: 'system', content: `You are a coding agent.\n${'Follow the repository conventions. '.repeat(120)}` },
    { role: 'user', content: 'Investigate why config loading fails and fix it.' },
  ]
  const edgeMs: number[] = []
  let finalBodyBytes = 0
  let finalPromptTokens = 0
  const started = performance.now()
  for (let turn = 0; turn < TURNS; turn++) {
    const body = JSON.stringify({ model: 'bench', messages, tools: TOOLS, chat_template_kwargs: { enable_thinking: false } })
    finalBodyBytes = Buffer.byteLength(body)
    const response = await fetch(`${edge.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${session.token}`, 'content-type': 'application/json' },
      body,
    })
    if (response.status !== 200) throw new Error(`turn ${turn}: ${response.status} ${await response.text()}`)
    const timing = parseTiming(response.headers.get('server-timing'))
    edgeMs.push((timing.prepare ?? 0) + (timing.capture ?? 0))
    const answer = (await response.json()) as {
      usage: { prompt_tokens: number }
      choices: { message: { content: string | null; tool_calls?: { id: string; function: { name: string; arguments: string } }[] } }[]
    }
    finalPromptTokens = answer.usage.prompt_tokens
    const message = answer.choices[0]?.message
    const call = message?.tool_calls?.[0]
    if (!message || !call) throw new Error(`turn ${turn}: no tool call`)
    messages.push({ role: 'assistant', content: message.content, tool_calls: message.tool_calls })
    const lines = Math.max(1, Math.round(RESULT_TOKENS / 25))
    messages.push({ role: 'tool', tool_call_id: call.id, content: `turn ${turn}\n${OUTPUT_LINE.repeat(lines)}` })
    if ((turn + 1) % 50 === 0) console.log(`turn ${turn + 1}: prompt ${finalPromptTokens} tokens, edge ${edgeMs.at(-1)?.toFixed(2)} ms`)
  }
  const turnsSeconds = (performance.now() - started) / 1000
  const rssAfterTurns = workerdRssMb()
  const info = (await (await fetch(`${edge.url}/v1/sessions/${session.session_id}`, { headers: admin })).json()) as {
    storage: { unique_prompt_tokens: number; output_tokens: number; token_bytes: number; text_bytes: number; prompt_tokens_total: number }
  }
  const s = info.storage
  const floor = 4 * finalPromptTokens + 8 * s.output_tokens

  const builders = values['skip-per-request'] ? ['prefix_merging'] : ['prefix_merging', 'per_request']
  const finalize: Record<string, unknown> = {}
  let peakRss = rssAfterTurns
  for (const builder of builders) {
    const { result, peakMb } = await withPeakRss(async () => {
      const t0 = performance.now()
      const response = await fetch(`${edge.url}/v1/sessions/${session.session_id}/finalize`, {
        method: 'POST',
        headers: admin,
        body: JSON.stringify({ builder }),
      })
      const text = await response.text()
      const ms = performance.now() - t0
      const t1 = performance.now()
      const get = await fetch(`${edge.url}/v1/sessions/${session.session_id}/trajectory?builder=${builder}`, { headers: admin })
      const reader = get.body?.getReader()
      let firstByteMs: number | null = null
      let bytes = 0
      if (reader) {
        for (;;) {
          const { done, value } = await reader.read()
          if (done) break
          firstByteMs ??= performance.now() - t1
          bytes += value.byteLength
        }
      }
      return {
        finalize_status: response.status,
        finalize_ms: round(ms, 0),
        finalize_answer: response.status === 200 ? JSON.parse(text) : text.slice(0, 200),
        get_status: get.status,
        get_first_byte_ms: firstByteMs === null ? null : round(firstByteMs, 0),
        get_total_ms: round(performance.now() - t1, 0),
        get_bytes: bytes,
      }
    })
    peakRss = Math.max(peakRss, peakMb)
    finalize[builder] = { ...result, workerd_rss_peak_mb: peakMb }
    console.log(`${builder}: ${JSON.stringify(finalize[builder])}`)
  }

  const first = edgeMs.slice(0, 10)
  const last = edgeMs.slice(-10)
  const figures = {
    turns: TURNS,
    result_tokens: RESULT_TOKENS,
    turns_seconds: round(turnsSeconds, 1),
    final_prompt_tokens: finalPromptTokens,
    final_request_body_bytes: finalBodyBytes,
    edge_ms_per_call_first10_p50: round(median(first)),
    edge_ms_per_call_last10_p50: round(median(last)),
    unique_prompt_tokens_stored: s.unique_prompt_tokens,
    unique_over_final_prompt: round(s.unique_prompt_tokens / finalPromptTokens),
    output_tokens: s.output_tokens,
    floor_bytes: floor,
    token_bytes: s.token_bytes,
    token_bytes_over_floor: round(s.token_bytes / floor),
    request_text_bytes: s.text_bytes,
    request_text_over_final_body: round(s.text_bytes / finalBodyBytes),
    finalize,
    workerd_rss_after_turns_mb: rssAfterTurns,
    workerd_rss_peak_after_finalize_mb: peakRss,
  }
  console.log(JSON.stringify(figures))
} finally {
  await edge.stop()
  await engine.close()
  rmSync(persistTo, { recursive: true, force: true })
}
