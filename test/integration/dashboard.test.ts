/**
 * The dashboard in headless Chromium (Debian's `chromium`, driven by playwright-core) against the edge
 * under `wrangler dev`, the stand-in engine and a scripted runner over a real WebSocket: log in (a wrong
 * token is refused), the task list updates live when a session finishes, the session page lists the
 * completions with the original and normalized requests, and the trajectory view colours exactly the
 * trace's loss mask. Screenshots of each page go to test/screenshots/ (not in git).
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import OpenAI from 'openai'
import { type Browser, chromium, type Page } from 'playwright-core'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import type { Trajectory } from '../../src/contract/trajectory.ts'
import { type EngineHandle, startEngine } from '../../engine/server.ts'
import { type EdgeProcess, startEdge } from '../../scripts/lib/processes.ts'
import { RunnerClient } from '../support/runner-client.ts'
import { eventually } from '../support/stack.ts'

const ADMIN_TOKEN = 'dash-admin-token'
const RUNNER_TOKEN = 'dash-runner-token'
const CHROMIUM = process.env.ROLLGATE_CHROMIUM ?? '/usr/bin/chromium'
const SHOTS = join(import.meta.dirname, '../screenshots')

let engine: EngineHandle
let edge: EdgeProcess
let persistTo: string
let runner: RunnerClient
let browser: Browser
let page: Page

async function admin<T>(path: string, init: RequestInit = {}): Promise<T> {
  const response = await fetch(`${edge.url}${path}`, {
    ...init,
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json', ...init.headers },
  })
  if (!response.ok) throw new Error(`${path}: ${response.status} ${await response.text()}`)
  return (await response.json()) as T
}

/** A RUNNING session that makes `calls` real model calls (the scripted policy: tool call, then answer). */
async function runSession(taskId: string, calls: number): Promise<string> {
  const session = await runner.take(taskId)
  await eventually(async () => expect((await admin<{ status: string }>(`/rollout/session/${session.session_id}`)).status).toBe('RUNNING'))
  const client = new OpenAI({ baseURL: session.base_urls.openai, apiKey: session.token, maxRetries: 0 })
  const messages: OpenAI.ChatCompletionMessageParam[] = [
    { role: 'system', content: 'You are a coding agent.' },
    { role: 'user', content: 'create hello.txt containing hi' },
  ]
  const tools: OpenAI.ChatCompletionTool[] = [
    {
      type: 'function',
      function: {
        name: 'write_file',
        description: 'Write a file',
        parameters: {
          type: 'object',
          properties: { path: { type: 'string' }, content: { type: 'string' } },
          required: ['path', 'content'],
        },
      },
    },
  ]
  for (let i = 0; i < calls; i++) {
    const answer = await client.chat.completions.create({ model: 'Qwen/Qwen3-8B', messages, tools })
    const message = answer.choices[0]!.message
    messages.push(message)
    for (const call of message.tool_calls ?? []) messages.push({ role: 'tool', tool_call_id: call.id, content: 'ok' })
    if (!message.tool_calls?.length) messages.push({ role: 'user', content: 'thanks, check it again' })
  }
  return session.session_id
}

/** End a session as the runner would; the edge's `session_completed` evaluator scores it (1 completed, 0 failed). */
function finish(sessionId: string, agent: 'completed' | 'failed'): void {
  runner.finish(sessionId, { status: agent, return_code: agent === 'completed' ? 0 : 1 })
}

async function shot(name: string): Promise<void> {
  await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true })
}

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) throw new Error(`Chromium not found at ${CHROMIUM} (apt-get install chromium, or set ROLLGATE_CHROMIUM)`)
  mkdirSync(SHOTS, { recursive: true })
  engine = await startEngine({ seed: 11 })
  persistTo = mkdtempSync(join(tmpdir(), 'rollgate-dash-itest-'))
  edge = await startEdge({
    persistTo,
    vars: {
      ROLLGATE_ADMIN_TOKEN: ADMIN_TOKEN,
      ROLLGATE_SIGNING_KEY: 'dash-signing-key',
      ROLLGATE_RUNNER_TOKEN: RUNNER_TOKEN,
      ROLLGATE_UPSTREAM_URL: engine.url,
      ROLLGATE_SERVED_MODEL: 'Qwen/Qwen3-8B',
    },
  })
  runner = new RunnerClient({ edgeUrl: edge.url, token: RUNNER_TOKEN, runnerId: 'dash-runner', engineUrl: null })
  await runner.start()
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  })
  page = await browser.newPage({ viewport: { width: 1400, height: 900 } })
})

afterEach(async (context) => {
  // On failure keep what the browser showed, for diagnosis.
  if (context.task.result?.state === 'fail' && page) {
    await page.screenshot({ path: join(SHOTS, 'failure.png'), fullPage: true }).catch(() => {})
    console.error(
      `dashboard at failure: ${page.url()}\n${
        (await page
          .locator('main')
          .textContent()
          .catch(() => '')) ?? ''
      }`,
    )
  }
})

afterAll(async () => {
  await browser?.close()
  await runner?.shutdown()
  await edge?.stop()
  await engine?.close()
  if (persistTo) rmSync(persistTo, { recursive: true, force: true })
})

