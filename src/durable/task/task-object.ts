/**
 * @module
 * One Durable Object per task id: a thin RPC shell over `TaskCoordinator` (logic) and `TaskStore`
 * (SQLite). Its alarm re-drives dispatch, the safety-net poll, cancellation sweeps and callback
 * retries, so a task survives restarts.
 */
import { DurableObject } from 'cloudflare:workers'
import type { RolloutEvent, TaskRequest, TaskStatus } from '../../contract/rollout.ts'
import type { SessionResult, TaskStatusValue } from '../../contract/trajectory.ts'
import type { DispatchTicket } from '../runner/dispatch-types.ts'
import { RUNNER_HUB_NAME } from '../runner/names.ts'
import { Sql } from '../session/sql.ts'
import { DEFAULT_CALLBACK_BASE_DELAY_MS, DEFAULT_CALLBACK_MAX_ATTEMPTS } from './callback-delivery.ts'
import { type HubPort, type SessionPort, type SubmitContext, type SubmitOutcome, TaskCoordinator } from './task-coordinator.ts'
import { TaskStore } from './task-store.ts'
import type { StoredResult } from '../session/result-stream.ts'

/** What callers see through the stub. */
export interface TaskRpc {
  submit(taskId: string, request: TaskRequest, context: SubmitContext): Promise<SubmitOutcome>
  status(includeResults?: boolean): Promise<TaskStatus | null>
  sessionResolved(runId: string, result: SessionResult): Promise<{ accepted: boolean }>
  sessionStored(runId: string, stored: StoredResult): Promise<{ accepted: boolean }>
  cancel(reason?: string): Promise<{ status: TaskStatusValue; cancelled: boolean } | null>
}

interface HubRpc {
  enqueue(ticket: DispatchTicket): Promise<unknown>
  publish(event: RolloutEvent): Promise<unknown>
  taskState(taskId: string, status: TaskStatusValue): Promise<unknown>
}

function positiveInt(value: string | undefined, fallback: number): number {
  const parsed = value ? Number(value) : Number.NaN
  return Number.isInteger(parsed) && parsed > 0 ? parsed : fallback
}

export class TaskObject extends DurableObject<Env> implements TaskRpc {
  readonly #coordinator: TaskCoordinator

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env)
    const store = new TaskStore(new Sql(ctx.storage.sql))
    this.#coordinator = new TaskCoordinator({
      store,
      session: (sessionId) => env.SESSIONS.get(env.SESSIONS.idFromName(sessionId)) as unknown as SessionPort,
      hub: () => env.RUNNERS.get(env.RUNNERS.idFromName(RUNNER_HUB_NAME)) as unknown as HubRpc as HubPort,
      blobs: env.BLOBS,
      fetch: (input, init) => fetch(input, init),
      callbackPolicy: {
        baseDelayMs: positiveInt(env.ROLLGATE_CALLBACK_BASE_DELAY_MS, DEFAULT_CALLBACK_BASE_DELAY_MS),
        maxAttempts: positiveInt(env.ROLLGATE_CALLBACK_MAX_ATTEMPTS, DEFAULT_CALLBACK_MAX_ATTEMPTS),
      },
      setAlarm: async (at) => {
        if (at === null) await ctx.storage.deleteAlarm()
        else await ctx.storage.setAlarm(at)
      },
      now: () => Date.now(),
    })
  }

  submit(taskId: string, request: TaskRequest, context: SubmitContext): Promise<SubmitOutcome> {
    return this.#coordinator.submit(taskId, request, context)
  }

  /** `includeResults` reads every result into the answer: small tasks only (the route streams them from R2). */
  async status(includeResults = true): Promise<TaskStatus | null> {
    return this.#coordinator.status(includeResults ? await this.#coordinator.results() : [])
  }

  sessionResolved(runId: string, result: SessionResult): Promise<{ accepted: boolean }> {
    return this.#coordinator.sessionResolved(runId, result)
  }

  sessionStored(runId: string, stored: StoredResult): Promise<{ accepted: boolean }> {
    return this.#coordinator.sessionStored(runId, stored)
  }

  async cancel(reason = 'task cancelled'): Promise<{ status: TaskStatusValue; cancelled: boolean } | null> {
    const run = await this.#coordinator.cancel(reason)
    return run ? { status: run.status, cancelled: run.cancelled } : null
  }

  async alarm(): Promise<void> {
    await this.#coordinator.alarm()
  }
}
