/**
 * `npm run dev:stack` as a new user starts it: the README says its `solver` engine solves `tasks/fix-stats` for
 * a `rollgate submit` with a `rollgate runner`, as in the demo. A harness such as qwen_code asks for 32768 output
 * tokens and a rollout session does not clamp that to the engine's window, so the stack's engine must have the
 * demo's window (262144), not the stand-in's 32768 default (every fix-stats rollout failed on its first call).
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
