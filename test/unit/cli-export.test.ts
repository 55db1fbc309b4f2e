/**
 * `rollgate export` writes what the edge sends as it arrives: a 200 MB export (a 1,000-turn session's
 * per_request or Polar-strict export is hundreds of MB, past what one string holds) reaches the file whole
 * with the CLI under a 128 MB heap; several sessions make one JSONL stream; the client's timeout bounds the
 * wait for each chunk, not the whole transfer, and a stalled answer fails naming it. A local HTTP server
 * stands in for the edge's trajectory route (127.0.0.1, a free port).
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
import { EdgeClient } from '../../cli/lib/edge-client.ts'

const ROOT = join(import.meta.dirname, '../..')
/** 200 MB of NDJSON rows in 1 MB chunks. */
const BIG_CHUNKS = 200
const ROW = `${JSON.stringify({ messages: [{ role: 'assistant', content: 'x'.repeat(1000) }] })}\n`
const BIG_CHUNK = ROW.repeat(Math.floor((1024 * 1024) / ROW.length))
let bigDigest = ''

/** Chunk writers per session id: what the stand-in edge answers. */
const answers: Record<string, (res: ServerResponse) => Promise<void>> = {
  big: async (res) => {
    const hash = createHash('sha256')
    res.write(' ')
    for (let i = 0; i < BIG_CHUNKS; i++) {
      hash.update(BIG_CHUNK)
      if (!res.write(BIG_CHUNK)) await once(res, 'drain')
    }
    bigDigest = hash.digest('hex')
    res.end()
  },
  one: async (res) => {
    res.end(' {"status":"COMPLETED","traces":[{"n":1}],"error":null}')
  },
  two: async (res) => {
    res.write(' ')
    res.end('{"status":"COMPLETED","traces":[{"n":2}],"error":null}')
  },
  slow: async (res) => {
    // 3 s in all, a chunk every 100 ms: longer than the client's 2 s timeout, never that long between chunks.
    res.write(' ')
    for (let i = 0; i < 30; i++) {
      await new Promise((resolve) => setTimeout(resolve, 100))
      res.write(`{"row":${i}}\n`)
    }
    res.end()
  },
  stalled: async (res) => {
    res.write(' {"row":0}\n')
    // …and nothing more until the client gives up (the socket closes).
    await once(res, 'close')
  },
}

let server: ReturnType<typeof createServer>
let edge = ''
let scratch = ''

beforeAll(async () => {
  scratch = mkdtempSync(join(tmpdir(), 'rollgate-export-'))
  server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://edge')
    const task = /^\/rollout\/task\/([^/]+)$/.exec(url.pathname)
    if (task) {
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end(JSON.stringify({ task_id: task[1], sessions: [{ session_id: 'one' }, { session_id: 'two' }] }))
      return
    }
    const session = /^\/v1\/sessions\/([^/]+)\/trajectory$/.exec(url.pathname)?.[1] ?? ''
    const answer = answers[session]
    if (!answer) {
      res.writeHead(404, { 'content-type': 'application/json' })
      res.end(JSON.stringify({ error: { message: `no session ${session}` } }))
      return
    }
    res.writeHead(200, { 'content-type': 'application/x-ndjson' })
    void answer(res)
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

describe('rollgate export', () => {
  it('writes a 200 MB export to its file under a 128 MB heap, byte for byte (without the leading space)', async () => {
    const out = join(scratch, 'big.jsonl')
    const run = await rollgate(['export', 'big', '--builder', 'per_request', '--format', 'sft', '--out', out], ['--max-old-space-size=128'])
    expect(run.code, run.stderr.slice(-600)).toBe(0)
    expect(run.stderr).toContain(`wrote ${BIG_CHUNKS * BIG_CHUNK.length} bytes`)
    expect(await fileDigest(out)).toBe(bigDigest)
  }, 120_000)

  it('--task: every session one JSONL line; a session to stdout ends in a newline', async () => {
    const out = join(scratch, 'task.jsonl')
    const run = await rollgate(['export', '--task', 'tk', '--format', 'trajectory', '--out', out])
    expect(run.code, run.stderr).toBe(0)
    const lines = readFileSync(out, 'utf8').split('\n')
    expect(lines).toHaveLength(3)
    expect(lines.slice(0, 2).map((line) => (JSON.parse(line) as { traces: { n: number }[] }).traces[0]?.n)).toEqual([1, 2])
    expect(lines[2]).toBe('')
    const one = await rollgate(['export', 'one'])
    expect(one.stdout).toBe('{"status":"COMPLETED","traces":[{"n":1}],"error":null}\n')
  }, 60_000)

  it('the timeout bounds the wait for each chunk, not the whole answer; a stalled answer fails naming it', async () => {
    const client = new EdgeClient({ edge, adminToken: 't', timeoutMs: 2000 })
    const text = await client.exportText('slow', { builder: 'prefix_merging', format: 'sft' })
    expect(text.split('\n').filter(Boolean)).toHaveLength(30)
    const stalled = new EdgeClient({ edge, adminToken: 't', timeoutMs: 300 })
    await expect(stalled.exportText('stalled', { builder: 'prefix_merging', format: 'sft' })).rejects.toThrow(
      /trajectory\?builder=prefix_merging&format=sft: the answer stopped \(no data for 300 ms\)/,
    )
    await expect(stalled.exportText('missing', { builder: 'prefix_merging', format: 'sft' })).rejects.toThrow(/404: no session missing/)
  }, 30_000)
})
