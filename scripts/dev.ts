/**
 * @module
 * `npm run dev -- --port 8787`: the edge under `wrangler dev` with local persistence (`.state/`),
 * passing every `ROLLGATE_*` variable of its environment to the edge (runner token included, so a local
 * `rollgate runner` can connect); defaults suit a local stand-in engine (`DEV_DEFAULTS`).
 */
import { PortInUseError, rollgateVarsFromEnv, startEdge } from './lib/processes.ts'
import { scriptArgs } from './lib/script-args.ts'

const USAGE = `Usage: npm run dev -- [--port 8787] [--persist-to .state]   (also: npx rollgate dev …)

The edge under wrangler dev with local persistence. Every ROLLGATE_* variable of the environment is passed
to the edge; unset ones default to dev tokens (admin dev-admin-token, runner dev-runner-token) and the
stand-in engine at http://127.0.0.1:8000. \`npm run dev:stack\` starts the engine too.`

/** Local defaults (dev tokens, the stand-in engine), overridden by every `ROLLGATE_*` variable of `env`. */
export const DEV_DEFAULTS: Readonly<Record<string, string>> = {
  ROLLGATE_ADMIN_TOKEN: 'dev-admin-token',
  ROLLGATE_SIGNING_KEY: 'dev-signing-key',
  ROLLGATE_RUNNER_TOKEN: 'dev-runner-token',
  ROLLGATE_UPSTREAM_URL: 'http://127.0.0.1:8000',
  ROLLGATE_UPSTREAM_KIND: 'vllm',
  ROLLGATE_SERVED_MODEL: '',
}

export function edgeVarsFromEnv(env: NodeJS.ProcessEnv = process.env): Record<string, string> {
  return { ...DEV_DEFAULTS, ...rollgateVarsFromEnv(env) }
}

/**
 * A line saying that nothing answers at the engine URL (connection refused, no such host, no answer in 2 s), with
 * how to start one; null when something answers (any HTTP status: a hosted API may want a key). Before, the edge
 * came up with no word of it and the first model call was a 502.
 */
export async function engineMissing(upstream: string): Promise<string | null> {
  const base = upstream.replace(/\/+$/, '')
  try {
    await fetch(`${base}/v1/models`, { signal: AbortSignal.timeout(2_000) })
    return null
  } catch {
    let port = '8000'
    try {
      port = new URL(base).port || port
    } catch {}
    return `note: no engine answers at ${base} yet: model calls get a 502 until one does (the stand-in: npm run engine -- --port ${port}; another engine: ROLLGATE_UPSTREAM_URL; npm run dev:stack starts both)`
  }
}

if (import.meta.main) {
  const values = scriptArgs(USAGE, { port: { type: 'string', default: '8787' }, 'persist-to': { type: 'string', default: '.state' } })
  const vars = edgeVarsFromEnv()
  const edge = await startEdge({ port: Number(values.port), persistTo: values['persist-to'], vars, verbose: true }).catch(
    (error: unknown) => {
      if (!(error instanceof PortInUseError)) throw error
      process.stderr.write(`error: ${error.message}\n`)
      process.exit(1)
    },
  )
  let stopping = false
  const stop = () => {
    stopping = true
    void edge.stop().then(() => process.exit(0))
  }
  process.on('SIGINT', stop)
  process.on('SIGTERM', stop)
  // wrangler ending on its own ends this script with its code; stopped by a signal here, this script exits 0.
  edge.child.on('exit', (code) => {
    if (!stopping) process.exit(code ?? 0)
  })
  console.log(
    `rollgate edge on ${edge.url} (upstream ${vars.ROLLGATE_UPSTREAM_URL}, admin token ${vars.ROLLGATE_ADMIN_TOKEN === 'dev-admin-token' ? 'dev-admin-token' : '<from env>'})`,
  )
  const missing = await engineMissing(vars.ROLLGATE_UPSTREAM_URL ?? '')
  console.log(missing ?? `engine answers at ${vars.ROLLGATE_UPSTREAM_URL}`)
}