describe('dashboard', () => {
  it('logs in, follows a task live, shows a session and colours the trajectory by loss mask', async () => {
    await admin('/rollout/task/submit', {
      method: 'POST',
      body: JSON.stringify({
        task_id: 'dash-task',
        instruction: 'create hello.txt containing hi',
        num_samples: 2,
        agent: { harness: 'shell', custom_shell: { command: 'echo {instruction}' } },
        evaluator: { strategy: 'session_completed' },
      }),
    })
    const first = await runSession('dash-task', 3)
    finish(first, 'completed')
    const second = await runSession('dash-task', 2)
    // The first session's result has reached its task (the hand-off follows the session's own end): the
    // tasks page below must show it from its first snapshot.
    await eventually(
      async () => expect((await admin<{ completed_sessions: number }>('/rollout/task/dash-task?results=false')).completed_sessions).toBe(1),
      60_000,
    )

    // A wrong token is refused; the right one opens the tasks page.
    await page.goto(`${edge.url}/dashboard`)
    await page.fill('input[name=token]', 'not-the-token')
    await page.click('form#login button')
    await page.getByRole('alert').filter({ hasText: 'Token refused' }).waitFor()
    await shot('login-refused')
    await page.fill('input[name=token]', ADMIN_TOKEN)
    await page.click('form#login button')
    const row = page.locator('tr[data-task="dash-task"]')
    await row.waitFor()
    await expect.poll(() => row.locator('[data-field=done]').textContent()).toBe('1 / 2')
    await shot('tasks')

    // The second session finishes: the row updates without a reload (live via /v1/events).
    finish(second, 'failed')
    await expect.poll(() => row.locator('[data-field=done]').textContent(), { timeout: 20_000 }).toBe('2 / 2')
    await expect.poll(() => row.locator('[data-field=reward-mean]').textContent()).toBe('0.500')
    await shot('tasks-live')

    // Task page: both sessions with reward and leave-one-out advantage.
    await row.locator('a').click()
    await page.locator('#task-sessions tbody tr').nth(1).waitFor()
    expect(await page.locator('#task-sessions tbody tr').count()).toBe(2)
    await shot('task')

    // Runners page: the scripted runner with its stage pools; the gate is open.
    await page.click('a[data-nav=runners]')
    await page.locator('tr[data-runner="dash-runner"]').waitFor()
    await expect.poll(() => page.locator('#gate').textContent()).toContain('open')
    await shot('runners')

    // Session page: every completion, original vs normalized request side by side.
    await page.goto(`${edge.url}/dashboard/session/${first}`)
    await page.locator('#completions tbody tr[data-seq]').nth(2).waitFor()
    expect(await page.locator('#completions tbody tr[data-seq]').count()).toBe(3)
    await page.locator('#completions tbody tr[data-seq="0"]').click()
    const original = JSON.parse((await page.locator('tr.detail:not([hidden]) pre.original').textContent()) ?? 'null') as {
      messages: unknown[]
    }
    const normalized = JSON.parse((await page.locator('tr.detail:not([hidden]) pre.normalized').textContent()) ?? 'null') as {
      messages: unknown[]
    }
    expect(original.messages).toHaveLength(2)
    expect(normalized.messages).toHaveLength(2)
    await expect.poll(() => page.locator('#timeline [data-stage=RUNNING].done').count()).toBe(1)
    await shot('session')

    // Trajectory view: the coloured runs are exactly the trace's loss mask (prompt = context).
    const trajectory = await admin<Trajectory>(`/v1/sessions/${first}/trajectory?builder=prefix_merging`)
    await page.goto(`${edge.url}/dashboard/trajectory/${first}?builder=prefix_merging`)
    await page.locator('section.trace').first().waitFor()
    expect(await page.locator('section.trace').count()).toBe(trajectory.traces.length)
    for (const [index, trace] of trajectory.traces.entries()) {
      const runs = await page
        .locator(`section.trace[data-trace="${index}"] .seg`)
        .evaluateAll((nodes) =>
          nodes.map((node) => ({ mask: Number((node as HTMLElement).dataset.mask), tokens: Number((node as HTMLElement).dataset.tokens) })),
        )
      const expected = [...new Array<number>(trace.prompt_ids.length).fill(0), ...trace.loss_mask]
      const painted = runs.flatMap((run) => new Array<number>(run.tokens).fill(run.mask))
      expect(painted).toEqual(expected)
      // Token text came from the engine's /detokenize (no placeholder) and contains the sampled answer.
      const text = await page.locator(`section.trace[data-trace="${index}"] .tokens`).textContent()
      expect(text).not.toContain('⟨')
      expect(text).toContain('<|im_start|>')
    }
    // Rewards and advantages on the traces (session_completed: 1 for the completed session, 0 for the failed one).
    expect(await page.locator('section.trace[data-trace="0"] header').textContent()).toContain('reward 1.000')
    expect(await page.locator('section.trace[data-trace="0"] header').textContent()).toContain('advantage 1.000')
    expect(await page.locator('main').textContent()).not.toContain('null')
    const trained = page.locator('section.trace .seg.mask-1').first()
    expect(await trained.getAttribute('title')).toMatch(/turn seq \d+ · \d+ trained tokens · mean logprob -?\d/)
    await shot('trajectory')

    // Logging out forgets the token: the next page asks for it again.
    await page.click('#logout')
    await page.locator('form#login').waitFor()
    expect(await page.evaluate(() => sessionStorage.getItem('rollgate.admin'))).toBeNull()
  })
})
