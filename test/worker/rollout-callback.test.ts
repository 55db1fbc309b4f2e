/**
 * Trainer callback delivery from the TaskObject in workerd: at least once, exponential backoff
 * driven by the object's alarm (`runDurableObjectAlarm`), one idempotency key per task run, state in
 * SQLite (survives the objects being reset). The trainer is an in-test receiver reached through the Worker's own
 * outbound `fetch`: it fails, then recovers.
 */
import { abortAllDurableObjects, env, runDurableObjectAlarm } from 'cloudflare:test'
import { afterEach, describe, expect, it, vi } from 'vitest'
import type { TaskResult } from '../../src/contract/trajectory.ts'
import { backoffDelayMs } from '../../src/durable/task/callback-delivery.ts'
import { cancelTask, eventually, submit, taskBody, taskStatus } from './rollout-support.ts'

interface Delivery {
  url: string
  headers: Record<string, string>
  body: TaskResult
}

/** A trainer endpoint answering the queued statuses in order (then 200), recording every delivery. */
function trainer(statuses: (number | 'network')[]) {
  const deliveries: Delivery[] = []
  const realFetch = globalThis.fetch
  vi.spyOn(globalThis, 'fetch').mockImplementation(async (input: RequestInfo | URL, init?: RequestInit) => {
    const request = new Request(input, init)
    if (!request.url.startsWith('https://trainer.test/')) return realFetch(input, init)
    deliveries.push({ url: request.url, headers: Object.fromEntries(request.headers), body: (await request.json()) as TaskResult })
    const next = statuses.shift() ?? 200
    if (next === 'network') throw new TypeError('connection reset')
    return new Response(next === 200 ? '{"ok":true}' : 'busy', { status: next })
  })
  return deliveries
}

function taskObject(taskId: string) {
  return env.TASKS.get(env.TASKS.idFromName(taskId))
}

afterEach(() => {
  vi.restoreAllMocks()
})

