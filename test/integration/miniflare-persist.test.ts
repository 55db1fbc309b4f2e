/**
 * `startMiniflareEdge({ persistTo })` really keeps the edge's state there (issue #10.5: the v3 option names
 * `durableObjectsPersist` / `r2Persist` were dropped by `convertV4MiniflareOptions`, and Miniflare wrote to
 * its own temp dir). A session created by one edge is read back by a second edge started on the same
 * directory, and its object's SQLite file sits under `<persistTo>/do`. The benchmarks' `--persist-dir`
 * (tmpfs vs disk) depends on it.
 */
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { type MiniflareEdge, startMiniflareEdge } from '../../scripts/lib/miniflare-edge.ts'

const ADMIN = { authorization: 'Bearer persist-admin', 'content-type': 'application/json' }
const VARS = { ROLLGATE_ADMIN_TOKEN: 'persist-admin', ROLLGATE_SIGNING_KEY: 'persist-key' }
const persistTo = mkdtempSync(join(tmpdir(), 'rollgate-persist-'))
let edge: MiniflareEdge | null = null

afterAll(async () => {
  await edge?.stop()
  rmSync(persistTo, { recursive: true, force: true })
})

describe('Miniflare persistence directory', () => {
  it('a session outlives its edge: a second edge on the same directory reads it', async () => {
    edge = await startMiniflareEdge({ persistTo, vars: VARS })
    const created = await fetch(`${edge.url}/v1/sessions`, { method: 'POST', headers: ADMIN, body: '{}' })
    expect(created.status).toBe(201)
    const { session_id } = (await created.json()) as { session_id: string }
    await edge.stop()
    edge = null

    const objects = join(persistTo, 'do', '-SessionObject')
    expect(existsSync(objects)).toBe(true)
    expect(readdirSync(objects).some((name) => name.endsWith('.sqlite') && name !== 'metadata.sqlite')).toBe(true)

    edge = await startMiniflareEdge({ persistTo, vars: VARS })
    const read = await fetch(`${edge.url}/v1/sessions/${session_id}`, { headers: ADMIN })
    expect(read.status).toBe(200)
    expect(((await read.json()) as { session_id: string }).session_id).toBe(session_id)
  }, 120_000)
})
