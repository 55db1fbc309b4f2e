/**
 * @module
 * Rollout API (admin bearer token), Polar's field names (`docs/polar-compat.md` §2):
 *
 * | Route | What |
 * |---|---|
 * | `POST /rollout/task/submit`, `POST /v1/tasks` | `TaskRequest` → `{task_id, status: "running", warnings?}`; 409 while the same task runs |
 * | `GET /rollout/task/:id` (`GET /v1/tasks/:id`) | `TaskStatus` (`?results=false` omits the results) plus `warnings` while unfinished sessions have no runner |
 * | `DELETE /rollout/task/:id` | cancel every session of the task |
 * | `GET /rollout/session/:id` | a rollout session's lifecycle |
 * | `DELETE /rollout/session/:id` | cancel one session |
 * | `GET /rollout/status` | `{tasks, pipeline, nodes: {nodes}}` |
 * | `GET /rollout/runners` | the runner registry: each id's state, health, own drain, admin drain, slots, connection, credential |
 * | `DELETE /rollout/runners/:id` | drain a runner (holds across its reconnects and restarts until resumed); 404 for an id never seen |
 * | `POST /rollout/runners/:id/resume` | undo an admin drain; 404 for an id never seen |
 * | `DELETE /rollout/runners/:id/credential` | forget a runner's per-runner secret (its host may enrol again) |
 * | `GET /v1/events` | SSE of task / session / runner / inference state changes |
 *
 * Mounted at `/` before the proxy; every route carries `requireAdmin` itself (no catch-all middleware).
 */
import { Hono } from 'hono'
import { validateEvaluatorConfig } from '../../contract/evaluator-config.ts'
import { type TaskRequest, taskRequestSchema } from '../../contract/rollout.ts'
import { TERMINAL_SESSION_STATUSES } from '../../contract/trajectory.ts'
import { parseOrThrow } from '../../normalize/zod-issues.ts'
import { edgeConfig } from '../config.ts'
import { rangedObjectBody, STREAM_HEADERS } from '../stored-stream.ts'
import { GatewayError } from '../errors.ts'
import { evaluatorWarnings } from '../pipeline/evaluator-warnings.ts'
import { runnerWarnings, waitingSessionWarnings } from '../pipeline/runner-warnings.ts'
import { parseJsonBody, readBodyText } from '../pipeline/read-body.ts'
import { hubStub, sessionRolloutStub, taskStub } from '../pipeline/rollout-stubs.ts'
import { requireAdmin } from './require-admin.ts'
import { builderConfigOrThrow } from '../builder-config.ts'
import { numberParam } from '../query.ts'
import { MAX_STREAM_MS } from '../../durable/runner/event-bus.ts'

/** A TaskRequest is instructions plus specs; 4 MiB is far above any real one. */
const MAX_TASK_BODY_BYTES = 4 * 1024 * 1024

type AppEnv = { Bindings: Env }

export const rollout = new Hono<AppEnv>()

for (const path of ['/rollout/task/submit', '/v1/tasks']) {
  rollout.post(path, requireAdmin, async (c) => {
    const request: TaskRequest = parseOrThrow(taskRequestSchema, parseJsonBody(await readBodyText(c.req.raw, MAX_TASK_BODY_BYTES)))
    // Checked here, not after each session's agent has run (the build would fail then).
    const { warnings } = builderConfigOrThrow(request.builder.strategy, request.builder.config, 'builder.config')
    if (request.evaluator) {
      const check = validateEvaluatorConfig(request.evaluator.strategy, request.evaluator.config)
      if (!check.ok) throw new GatewayError(400, 'invalid_request', check.message, `evaluator.${check.path}`)
    }
    const config = edgeConfig(c.env)
    const outcome = await taskStub(c.env, request.task_id).submit(request.task_id, request, {
      public_url: (c.env.ROLLGATE_PUBLIC_URL || new URL(c.req.url).origin).replace(/\/+$/, ''),
      upstream: { url: config.upstreamUrl, kind: config.upstreamKind, served_model: config.servedModel },
    })
    if (!outcome.ok) throw new GatewayError(409, 'invalid_request', `task ${request.task_id} is still running`, 'task_id')
    const runners = (await hubStub(c.env).status()).nodes.nodes
    const runner = runnerWarnings(Boolean(c.env.ROLLGATE_RUNNER_TOKEN), runners, request.timeout_seconds)
    const evaluator = request.evaluator ? evaluatorWarnings(request, runners) : []
    return c.json({ task_id: request.task_id, status: 'running' as const, warnings: [...warnings, ...runner, ...evaluator] })
  })
}

