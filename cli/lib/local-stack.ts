/**
 * @module
 * A throwaway local Rollgate stack for offline jobs (`rollgate generate-sft`): the edge under `wrangler dev`
 * (local persistence in a temp dir, loopback only) talking to a given model server, plus one local
 * `rollgate runner` (local sandbox runtime) connected to it. Everything it starts ends with `stop()`,
 * which is also safe to call twice and from a signal handler.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { type EdgeProcess, startEdge, stopChild } from '../../scripts/lib/processes.ts'
import { EdgeClient } from './edge-client.ts'

const ROLLGATE_BIN = fileURLToPath(new URL('../rollgate.ts', import.meta.url))

export interface LocalStackOptions {
  upstreamUrl: string
  upstreamKind: 'vllm' | 'sglang' | 'openai'
  /** Bearer for a hosted upstream (`ROLLGATE_UPSTREAM_API_KEY`). */
  upstreamApiKey?: string | undefined
  servedModel?: string | undefined
  /** Runner concurrency (RUNNING slots; INIT and POSTRUN get the same). */
  concurrency: number
  /** Print the edge's and runner's output. */
  verbose?: boolean
  /** How long to wait for the runner to register. */
  readyTimeoutMs?: number
}

export interface LocalStack {
  edgeUrl: string
  adminToken: string
  client: EdgeClient
  /** Host directory of a session on the local runner (`logs/agent/` holds the harness's own output); kept until `stop()`. */
  sessionDir(sessionId: string): string
  stop(): Promise<void>
}

export async function startLocalStack(options: LocalStackOptions): Promise<LocalStack> {
  const scratch = await mkdtemp(join(tmpdir(), 'rollgate-stack-'))
  const adminToken = randomBytes(16).toString('hex')
  const runnerToken = randomBytes(16).toString('hex')
  let edge: EdgeProcess | null = null
  let runner: ChildProcess | null = null
  let stopped = false
  const stop = async () => {
    if (stopped) return
    stopped = true
    if (runner) await stopChild(runner, 15_000)
    if (edge) await edge.stop()
    // Debugging: ROLLGATE_KEEP_STACK=1 keeps the edge state and the runner's session dirs.
    if (process.env.ROLLGATE_KEEP_STACK === '1') process.stderr.write(`kept the local stack's state in ${scratch}\n`)
    else await rm(scratch, { recursive: true, force: true })
  }
  try {
    edge = await startEdge({
      persistTo: join(scratch, 'edge'),
      verbose: options.verbose ?? false,
      vars: {
        ROLLGATE_ADMIN_TOKEN: adminToken,
        ROLLGATE_SIGNING_KEY: randomBytes(16).toString('hex'),
        ROLLGATE_RUNNER_TOKEN: runnerToken,
        ROLLGATE_UPSTREAM_URL: options.upstreamUrl,
        ROLLGATE_UPSTREAM_KIND: options.upstreamKind,
        ...(options.servedModel ? { ROLLGATE_SERVED_MODEL: options.servedModel } : {}),
        ...(options.upstreamApiKey ? { ROLLGATE_UPSTREAM_API_KEY: options.upstreamApiKey } : {}),
      },
    })
    const slots = String(options.concurrency)
    const runnerId = `local-${process.pid}`
    runner = spawn(
      process.execPath,
      [
        ROLLGATE_BIN,
        'runner',
        '--edge',
        edge.url,
        '--token',
        runnerToken,
        '--upstream',
        'none',
        '--runtime',
        'local',
        '--max-init',
        slots,
        '--max-run',
        slots,
        '--max-postrun',
        slots,
        '--state-dir',
        join(scratch, 'runner'),
        '--runner-id',
        runnerId,
        '--status-port',
        '0',
        '--json-logs',
      ],
      { stdio: ['ignore', options.verbose ? 'inherit' : 'ignore', options.verbose ? 'inherit' : 'pipe'] },
    )
    let runnerErrors = ''
    runner.stderr?.on('data', (chunk: Buffer) => {
      runnerErrors = (runnerErrors + chunk.toString()).slice(-4000)
    })
    const client = new EdgeClient({ edge: edge.url, adminToken })
    const deadline = Date.now() + (options.readyTimeoutMs ?? 60_000)
    for (;;) {
      if (runner.exitCode !== null) throw new Error(`the local runner exited (${runner.exitCode}) before registering\n${runnerErrors}`)
      const status = await client.rolloutStatus().catch(() => null)
      if (status?.nodes.nodes.some((node) => node.node_id === runnerId && node.connected)) break
      if (Date.now() > deadline) throw new Error(`the local runner did not register with the edge in time\n${runnerErrors}`)
      await new Promise((resolve) => setTimeout(resolve, 250))
    }
    const sessionDir = (sessionId: string) => join(scratch, 'runner', 'sessions', sessionId)
    return { edgeUrl: edge.url, adminToken, client, sessionDir, stop }
  } catch (error) {
    await stop()
    throw error
  }
}
