/**
 * The edge relay's unix socket path: Linux takes at most 107 bytes and libuv truncates a longer path without an
 * error (the socket then lies where the sandbox does not look), so a longer one is refused up front, naming it.
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { MAX_SOCKET_PATH_BYTES, startEdgeRelay } from '../../../runner/runtime/edge-relay.ts'

const root = mkdtempSync(join(tmpdir(), 'rg-relay-'))
afterAll(() => rmSync(root, { recursive: true, force: true }))

/** A socket path of exactly `bytes` bytes under the test's dir (its directory created). */
function socketPathOf(bytes: number): string {
  const file = 'edge.sock'
  const pad = bytes - Buffer.byteLength(join(root, 'x', file))
  const dir = join(root, 'x'.repeat(1 + pad))
  mkdirSync(dir, { recursive: true })
  return join(dir, file)
}

describe('edge relay socket path', () => {
  it('binds a path of the longest length at that very path', async () => {
    const path = socketPathOf(MAX_SOCKET_PATH_BYTES)
    const relay = await startEdgeRelay(path, 'http://127.0.0.1:9')
    try {
      expect(existsSync(path)).toBe(true)
    } finally {
      await relay.close()
    }
  })

  it('refuses a longer path with an error that names it, instead of binding a truncated one', async () => {
    const path = socketPathOf(MAX_SOCKET_PATH_BYTES + 3)
    await expect(startEdgeRelay(path, 'http://127.0.0.1:9')).rejects.toThrow(
      `edge relay socket path is ${MAX_SOCKET_PATH_BYTES + 3} bytes, more than a unix socket takes (${MAX_SOCKET_PATH_BYTES}): ${path}`,
    )
    expect(existsSync(path.slice(0, MAX_SOCKET_PATH_BYTES))).toBe(false)
  })
})