for (const path of ['/rollout/task/:id', '/v1/tasks/:id']) {
  rollout.get(path, requireAdmin, async (c) => {
    const taskId = c.req.param('id') ?? ''
    const status = await taskStub(c.env, taskId).status(false)
    if (!status) throw new GatewayError(404, 'not_found', `task ${taskId} not found`)
    // The hub is asked only while the task has sessions a runner must still run.
    const unfinished = status.sessions.filter((session) => !TERMINAL_SESSION_STATUSES.includes(session.status)).length
    const runners = unfinished > 0 ? (await hubStub(c.env).status()).nodes.nodes : []
    const answer = { ...status, warnings: waitingSessionWarnings(Boolean(c.env.ROLLGATE_RUNNER_TOKEN), runners, unfinished) }
    if (c.req.query('results') === 'false') return c.json(answer)
    // The results are the sessions' R2 objects, streamed as they are (each may be tens of MB), in their
    // place in Polar's TaskStatus key order.
    const marker = JSON.stringify(`rollgate-results-${crypto.randomUUID()}`)
    const [before, after] = JSON.stringify({ ...answer, results: marker.slice(1, -1) }).split(marker) as [string, string]
    return c.body(resultsStream(c.env.BLOBS, status.result_paths, before, after), 200, {
      'content-type': 'application/json',
      ...STREAM_HEADERS,
    })
  })
}

/** Cancel, then answer the task's status as it is after cancelling (its `TaskStatus`, results omitted). */
rollout.delete('/rollout/task/:id', requireAdmin, async (c) => {
  const task = taskStub(c.env, c.req.param('id'))
  const outcome = await task.cancel('task cancelled')
  if (!outcome) throw new GatewayError(404, 'not_found', `task ${c.req.param('id')} not found`)
  const status = await task.status(false)
  return c.json({ ...status, task_id: c.req.param('id'), cancelled: true })
})

/**
 * A rollout session's lifecycle, and its evaluation once its result reached the task: `evaluated` (false
 * while the session runs, is built or evaluated, or while its result is on its way to the task), `reward`
 * (the task's: mean of the result's non-null trace rewards; null before or when unscored), `result_status`
 * and `result_path` (the `SessionResult` in R2), and `eval_result` (what the runner's evaluator reported).
 */
rollout.get('/rollout/session/:id', requireAdmin, async (c) => {
  const sessionId = c.req.param('id')
  const state = await sessionRolloutStub(c.env, sessionId).lifecycle()
  if (!state) throw new GatewayError(404, 'not_found', `rollout session ${sessionId} not found`)
  const entry = TERMINAL_SESSION_STATUSES.includes(state.status as (typeof TERMINAL_SESSION_STATUSES)[number])
    ? (await taskStub(c.env, state.spec.task_id).status(false))?.sessions.find((session) => session.session_id === sessionId)
    : undefined
  const resolved = entry?.result_path ? entry : null
  return c.json({
    session_id: c.req.param('id'),
    task_id: state.spec.task_id,
    run_id: state.spec.run_id,
    index: state.spec.index,
    status: state.status,
    runner_id: state.runner_id,
    route: state.route,
    dispatch_attempts: state.dispatch_attempts,
    times: state.times,
    session_deadline: state.session_deadline,
    agent_deadline: state.agent_deadline,
    agent_result: state.agent_result,
    error: state.error,
    evaluated: resolved !== null,
    reward: resolved?.reward ?? null,
    result_status: resolved?.status ?? null,
    result_path: resolved?.result_path ?? null,
    eval_result: state.eval_result,
  })
})