describe('trainer callback', () => {
  it('retries a failing target with exponential backoff until it recovers, with one idempotency key', async () => {
    const deliveries = trainer([503, 'network', 500])
    expect((await submit(taskBody('cb-1', { num_samples: 2, callback_url: 'https://trainer.test/cb' }))).status).toBe(200)
    await cancelTask('cb-1')
    // The first attempt runs as soon as the task completes (alarm due now).
    const first = await eventually(async () => {
      const status = await taskStatus('cb-1')
      expect(status.callback?.attempts).toBe(1)
      return status
    })
    expect(first.callback).toMatchObject({ state: 'pending', last_status: 503, url: 'https://trainer.test/cb' })
    // ROLLGATE_CALLBACK_BASE_DELAY_MS is 60 s in the test config: alarms never fire on their own here.
    const base = 60_000
    const delayOf = (nextAttemptAt: number | null) => (nextAttemptAt ?? 0) - Date.now()
    expect(delayOf(first.callback!.next_attempt_at)).toBeGreaterThan(base - 5_000)
    expect(delayOf(first.callback!.next_attempt_at)).toBeLessThanOrEqual(base)

    // Survives a crash of every object: the retry state is in SQLite.
    await abortAllDurableObjects()
    expect(await runDurableObjectAlarm(taskObject('cb-1'))).toBe(true)
    const second = await taskStatus('cb-1')
    expect(second.callback).toMatchObject({ state: 'pending', attempts: 2, last_status: null })
    expect(second.callback!.last_error).toContain('connection reset')
    expect(delayOf(second.callback!.next_attempt_at)).toBeGreaterThan(2 * base - 5_000)
    expect(delayOf(second.callback!.next_attempt_at)).toBeLessThanOrEqual(2 * base)

    expect(await runDurableObjectAlarm(taskObject('cb-1'))).toBe(true)
    const third = await taskStatus('cb-1')
    expect(third.callback).toMatchObject({ state: 'pending', attempts: 3, last_status: 500 })
    expect(delayOf(third.callback!.next_attempt_at)).toBeGreaterThan(4 * base - 5_000)
    expect(await runDurableObjectAlarm(taskObject('cb-1'))).toBe(true)
    const delivered = await taskStatus('cb-1')
    expect(delivered.callback).toMatchObject({ state: 'delivered', attempts: 4, last_status: 200, next_attempt_at: null })
    // Nothing more is scheduled for the callback.
    expect(await runDurableObjectAlarm(taskObject('cb-1'))).toBe(false)

    expect(deliveries).toHaveLength(4)
    const keys = new Set(deliveries.map((delivery) => delivery.headers['idempotency-key']))
    expect([...keys]).toEqual([`cb-1/${delivered.run_id}`])
    expect(deliveries.map((delivery) => delivery.headers['x-rollgate-delivery-attempt'])).toEqual(['1', '2', '3', '4'])
    for (const delivery of deliveries) {
      expect(delivery.body).toMatchObject({ task_id: 'cb-1', status: 'failed' })
      expect(delivery.body.results).toHaveLength(2)
      expect(delivery.body.result_paths).toEqual(delivered.result_paths)
    }
  })

  it('gives up at once on a non-retryable answer and records why', async () => {
    const deliveries = trainer([404])
    expect((await submit(taskBody('cb-2', { callback_url: 'https://trainer.test/missing' }))).status).toBe(200)
    await cancelTask('cb-2')
    const status = await eventually(async () => {
      const current = await taskStatus('cb-2')
      expect(current.callback?.state).toBe('failed')
      return current
    })
    expect(status.callback).toMatchObject({ attempts: 1, last_status: 404, next_attempt_at: null })
    expect(status.callback!.last_error).toContain('HTTP 404')
    expect(deliveries).toHaveLength(1)
  })

  it("a resubmission never drops the previous run's pending callback", async () => {
    const deliveries = trainer([503])
    expect((await submit(taskBody('cb-3', { callback_url: 'https://trainer.test/cb3' }))).status).toBe(200)
    await cancelTask('cb-3')
    const first = await eventually(async () => {
      const status = await taskStatus('cb-3')
      expect(status.callback).toMatchObject({ state: 'pending', attempts: 1, last_status: 503 })
      return status
    })
    expect((await submit(taskBody('cb-3', { num_samples: 2, callback_url: 'https://trainer.test/cb3' }))).status).toBe(200)
    await cancelTask('cb-3')
    const second = await eventually(async () => {
      const status = await taskStatus('cb-3')
      expect(status.callback).toMatchObject({ state: 'delivered', attempts: 1 })
      return status
    })
    expect(second.run_id).not.toBe(first.run_id)
    // The first run's retry is still scheduled; when its alarm fires it is delivered too.
    expect(await runDurableObjectAlarm(taskObject('cb-3'))).toBe(true)
    const keys = deliveries.map((delivery) => [delivery.headers['idempotency-key'], delivery.headers['x-rollgate-run-id']])
    expect(keys).toEqual([
      [`cb-3/${first.run_id}`, first.run_id],
      [`cb-3/${second.run_id}`, second.run_id],
      [`cb-3/${first.run_id}`, first.run_id],
    ])
    expect(deliveries.map((delivery) => delivery.body.results.length)).toEqual([1, 2, 1])
    expect(await runDurableObjectAlarm(taskObject('cb-3'))).toBe(false)
  })

  it('an unresolvable target: one log line per attempt (target, reason, what next), never a stack trace', async () => {
    const lines: string[] = []
    for (const method of ['error', 'warn', 'log', 'info', 'debug'] as const) {
      vi.spyOn(console, method).mockImplementation((...args: unknown[]) => {
        lines.push(args.map((arg) => (arg instanceof Error ? (arg.stack ?? arg.message) : String(arg))).join(' '))
      })
    }
    const realFetch = globalThis.fetch
    let attempts = 0
    vi.spyOn(globalThis, 'fetch').mockImplementation(async (input: RequestInfo | URL, init?: RequestInit) => {
      const request = new Request(input, init)
      if (!request.url.startsWith('https://no-such-trainer.invalid/')) return realFetch(input, init)
      attempts++
      // What workerd throws for a host that does not resolve (its stack is many lines).
      throw new TypeError('Network connection lost.\nDNS lookup failed: no-such-trainer.invalid')
    })
    const target = 'https://no-such-trainer.invalid/cb?secret=s3cret'
    expect((await submit(taskBody('cb-dns', { callback_url: target }))).status).toBe(200)
    await cancelTask('cb-dns')
    await eventually(async () => expect((await taskStatus('cb-dns')).callback?.attempts).toBe(1))
    expect(await runDurableObjectAlarm(taskObject('cb-dns'))).toBe(true)
    expect(await runDurableObjectAlarm(taskObject('cb-dns'))).toBe(true)
    expect(attempts).toBe(3)

    const callbackLines = lines.filter((line) => line.includes('no-such-trainer') || line.includes('trainer callback'))
    expect(callbackLines).toEqual(
      [1, 2, 3].map((n) => expect.stringContaining(`attempt ${n} to https://no-such-trainer.invalid/cb failed`)),
    )
    for (const [index, line] of callbackLines.entries()) {
      expect(line).not.toContain('\n')
      expect(line).not.toMatch(/\bat .+:\d+:\d+/)
      expect(line).not.toContain('s3cret')
      expect(line).toContain('task cb-dns')
      expect(line).toContain('DNS lookup failed: no-such-trainer.invalid')
      expect(line).toContain(`retry in ${60 * 2 ** index} s`)
    }
    expect(lines.join('\n')).not.toMatch(/\bat .+:\d+:\d+/)
  })

  it('backoff doubles from the base and is capped', () => {
    expect([1, 2, 3, 4].map((attempt) => backoffDelayMs(attempt, 1_000))).toEqual([1_000, 2_000, 4_000, 8_000])
    expect(backoffDelayMs(20, 1_000)).toBe(300_000)
  })
})
