/**
 * @module
 * `npm run demo`: the main job on embedded defaults. Starts the stand-in engine (real Qwen3 tokenizer and
 * template, scripted policy) and the edge (`wrangler dev`, real workerd + Durable Object + R2), opens a
 * capture session, runs a small tool-using agent loop through the official `openai` SDK (it really
 * writes the file the model asks for, in a temp dir), then prints what was captured and the trajectory.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import OpenAI from 'openai'
import { startEngine } from '../engine/server.ts'
import { startEdge } from './lib/processes.ts'

const ADMIN_TOKEN = 'demo-admin-token'
const INSTRUCTION = 'create hello.txt containing hi'
const MAX_TURNS = 6

const TOOLS: OpenAI.Chat.Completions.ChatCompletionTool[] = [
  {
    type: 'function',
    function: {
      name: 'write_file',
      description: 'Write a file in the working directory.',
      parameters: {
        type: 'object',
        properties: { file_path: { type: 'string' }, content: { type: 'string' } },
        required: ['file_path', 'content'],
      },
    },
  },
]

const workdir = mkdtempSync(join(tmpdir(), 'rollgate-demo-work-'))
const persistTo = mkdtempSync(join(tmpdir(), 'rollgate-demo-state-'))
const engine = await startEngine({ seed: 17 })
console.log(`engine  ${engine.url}  (stand-in vLLM: Qwen3 tokenizer + chat template, scripted policy)`)
const edge = await startEdge({
  persistTo,
  vars: { ROLLGATE_ADMIN_TOKEN: ADMIN_TOKEN, ROLLGATE_SIGNING_KEY: 'demo-signing-key', ROLLGATE_UPSTREAM_URL: engine.url },
})
console.log(`edge    ${edge.url}  (wrangler dev: workerd, SessionObject DO with SQLite, R2)`)

const admin = (path: string, init: RequestInit = {}) =>
  fetch(`${edge.url}${path}`, { ...init, headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' } })

let exitCode = 0
try {
  const session = (await (
    await admin('/v1/sessions', { method: 'POST', body: JSON.stringify({ task_id: 'demo-hello', metadata: { group_id: 'demo' } }) })
  ).json()) as {
    session_id: string
    token: string
    base_urls: { openai: string }
  }
  console.log(`session ${session.session_id}  (token = API key for the harness)\n`)
  const client = new OpenAI({ baseURL: session.base_urls.openai, apiKey: session.token, maxRetries: 0 })
  const messages: OpenAI.Chat.Completions.ChatCompletionMessageParam[] = [
    { role: 'system', content: `You are a coding agent. Working directory: ${workdir}` },
    { role: 'user', content: INSTRUCTION },
  ]
  for (let turn = 0; turn < MAX_TURNS; turn++) {
    const stream = turn % 2 === 1
    const response = stream
      ? await collectStream(await client.chat.completions.create({ model: 'demo-agent', messages, tools: TOOLS, stream: true }))
      : (await client.chat.completions.create({ model: 'demo-agent', messages, tools: TOOLS })).choices[0]!.message
    messages.push(response as OpenAI.Chat.Completions.ChatCompletionMessageParam)
    const calls = (response.tool_calls ?? []).filter((call) => call.type === 'function')
    console.log(
      `turn ${turn + 1} (${stream ? 'streamed' : 'json'}): ${calls.length ? calls.map((c) => `${c.function.name}(${c.function.arguments})`).join(', ') : JSON.stringify(response.content)}`,
    )
    if (calls.length === 0) break
    for (const call of calls) {
      const args = JSON.parse(call.function.arguments) as { file_path: string; content: string }
      const path = args.file_path.startsWith('/') ? args.file_path : join(workdir, args.file_path)
      if (!path.startsWith(workdir)) throw new Error(`refusing to write outside the work dir: ${path}`)
      writeFileSync(path, args.content)
      messages.push({ role: 'tool', tool_call_id: call.id, content: `Wrote ${args.content.length} bytes to ${args.file_path}` })
    }
  }
  const written = readFileSync(join(workdir, 'hello.txt'), 'utf8')
  console.log(`\nhello.txt contains ${JSON.stringify(written)}`)

  const { completions } = (await (await admin(`/v1/sessions/${session.session_id}/completions`)).json()) as {
    completions: {
      seq: number
      status: string
      stream: boolean
      prompt_token_ids: number[]
      prompt_delta: { shared_prefix_len: number } | null
      response_token_ids: number[]
      response_logprobs: number[] | null
      finish_reason: string
    }[]
  }
  console.log('\ncaptured completions:')
  for (const record of completions) {
    console.log(
      `  #${record.seq} ${record.status} ${record.stream ? 'stream' : 'json  '} prompt ${record.prompt_token_ids.length} tokens (${record.prompt_delta ? `${record.prompt_delta.shared_prefix_len} shared with #${(record.prompt_delta as { parent_seq?: number }).parent_seq}` : 'stored whole'}), sampled ${record.response_token_ids.length} tokens with ${record.response_logprobs?.length ?? 0} logprobs, finish ${record.finish_reason}`,
    )
  }
  const info = (await (await admin(`/v1/sessions/${session.session_id}`)).json()) as { storage: Record<string, number> }
  console.log(`\nstorage: ${JSON.stringify(info.storage)}`)
  if (written !== 'hi' || completions.length < 2 || completions.some((r) => r.status !== 'ok')) {
    console.error('demo failed: the agent did not complete the task through the edge')
    exitCode = 1
  } else {
    console.log('\ndemo ok: every model call went through the edge and was captured token-exactly')
  }
} catch (error) {
  console.error(error)
  exitCode = 1
} finally {
  await edge.stop()
  await engine.close()
  rmSync(workdir, { recursive: true, force: true })
  rmSync(persistTo, { recursive: true, force: true })
}
process.exit(exitCode)

async function collectStream(stream: AsyncIterable<OpenAI.Chat.Completions.ChatCompletionChunk>) {
  let content = ''
  const calls: OpenAI.Chat.Completions.ChatCompletionMessageFunctionToolCall[] = []
  for await (const chunk of stream) {
    const delta = chunk.choices[0]?.delta
    if (!delta) continue
    content += delta.content ?? ''
    for (const call of delta.tool_calls ?? []) {
      calls[call.index] ??= { id: '', type: 'function', function: { name: '', arguments: '' } }
      const slot = calls[call.index]!
      if (call.id) slot.id = call.id
      if (call.function?.name) slot.function.name = call.function.name
      slot.function.arguments += call.function?.arguments ?? ''
    }
  }
  return { role: 'assistant' as const, content: content || null, ...(calls.length ? { tool_calls: calls } : {}) }
}
