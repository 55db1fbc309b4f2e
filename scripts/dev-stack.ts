/**
 * @module
 * `npm run dev:stack`: the stand-in engine on :8000 and the edge (`wrangler dev`, persistence in
 * `.state/`) on :8787 together, until Ctrl-C. Ports: `--engine-port`, `--port`.
 */
import { edgeVarsFromEnv } from './dev.ts'
import { assertPortFree, PortInUseError, startEdge } from './lib/processes.ts'
import { describePortHolder } from './lib/port-holder.ts'
import { scriptArgs } from './lib/script-args.ts'

const USAGE = `Usage: npm run dev:stack -- [--port 8787] [--engine-port 8000] [--policy scripted] [--max-model-len 262144] [--persist-to .state]   (also: npx rollgate dev --stack …)

The stand-in engine and the edge (wrangler dev, local persistence) together until Ctrl-C. Every ROLLGATE_*
variable of the environment is passed to the edge; the admin token is dev-admin-token unless
ROLLGATE_ADMIN_TOKEN is set. --policy picks the engine's stand-in policy (scripted | script | drift | solver |
solver-subagent; \`solver\` solves tasks/fix-stats through a harness's tools, as in \`npm run demo\`).
--max-model-len is the engine's context window: 262144 by default, as in the demo; with a smaller one, output
budgets that do not fit (qwen_code asks for 32768 tokens) are lowered to it.`

const values = scriptArgs(USAGE, {
  port: { type: 'string', default: '8787' },
  'engine-port': { type: 'string', default: '8000' },
  policy: { type: 'string', default: 'scripted' },
  'max-model-len': { type: 'string', default: '262144' },
  'persist-to': { type: 'string', default: '.state' },
})
// Imported after the flags are read: `--help` and a mistyped flag answer without loading the tokenizer.
const { startEngine } = await import('../engine/server.ts')
const { POLICY_NAMES } = await import('../engine/policy/registry.ts')
if (!(POLICY_NAMES as readonly string[]).includes(values.policy)) {
  process.stderr.write(`error: --policy must be one of ${POLICY_NAMES.join(', ')}, got "${values.policy}"\n\n${USAGE}\n`)
  process.exit(2)
}
const maxModelLen = Number(values['max-model-len'])
if (!(Number.isSafeInteger(maxModelLen) && maxModelLen > 0)) {
  process.stderr.write(`error: --max-model-len must be a positive integer, got "${values['max-model-len']}"\n\n${USAGE}\n`)
  process.exit(2)
}
/** A taken port is one line saying which (exit 1), not a stack trace; anything else still throws. */
function portTaken(error: unknown, flag: string, port: string): never {
  const code = (error as NodeJS.ErrnoException).code
  if (!(error instanceof PortInUseError) && code !== 'EADDRINUSE') throw error
  process.stderr.write(
    `error: ${error instanceof PortInUseError ? error.message : `port ${port} is already in use (${describePortHolder(Number(port))}another engine still running?): stop it, or pick another with ${flag}`}\n`,
  )
  process.exit(1)
}
await assertPortFree(Number(values.port)).catch((error: unknown) => portTaken(error, '--port', values.port))
const engine = await startEngine({
  port: Number(values['engine-port']),
  policy: values.policy as (typeof POLICY_NAMES)[number],
  maxModelLen,
}).catch((error: unknown) => portTaken(error, '--engine-port', values['engine-port']))
const vars: Record<string, string> = { ...edgeVarsFromEnv(), ROLLGATE_UPSTREAM_URL: engine.url }
const adminToken = vars.ROLLGATE_ADMIN_TOKEN ?? ''
const edge = await startEdge({ port: Number(values.port), persistTo: values['persist-to'], vars }).catch(async (error: unknown) => {
  await engine.close()
  return portTaken(error, '--port', values.port)
})
console.log(
  `engine ${engine.url}  (policy ${values.policy}, window ${maxModelLen} tokens)\nedge   ${edge.url}  (admin token: ${adminToken})`,
)
console.log(`try: curl -s -X POST ${edge.url}/v1/sessions -H 'authorization: Bearer ${adminToken}' -d '{}'`)
const stop = async () => {
  await edge.stop()
  await engine.close()
  process.exit(0)
}
process.on('SIGINT', () => void stop())
process.on('SIGTERM', () => void stop())
