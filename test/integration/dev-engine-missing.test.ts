/**
 * `npm run dev` alone, as a new user starts it before any engine: the edge comes up and says that nothing answers at
 * its upstream and how to start the stand-in (before, nothing was said and the first model call was a 502). With
 * something answering there (any HTTP status: a hosted API wants a key), nothing is said.
 */
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, expect, it } from 'vitest'
import { engineMissing } from '../../scripts/dev.ts'
import { freePort } from '../../scripts/lib/processes.ts'
import { childOutput } from '../support/child-output.ts'

const ROOT = join(import.meta.dirname, '../..')
const persistTo = mkdtempSync(join(tmpdir(), 'rollgate-dev-engine-missing-'))
afterAll(() => rmSync(persistTo, { recursive: true, force: true }))

it('npm run dev with no engine at its upstream: a note naming the URL and how to start one; SIGTERM stops it', async () => {
  const [port, enginePort] = [await freePort(), await freePort()]
  const dev = spawn(process.execPath, ['scripts/dev.ts', '--port', String(port), '--persist-to', persistTo], {
    cwd: ROOT,
    env: { ...process.env, ROLLGATE_UPSTREAM_URL: `http://127.0.0.1:${enginePort}` },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  const output = childOutput(dev)
  const up = await new Promise<string>((resolve, reject) => {
    let text = ''
    dev.stdout?.on('data', (chunk: Buffer) => {
      text += chunk.toString()
      // The line after "rollgate edge on …" says whether an engine answers.
      if (/rollgate edge on .*\n.*\n/.test(text)) resolve(text)
    })
    dev.once('exit', (code) => reject(new Error(`dev exited ${code} before it was up:\n${text}\n${output.stderrSoFar().slice(-2000)}`)))
  })
  dev.kill('SIGTERM')
  const result = await output
  expect(result.code).toBe(0)
  expect(up).toContain(
    `\nnote: no engine answers at http://127.0.0.1:${enginePort} yet: model calls get a 502 until one does ` +
      `(the stand-in: npm run engine -- --port ${enginePort}; another engine: ROLLGATE_UPSTREAM_URL; npm run dev:stack starts both)\n`,
  )
}, 120_000)

it('something answering at the upstream, whatever its status, is an engine: no note', async () => {
  const server = createServer((_request, response) => {
    response.writeHead(401)
    response.end()
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  try {
    const { port } = server.address() as AddressInfo
    expect(await engineMissing(`http://127.0.0.1:${port}/`)).toBeNull()
    expect(await engineMissing(`http://127.0.0.1:${await freePort()}`)).toMatch(/^note: no engine answers at /)
  } finally {
    await new Promise<void>((resolve) => server.close(() => resolve()))
  }
})
