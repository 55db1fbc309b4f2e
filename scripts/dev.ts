/**
 * @module
 * `npm run dev -- --port 8787`: the edge under `wrangler dev` with local persistence (`.state/`),
 * reading the upstream and tokens from the environment (defaults suit a local stand-in engine).
 */
import { parseArgs } from 'node:util'
import { startEdge } from './lib/processes.ts'

export function edgeVarsFromEnv(): Record<string, string> {
  return {
    ROLLGATE_ADMIN_TOKEN: process.env.ROLLGATE_ADMIN_TOKEN ?? 'dev-admin-token',
    ROLLGATE_SIGNING_KEY: process.env.ROLLGATE_SIGNING_KEY ?? 'dev-signing-key',
    ROLLGATE_UPSTREAM_URL: process.env.ROLLGATE_UPSTREAM_URL ?? 'http://127.0.0.1:8000',
    ROLLGATE_UPSTREAM_KIND: process.env.ROLLGATE_UPSTREAM_KIND ?? 'vllm',
    ROLLGATE_SERVED_MODEL: process.env.ROLLGATE_SERVED_MODEL ?? '',
  }
}

if (import.meta.main) {
  const { values } = parseArgs({
    options: { port: { type: 'string', default: '8787' }, 'persist-to': { type: 'string', default: '.state' } },
  })
  const vars = edgeVarsFromEnv()
  const edge = await startEdge({ port: Number(values.port), persistTo: values['persist-to'] ?? '.state', vars, verbose: true })
  console.log(
    `rollgate edge on ${edge.url} (upstream ${vars.ROLLGATE_UPSTREAM_URL}, admin token ${vars.ROLLGATE_ADMIN_TOKEN === 'dev-admin-token' ? 'dev-admin-token' : '<from env>'})`,
  )
  const stop = () => void edge.stop().then(() => process.exit(0))
  process.on('SIGINT', stop)
  process.on('SIGTERM', stop)
  edge.child.on('exit', (code) => process.exit(code ?? 0))
}
