/**
 * @module
 * R5 callback target down: the trainer's callback endpoint answers 503 for 10 simulated minutes, then
 * 200. Time is scaled 1:100 (callback base delay 10 ms instead of 1 s, so 10 minutes = 6 s). Three tasks
 * finish one after another; each TaskResult must be delivered exactly once (one accepted delivery per
 * idempotency key), with attempts numbered in order and every delivery carrying the same key.
 */
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { RunnerClient } from '../../test/support/runner-client.ts'
import { emptyRow, type Scenario } from './scenario.ts'
import { RUNNER_TOKEN, sleep, startChaosStack, until } from './stack.ts'

const TIME_SCALE = 100
const DOWN_SIMULATED_MS = 10 * 60_000

export const r5CallbackDown: Scenario = {
  id: 'R5',
  title: 'callback target down 10 simulated minutes, then up',
  async run({ log }) {
    const row = { ...emptyRow(), tasks: 3, deliveries_accepted: 0, attempts: 0, down_real_ms: DOWN_SIMULATED_MS / TIME_SCALE }
    const deliveries: { key: string; attempt: number; at: number; accepted: boolean; task: string }[] = []
    let upAt = Number.POSITIVE_INFINITY
    const server = createServer((request, response) => {
      let body = ''
      request.on('data', (chunk: Buffer) => {
        body += chunk.toString()
      })
      request.on('end', () => {
        const accepted = Date.now() >= upAt
        let task = ''
        try {
          task = (JSON.parse(body) as { task_id: string }).task_id
        } catch {}
        deliveries.push({
          key: String(request.headers['idempotency-key'] ?? ''),
          attempt: Number(request.headers['x-rollgate-delivery-attempt'] ?? 0),
          at: Date.now(),
          accepted,
          task,
        })
        response.writeHead(accepted ? 200 : 503, { 'content-type': 'application/json' }).end(accepted ? '{"ok":true}' : '{"error":"down"}')
      })
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const callbackUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/callback`
    const stack = await startChaosStack({
      ROLLGATE_CALLBACK_BASE_DELAY_MS: String(1_000 / TIME_SCALE),
      ROLLGATE_CALLBACK_MAX_ATTEMPTS: '16',
    })
    const runner = new RunnerClient({ edgeUrl: stack.edge.url, token: RUNNER_TOKEN, runnerId: 'r5', engineUrl: null })
    try {
      await runner.start()
      upAt = Date.now() + DOWN_SIMULATED_MS / TIME_SCALE
      for (let i = 0; i < row.tasks; i++) {
        const taskId = `r5-${i}`
        const submit = await stack.admin('/rollout/task/submit', {
          method: 'POST',
          body: JSON.stringify({
            task_id: taskId,
            instruction: 'x',
            num_samples: 1,
            callback_url: callbackUrl,
            agent: { harness: 'shell', custom_shell: { command: 'true' } },
            evaluator: { strategy: 'session_completed' },
          }),
        })
        if (submit.status !== 200) throw new Error(`submit ${taskId}: ${submit.status} ${await submit.text()}`)
        const session = await runner.take(taskId)
        await sleep(100)
        runner.finish(session.session_id, { status: 'completed', return_code: 0 })
        await sleep(500)
      }
      log(`tasks done; target comes up at +${DOWN_SIMULATED_MS / TIME_SCALE} ms`)
      await until(
        async () => {
          const states = await Promise.all(
            Array.from({ length: row.tasks }, async (_, i) => {
              const status = (await (await stack.admin(`/rollout/task/r5-${i}?results=false`)).json()) as {
                callback: { state: string } | null
              }
              return status.callback?.state
            }),
          )
          return states.every((state) => state === 'delivered' || state === 'failed') ? states : undefined
        },
        60_000,
        'every callback delivered',
      )
      // Anything still retrying would show up now.
      await sleep(1_000)
      row.attempts = deliveries.length
      row.sent = deliveries.length
      for (let i = 0; i < row.tasks; i++) {
        const mine = deliveries.filter((delivery) => delivery.task === `r5-${i}`)
        const keys = new Set(mine.map((delivery) => delivery.key))
        const accepted = mine.filter((delivery) => delivery.accepted)
        row.deliveries_accepted += accepted.length
        if (accepted.length !== 1) {
          row.errors++
          row.notes.push(`r5-${i}: ${accepted.length} accepted deliveries`)
        }
        if (keys.size !== 1 || [...keys][0] === '') {
          row.errors++
          row.notes.push(`r5-${i}: idempotency keys ${[...keys].join(',')}`)
        }
        const attempts = mine.map((delivery) => delivery.attempt)
        if (attempts.some((attempt, index) => attempt !== index + 1)) {
          row.errors++
          row.notes.push(`r5-${i}: attempts out of order ${attempts.join(',')}`)
        }
        if (mine.some((delivery) => delivery.accepted && delivery.at < upAt)) row.errors++
      }
      const first = deliveries.filter((delivery) => delivery.accepted).sort((a, b) => a.at - b.at)
      row.notes.push(
        `accepted after the outage: ${first.map((delivery) => `${delivery.task} at +${delivery.at - upAt} ms after up (attempt ${delivery.attempt})`).join('; ')}`,
      )
      return row
    } finally {
      await runner.shutdown().catch(() => {})
      await stack.stop()
      server.closeAllConnections()
      server.close()
    }
  },
}
