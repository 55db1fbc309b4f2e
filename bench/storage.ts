/**
 * @module
 * `npm run bench:storage`: a 50-turn agent session with growing context, through the real edge
 * (Miniflare/workerd, SessionObject SQLite) and the stand-in engine (real Qwen3 template + tokenizer).
 * Prints stored bytes ÷ floor, floor = 4 B per unique prompt token + 8 B per output token (target ≤ 1.2),
 * next to what storing every prompt whole (Polar) would take. Last line: one JSON object.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import OpenAI from 'openai'
import { startEngine } from '../engine/server.ts'
import { parseArgs } from '../scripts/lib/cli-args.ts'
import { startMiniflareEdge } from '../scripts/lib/miniflare-edge.ts'

parseArgs(
  { options: {} },
  'A 50-turn agent session through the edge (Miniflare) and the stand-in engine: stored bytes ÷ the token\n' +
    'floor (target ≤ 1.2) next to storing every prompt whole. Last line: one JSON object.',
)

const TURNS = 50
const ADMIN = 'bench-admin-token'
const TOOLS: OpenAI.Chat.Completions.ChatCompletionTool[] = [
  {
    type: 'function',
    function: {
      name: 'run_shell_command',
      description: 'Run a shell command.',
      parameters: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] },
    },
  },
]
const OUTPUT_LINE = 'src/config/loader.ts:118: export function loadConfig(path: string): Config { // reads and validates\n'

const engine = await startEngine({ seed: 3 })
const persistTo = mkdtempSync(join(tmpdir(), 'rollgate-bench-storage-'))
const edge = await startMiniflareEdge({
  persistTo,
  vars: { ROLLGATE_ADMIN_TOKEN: ADMIN, ROLLGATE_SIGNING_KEY: 'k', ROLLGATE_UPSTREAM_URL: engine.url },
})
try {
  const session = (await (
    await fetch(`${edge.url}/v1/sessions`, { method: 'POST', headers: { authorization: `Bearer ${ADMIN}` }, body: '{}' })
  ).json()) as { session_id: string; token: string; base_urls: { openai: string } }
  const client = new OpenAI({ baseURL: session.base_urls.openai, apiKey: session.token, maxRetries: 0 })
  const messages: OpenAI.Chat.Completions.ChatCompletionMessageParam[] = [
    { role: 'system', content: `You are a coding agent.\n${'Follow the repository conventions. '.repeat(120)}` },
    { role: 'user', content: 'Investigate why config loading fails and fix it.' },
  ]
  for (let turn = 0; turn < TURNS; turn++) {
    const response = await client.chat.completions.create({
      model: 'bench',
      messages,
      tools: TOOLS,
      chat_template_kwargs: { enable_thinking: false },
    } as OpenAI.Chat.Completions.ChatCompletionCreateParamsNonStreaming)
    const message = response.choices[0]!.message
    // Keep the history growing like a real agent: its answer, then ~300 tokens of tool output.
    const callId = `call_${turn}`
    messages.push({
      role: 'assistant',
      content: null,
      tool_calls: [
        {
          id: callId,
          type: 'function',
          function: { name: 'run_shell_command', arguments: JSON.stringify({ command: `grep -n loadConfig src -r | head -${turn + 10}` }) },
        },
      ],
    })
    messages.push({ role: 'tool', tool_call_id: callId, content: `${message.content ?? ''}\n${OUTPUT_LINE.repeat(12)}` })
  }
  const info = (await (
    await fetch(`${edge.url}/v1/sessions/${session.session_id}`, { headers: { authorization: `Bearer ${ADMIN}` } })
  ).json()) as {
    storage: {
      completions: number
      unique_prompt_tokens: number
      output_tokens: number
      token_bytes: number
      text_bytes: number
      metadata_bytes: number
      prompt_tokens_total: number
    }
  }
  const s = info.storage
  const floor = 4 * s.unique_prompt_tokens + 8 * s.output_tokens
  const wholeTokenBytes = 4 * s.prompt_tokens_total + 8 * s.output_tokens
  const figures = {
    turns: TURNS,
    completions: s.completions,
    prompt_tokens_total: s.prompt_tokens_total,
    unique_prompt_tokens: s.unique_prompt_tokens,
    output_tokens: s.output_tokens,
    floor_bytes: floor,
    token_bytes: s.token_bytes,
    token_bytes_over_floor: Math.round((s.token_bytes / floor) * 1000) / 1000,
    text_bytes: s.text_bytes,
    metadata_bytes: s.metadata_bytes,
    total_bytes: s.token_bytes + s.text_bytes + s.metadata_bytes,
    total_bytes_over_floor: Math.round(((s.token_bytes + s.text_bytes + s.metadata_bytes) / floor) * 1000) / 1000,
    whole_prompt_token_bytes: wholeTokenBytes,
    whole_over_floor: Math.round((wholeTokenBytes / floor) * 100) / 100,
  }
  console.log(`50-turn session: ${s.prompt_tokens_total} prompt tokens sent, ${s.unique_prompt_tokens} unique, ${s.output_tokens} sampled`)
  console.log(`token storage ${s.token_bytes} B = ${figures.token_bytes_over_floor} × floor (${floor} B); target ≤ 1.2`)
  console.log(`with request bodies (text deltas) and metadata: ${figures.total_bytes} B = ${figures.total_bytes_over_floor} × floor`)
  console.log(`storing every prompt whole (Polar): ${wholeTokenBytes} B of tokens = ${figures.whole_over_floor} × floor`)
  console.log(JSON.stringify(figures))
} finally {
  await edge.stop()
  await engine.close()
  rmSync(persistTo, { recursive: true, force: true })
}
