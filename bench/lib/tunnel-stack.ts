/**
 * @module
 * The stack `bench:tunnel` and `profile:tunnel` measure: the vLLM-shaped stub engine, the edge in Miniflare
 * and two scripted runners in processes of their own (`tunnel-runner.ts`): `bench-runner` asks for
 * `tunnel.binary` + `tunnel.credit` and answers with the real runner's `TunnelClient`, `bench-runner-v1`
 * asks for nothing (plain JSON frames, the protocol before them). Sessions per path, all of rollout tasks
 * walked to RUNNING (same admission check and generation gate), so paths differ by the tunnel alone:
 * `tunnel` (runner route via `bench-runner`), `direct` (the same runner holds them, the engine is called by
 * the edge), `tunnel_v1` (runner route via `bench-runner-v1`), and `bare` capture sessions (no rollout).
 * With `runnerB` (another checkout of this repo), a third runner, `bench-runner-b`, runs that checkout's
 * runner code (same options as `bench-runner`) and answers the `tunnel_b` sessions: two runner builds side
 * by side against the same edge. With `runnerFrom`, `bench-runner` itself runs another checkout's runner code
 * (`bench:tunnel --edge-b-runner`: a whole other build, edge and runner, in the second stack).
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import type { SessionAssignment } from '../../src/contract/runner-protocol.ts'
import { type MiniflareEdge, startMiniflareEdge } from '../../scripts/lib/miniflare-edge.ts'
import { startEdge } from '../../scripts/lib/processes.ts'
import { startStub } from './start-stub.ts'
import { startTunnelRunner, type TunnelRunner } from './tunnel-runner.ts'

export const ADMIN_TOKEN = 'bench-admin-token'
const RUNNER_TOKEN = 'bench-runner-token'
export const SESSIONS_PER_ROUTE = 32
const SETUP_TIMEOUT_MS = 60_000

export interface TunnelStack {
  edge: { url: string; inspectorUrl: string | null }
  stubUrl: string
  runner: TunnelRunner
  /** Null when started with `v1: false`. */
  runnerV1: TunnelRunner | null
  /** The other checkout's runner (`runnerB`), else null. */
  runnerB: TunnelRunner | null
  /** Session tokens per path (`tunnel_b` empty without `runnerB`, `tunnel_v1` with `v1: false`). */
  tokens: { tunnel: string[]; direct: string[]; tunnel_v1: string[]; tunnel_b: string[]; bare: string[] }
  admin(path: string, body?: unknown): Promise<Response>
  stop(): Promise<void>
}

