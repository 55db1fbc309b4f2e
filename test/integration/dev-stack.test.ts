/**
 * `npm run dev:stack` as a new user starts it: the README says its `solver` engine solves `tasks/fix-stats` for
 * a `rollgate submit` with a `rollgate runner`, as in the demo; the stack's engine has the demo's window (262144)
 * by default (a smaller one works too: output budgets that do not fit are lowered, `rollout-window.test.ts`).
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, expect, it } from 'vitest'
import { freePort } from '../../scripts/lib/processes.ts'

const ROOT = join(import.meta.dirname, '../..')
let child: ChildProcess | undefined
const persistTo = mkdtempSync(join(tmpdir(), 'rollgate-dev-stack-'))

afterAll(async () => {
  if (child && child.exitCode === null && child.signalCode === null) {
    const exited = new Promise((resolve) => child?.once('exit', resolve))
    child.kill('SIGTERM')
    await exited
  }
  rmSync(persistTo, { recursive: true, force: true })
})

it('dev:stack: the engine has the demo window, the edge answers, and SIGTERM stops both', async () => {
  const [port, enginePort] = [await freePort(), await freePort()]
  const stack = spawn(
    process.execPath,
    ['scripts/dev-stack.ts', '--port', String(port), '--engine-port', String(enginePort), '--policy', 'solver', '--persist-to', persistTo],
    { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
  )
  child = stack
  let stderr = ''
  stack.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString()
  })
  // The "try:" line is printed once both are up.
  const stdout = await new Promise<string>((resolve, reject) => {
    let text = ''
    stack.stdout.on('data', (chunk: Buffer) => {
      text += chunk.toString()
      if (text.includes('\ntry: ')) resolve(text)
    })
    stack.once('exit', (code) => reject(new Error(`dev:stack exited ${code} before it was up:\n${text}\n${stderr}`)))
  })
  expect(stdout).toContain(`engine http://127.0.0.1:${enginePort}  (policy solver, window 262144 tokens)`)
  const models = (await (await fetch(`http://127.0.0.1:${enginePort}/v1/models`)).json()) as { data: { max_model_len: number }[] }
  expect(models.data[0]?.max_model_len).toBe(262_144)
  expect((await fetch(`http://127.0.0.1:${port}/health`)).status).toBe(200)
  const exited = new Promise<number | null>((resolve) => stack.once('exit', resolve))
  stack.kill('SIGTERM')
  expect(await exited).toBe(0)
}, 120_000)