rollout.delete('/rollout/session/:id', requireAdmin, async (c) => {
  const stub = sessionRolloutStub(c.env, c.req.param('id'))
  const outcome = await stub.cancel('session cancelled')
  if (!outcome.ok && outcome.status === null) throw new GatewayError(404, 'not_found', `rollout session ${c.req.param('id')} not found`)
  const state = await stub.lifecycle()
  return c.json({
    session_id: c.req.param('id'),
    cancelled: outcome.ok,
    status: state?.status ?? null,
    ...(outcome.ok ? {} : { reason: outcome.reason }),
  })
})

rollout.get('/rollout/status', requireAdmin, async (c) => c.json(await hubStub(c.env).status()))

/** `{runners: [...]}` sorted by id (`RunnerEntry` in `src/contract/rollout.ts`): registered runners, then ids known by a credential or a drain. */
rollout.get('/rollout/runners', requireAdmin, async (c) => c.json(await hubStub(c.env).runners()))

/**
 * Admin drain, a cordon: the runner takes no new session, across its reconnects and restarts, until resumed;
 * what it holds runs to its end. The id must be one this edge knows: registered now, or enrolled (it
 * registered once and is away, restarting, or was declared lost: the drain holds from its next registration,
 * listed meanwhile as `absent`, cordoned). An id never seen is a 404, not a drain in advance: an operator's
 * mistyped id would otherwise answer `draining: true` while the runner meant keeps taking work, and leave
 * a cordon no runner ever meets. (A new host that must take no work yet is simply not started yet.)
 */
rollout.delete('/rollout/runners/:id', requireAdmin, async (c) => {
  const found = await hubStub(c.env).drain(c.req.param('id'))
  if (!found)
    throw new GatewayError(
      404,
      'not_found',
      `runner ${c.req.param('id')} not found: it has never registered with this edge (GET /rollout/runners lists the ids it knows)`,
    )
  return c.json({ runner_id: c.req.param('id'), draining: true })
})

/** Undo an admin drain; `draining` stays true while the runner drains itself (SIGTERM). 404 for an id never seen, as for the drain. */
rollout.post('/rollout/runners/:id/resume', requireAdmin, async (c) => {
  const outcome = await hubStub(c.env).resume(c.req.param('id'))
  if (!outcome) throw new GatewayError(404, 'not_found', `runner ${c.req.param('id')} not found: it has never registered with this edge`)
  return c.json({ runner_id: c.req.param('id'), draining: outcome.draining })
})

rollout.delete('/rollout/runners/:id/credential', requireAdmin, async (c) => {
  const forgotten = await hubStub(c.env).forgetCredential(c.req.param('id'))
  if (!forgotten) throw new GatewayError(404, 'not_found', `runner ${c.req.param('id')} has no credential`)
  return c.json({ runner_id: c.req.param('id'), credential: 'forgotten' as const })
})

rollout.get('/v1/events', requireAdmin, async (c) => {
  const url = new URL(c.req.url)
  // A stream lives at most MAX_STREAM_MS (clients reconnect with Last-Event-ID): longer asks are a 400, not a silent cap.
  numberParam(c.req.query('timeout_seconds'), 'timeout_seconds', 0, { min: 0, max: MAX_STREAM_MS / 1000 })
  const target = new URL(`https://runner-hub/events${url.search}`)
  return hubStub(c.env).fetch(new Request(target, { headers: c.req.raw.headers, signal: c.req.raw.signal }))
})

/** `before` + `[<each stored result>]` + `after`: the task status with its results streamed in place. */
function resultsStream(blobs: R2Bucket, paths: readonly string[], before: string, after: string): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder()
  const parts = (async function* () {
    yield encoder.encode(`${before}[`)
    let first = true
    for (const path of paths) {
      const body = await rangedObjectBody(blobs, path)
      // A result that is not there (yet) is left out, as it always was.
      if (!body) continue
      if (!first) yield encoder.encode(',')
      first = false
      yield* body
    }
    yield encoder.encode(`]${after}`)
  })()
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      const next = await parts.next()
      if (next.done) controller.close()
      else controller.enqueue(next.value)
    },
    async cancel() {
      await parts.return(undefined)
    },
  })
}