export async function startTunnelStack(options: {
  /** `miniflare` (workerd directly) or `wrangler` (`wrangler dev`, adds its dev-server proxy). */
  runtime?: 'miniflare' | 'wrangler'
  /** A prepared bundle (e.g. `profiledBundle`); Miniflare only. */
  scriptPath?: string
  inspector?: boolean
  onLog?: (level: string, message: string) => void
  /** Root of another checkout whose runner answers the `tunnel_b` sessions (its node_modules resolvable). */
  runnerB?: string
  /** Start the v1 runner and its `tunnel_v1` sessions (default true; `bench:tunnel --edge-b`'s second stack skips them). */
  v1?: boolean
  /** Root of another checkout whose runner code runs `bench-runner` (default: this checkout's). */
  runnerFrom?: string
}): Promise<TunnelStack> {
  const stub = await startStub()
  const persistTo = mkdtempSync(join(tmpdir(), 'rollgate-bench-tunnel-'))
  const vars = {
    ROLLGATE_ADMIN_TOKEN: ADMIN_TOKEN,
    ROLLGATE_SIGNING_KEY: 'bench-signing-key',
    ROLLGATE_RUNNER_TOKEN: RUNNER_TOKEN,
    ROLLGATE_UPSTREAM_URL: stub.url,
    ROLLGATE_SERVED_MODEL: 'Qwen/Qwen3-8B',
  }
  let edge: MiniflareEdge | { url: string; inspectorUrl: null; stop(): Promise<void> } | null = null
  let runner: TunnelRunner | null = null
  let runnerV1: TunnelRunner | null = null
  let runnerB: TunnelRunner | null = null
  const stop = async () => {
    await runner?.shutdown().catch(() => {})
    await runnerB?.shutdown().catch(() => {})
    await runnerV1?.shutdown().catch(() => {})
    await edge?.stop()
    await stub.stop()
    rmSync(persistTo, { recursive: true, force: true })
  }
  try {
    if (options.runtime === 'wrangler') {
      const started = await startEdge({ persistTo, vars })
      edge = { url: started.url, inspectorUrl: null, stop: () => started.stop() }
    } else {
      edge = await startMiniflareEdge({
        persistTo,
        vars,
        ...(options.scriptPath ? { scriptPath: options.scriptPath } : {}),
        ...(options.inspector ? { inspector: true } : {}),
        ...(options.onLog ? { onLog: options.onLog } : {}),
      })
    }
    const edgeUrl = edge.url
    const admin = (path: string, body?: unknown) =>
      fetch(`${edgeUrl}${path}`, {
        method: body === undefined ? 'GET' : 'POST',
        headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      })
    /** Submit a task of `SESSIONS_PER_ROUTE` samples and walk every session to RUNNING on `on`. */
    const runningSessions = async (on: TunnelRunner, taskId: string, upstream: Record<string, unknown>): Promise<SessionAssignment[]> => {
      const res = await admin('/rollout/task/submit', {
        task_id: taskId,
        instruction: 'benchmark',
        num_samples: SESSIONS_PER_ROUTE,
        timeout_seconds: 3600,
        agent: { harness: 'shell', custom_shell: { command: 'true' } },
        upstream,
      })
      if (res.status !== 200) throw new Error(`submit ${taskId}: ${res.status} ${await res.text()}`)
      const sessions = await on.take(taskId, SESSIONS_PER_ROUTE)
      const deadline = Date.now() + SETUP_TIMEOUT_MS
      for (const session of sessions) {
        for (;;) {
          const info = (await (await admin(`/rollout/session/${session.session_id}`)).json()) as { status: string }
          if (info.status === 'RUNNING') break
          if (Date.now() > deadline) throw new Error(`session ${session.session_id} not RUNNING in time (${info.status})`)
          await new Promise((resolve) => setTimeout(resolve, 20))
        }
      }
      return sessions
    }
    /**
     * Runner A holds the `tunnel` and `direct` sessions and is then full (admission limit = init + ready +
     * run + postrun = 64), so the `tunnel_v1` sessions submitted after runner B connected all go to B.
     */
    const capacity = { max_init_workers: 1, max_run_workers: 2 * SESSIONS_PER_ROUTE - 2, max_postrun_workers: 1, ready_buffer: 0 }
    const runnerOptions = { edgeUrl, token: RUNNER_TOKEN, capacity, engineUrl: stub.url, reconnect: false }
    // The new runner as `rollgate runner` connects (no permessage-deflate); the v1 one as runners did before.
    runner = await startTunnelRunner(
      { ...runnerOptions, runnerId: 'bench-runner', tunnel: 'credit', deflate: false },
      ...(options.runnerFrom ? [resolve(options.runnerFrom, 'bench/lib/tunnel-runner.ts')] : []),
    )
    const tunnel = await runningSessions(runner, 'bench-tunnel', { route: 'runner' })
    const direct = await runningSessions(runner, 'bench-direct', { route: 'direct', url: stub.url, served_model: 'Qwen/Qwen3-8B' })
    let tunnelB: SessionAssignment[] = []
    if (options.runnerB) {
      // Room for exactly one route's sessions, so the v1 sessions below cannot land on it.
      const capacityB = { ...capacity, max_run_workers: SESSIONS_PER_ROUTE - 2 }
      const script = resolve(options.runnerB, 'bench/lib/tunnel-runner.ts')
      runnerB = await startTunnelRunner(
        { ...runnerOptions, capacity: capacityB, runnerId: 'bench-runner-b', tunnel: 'credit', deflate: false },
        script,
      )
      tunnelB = await runningSessions(runnerB, 'bench-tunnel-b', { route: 'runner' })
    }
    let tunnelV1: SessionAssignment[] = []
    if (options.v1 !== false) {
      runnerV1 = await startTunnelRunner({ ...runnerOptions, runnerId: 'bench-runner-v1', tunnel: 'v1' })
      tunnelV1 = await runningSessions(runnerV1, 'bench-tunnel-v1', { route: 'runner' })
    }
    const bare: string[] = []
    for (let i = 0; i < SESSIONS_PER_ROUTE; i++) {
      const res = await admin('/v1/sessions', { upstream: { url: stub.url, kind: 'vllm', served_model: 'Qwen/Qwen3-8B' } })
      bare.push(((await res.json()) as { token: string }).token)
    }
    const token = (session: SessionAssignment) => session.token
    return {
      edge: { url: edgeUrl, inspectorUrl: edge.inspectorUrl },
      stubUrl: stub.url,
      runner,
      runnerV1,
      runnerB,
      tokens: { tunnel: tunnel.map(token), direct: direct.map(token), tunnel_v1: tunnelV1.map(token), tunnel_b: tunnelB.map(token), bare },
      admin,
      stop,
    }
  } catch (error) {
    await stop()
    throw error
  }
}
