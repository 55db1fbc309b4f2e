/**
 * @module
 * `npm run dev:stack`: the stand-in engine on :8000 and the edge (`wrangler dev`, persistence in
 * `.state/`) on :8787 together, until Ctrl-C. Ports: `--engine-port`, `--port`.
 */
import { parseArgs } from 'node:util'
import { startEngine } from '../engine/server.ts'
import { edgeVarsFromEnv } from './dev.ts'
import { startEdge } from './lib/processes.ts'

const { values } = parseArgs({
  options: {
    port: { type: 'string', default: '8787' },
    'engine-port': { type: 'string', default: '8000' },
    'persist-to': { type: 'string', default: '.state' },
  },
})
const engine = await startEngine({ port: Number(values['engine-port']) })
const vars: Record<string, string> = { ...edgeVarsFromEnv(), ROLLGATE_UPSTREAM_URL: engine.url }
const adminToken = vars.ROLLGATE_ADMIN_TOKEN ?? ''
const edge = await startEdge({ port: Number(values.port), persistTo: values['persist-to'] ?? '.state', vars })
console.log(`engine ${engine.url}\nedge   ${edge.url}  (admin token: ${adminToken})`)
console.log(`try: curl -s -X POST ${edge.url}/v1/sessions -H 'authorization: Bearer ${adminToken}' -d '{}'`)
const stop = async () => {
  await edge.stop()
  await engine.close()
  process.exit(0)
}
process.on('SIGINT', () => void stop())
process.on('SIGTERM', () => void stop())
