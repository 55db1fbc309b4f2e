/**
 * `rollgate generate-sft` in bounded memory: against a stand-in edge (127.0.0.1, a free port) whose task
 * results are ~120 MB of JSON (long sessions' traces, each result's evaluation after its traces, as the edge
 * streams them) and whose accepted session's SFT export is ~100 MB, the CLI under a 128 MB heap reads the
 * results one session at a time (traces skipped, never parsed) and appends the exports to the JSONL files
 * as they arrive: the files hold exactly the rows (blank lines dropped, a last row without its newline
 * ended), the attempts' lines and the summary are those of the small-session path.
 */
import { spawn } from 'node:child_process'
import { createHash } from 'node:crypto'
import { once } from 'node:events'
import { createReadStream, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { createServer, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { childOutput } from '../support/child-output.ts'

const ROOT = join(import.meta.dirname, '../..')
const TASK_FILE = join(ROOT, 'tasks/fix-stats/task.json')
/** A long session's trace (~1 MB of JSON: 150k prompt ids, a logprob per response token). */
const TRACE = JSON.stringify({
  prompt_ids: Array.from({ length: 150_000 }, (_, i) => (i * 7919) % 151_000),
  response_ids: [1, 2, 3],
  loss_mask: [1, 1, 1],
  prompt_messages: [{ role: 'user', content: 'say "hi" \\ ] } [' }],
  response_logprobs: [-0.5, -0.25, -0.125],
  reward: 0.25,
})
const TRACES_PER_RESULT = 60
const ROW = `${JSON.stringify({ messages: [{ role: 'assistant', content: 'x'.repeat(2000) }] })}`
const SFT_ROWS = 50_000
const TOKEN_ROW = JSON.stringify({ input_ids: Array.from({ length: 500 }, (_, i) => i), loss_mask: [1] })
const TOKEN_ROWS = 2_000

let server: ReturnType<typeof createServer>
let edge = ''
let scratch = ''
const digests = { sft: '', tokens: '' }
let submittedTaskId = ''

async function write(res: ServerResponse, text: string) {
  if (!res.write(text)) await once(res, 'drain')
}

/** The task's results: two long sessions (accepted, rejected by its evaluation) and one that failed. */
async function results(res: ServerResponse) {
  await write(res, `{"task_id":${JSON.stringify(submittedTaskId)},"status":"completed","results":[`)
  for (const [index, [id, reward]] of [
    ['s-ok', 1],
    ['s-low', 0],
  ].entries()) {
    await write(
      res,
      `${index ? ',' : ''}{"session_id":"${id}","task_id":${JSON.stringify(submittedTaskId)},"status":"COMPLETED","trajectory":{"status":"COMPLETED","traces":[`,
    )
    for (let i = 0; i < TRACES_PER_RESULT; i++) await write(res, `${i ? ',' : ''}${TRACE}`)
    await write(
      res,
      `],"metadata":{"record_count":3,"evaluation":{"strategy":"test_on_output","outcome_reward":${reward}}},"error":null},"error":null,"metadata":{}}`,
    )
  }
  await write(
    res,
    `,{"session_id":"s-err","task_id":${JSON.stringify(submittedTaskId)},"status":"ERROR","trajectory":{"status":"ERROR","traces":[],"metadata":{},"error":"agent failed"},"error":"agent failed","metadata":{}}`,
  )
  res.end(`],"warnings":[]}`)
}

/** An NDJSON export with the edge's leading space, a blank line and no newline after its last row. */
async function exportRows(res: ServerResponse, row: string, rows: number, digest: 'sft' | 'tokens') {
  const hash = createHash('sha256')
  await write(res, ' ')
  let batch = ''
  for (let i = 0; i < rows; i++) {
    hash.update(`${row}\n`)
    batch += i === rows - 1 ? row : `${row}\n`
    if (i === 10) batch += ' \n'
    if (batch.length > 1024 * 1024 || i === rows - 1) {
      await write(res, batch)
      batch = ''
    }
  }
  digests[digest] = hash.digest('hex')
  res.end()
}

beforeAll(async () => {
  scratch = mkdtempSync(join(tmpdir(), 'rollgate-sft-stream-'))
  server = createServer(async (req, res) => {
    const url = new URL(req.url ?? '/', 'http://edge')
    if (req.method === 'POST' && url.pathname === '/rollout/task/submit') {
      let body = ''
      for await (const chunk of req) body += chunk
      submittedTaskId = (JSON.parse(body) as { task_id: string }).task_id
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end(JSON.stringify({ task_id: submittedTaskId, status: 'running', warnings: [] }))
      return
    }
    if (url.pathname === `/rollout/task/${submittedTaskId}`) {
      res.writeHead(200, { 'content-type': 'application/json' })
      if (url.searchParams.get('results') === 'false') {
        const sessions = ['s-ok', 's-low', 's-err'].map((id) => ({ session_id: id, status: id === 's-err' ? 'ERROR' : 'COMPLETED' }))
        res.end(JSON.stringify({ task_id: submittedTaskId, status: 'completed', total_sessions: 3, sessions }))
      } else await results(res)
      return
    }
    const completions = /^\/v1\/sessions\/([^/]+)\/completions$/.exec(url.pathname)
    if (completions) {
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end(JSON.stringify({ completions: [], next_after_seq: null }))
      return
    }
    if (url.pathname === '/v1/sessions/s-ok/trajectory') {
      res.writeHead(200, { 'content-type': 'application/x-ndjson' })
      if (url.searchParams.get('format') === 'sft') await exportRows(res, ROW, SFT_ROWS, 'sft')
      else await exportRows(res, TOKEN_ROW, TOKEN_ROWS, 'tokens')
      return
    }
    res.writeHead(404, { 'content-type': 'application/json' })
    res.end(JSON.stringify({ error: { message: `no route ${url.pathname}` } }))
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  edge = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
})

afterAll(async () => {
  server.closeAllConnections()
  server.close()
  rmSync(scratch, { recursive: true, force: true })
})

function rollgate(args: string[], nodeArgs: string[] = []) {
  const child = spawn(process.execPath, [...nodeArgs, 'cli/rollgate.ts', ...args, '--edge', edge, '--admin-token', 't'], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  return childOutput(child)
}

async function fileDigest(path: string): Promise<string> {
  const hash = createHash('sha256')
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer)
  return hash.digest('hex')
}

describe('rollgate generate-sft (streamed)', () => {
  it('reads 120 MB of results and writes a 100 MB export under a 128 MB heap, byte for byte', async () => {
    const out = join(scratch, 'out')
    const run = await rollgate(
      [
        'generate-sft',
        '--task',
        TASK_FILE,
        '--attempts',
        '3',
        '--upstream',
        'http://127.0.0.1:9',
        '--served-model',
        'm',
        '--out',
        out,
        '--json',
      ],
      ['--max-old-space-size=128'],
    )
    expect(run.code, run.stderr.slice(-800)).toBe(0)
    const summary = JSON.parse(run.stdout) as {
      task_id: string
      attempts: number
      accepted: number
      sft_lines: number
      sft_token_lines: number
      results: {
        session_id: string
        status: string
        reward: number | null
        accepted: boolean
        error: string | null
        transcript: string | null
      }[]
    }
    expect(summary).toMatchObject({ task_id: submittedTaskId, attempts: 3, accepted: 1, sft_lines: SFT_ROWS, sft_token_lines: TOKEN_ROWS })
    expect(
      summary.results.map(({ session_id, status, reward, accepted, error }) => ({ session_id, status, reward, accepted, error })),
    ).toEqual([
      { session_id: 's-ok', status: 'COMPLETED', reward: 1, accepted: true, error: null },
      { session_id: 's-low', status: 'COMPLETED', reward: 0, accepted: false, error: null },
      // No evaluation and no trace: no reward.
      { session_id: 's-err', status: 'ERROR', reward: null, accepted: false, error: 'agent failed' },
    ])
    expect(await fileDigest(join(out, 'sft.jsonl'))).toBe(digests.sft)
    expect(await fileDigest(join(out, 'sft-tokens.jsonl'))).toBe(digests.tokens)
    const attempts = readFileSync(join(out, 'attempts.jsonl'), 'utf8')
    expect(attempts).toBe(`${summary.results.map((line) => JSON.stringify(line)).join('\n')}\n`)
    expect(summary.results[1]?.transcript).toBe(join(out, 'rejected', 's-low.json'))
  }, 180_000)
})
