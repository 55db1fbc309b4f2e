/**
 * @module
 * `npm run chaos [-- --only R2,R4 --scale 0.2]`: the real stack (stand-in engine, the edge under
 * `wrangler dev` with persistence, runners over real WebSockets) under load and faults, one scenario
 * after another, each on a fresh stack. Prints a table and, as the last line, one JSON object with a row
 * per scenario `{sent, served, captured, lost, errors, edge_5xx, notes, …}`. Exits 1 when any row has
 * `lost` or `errors` or `edge_5xx` above 0. Loopback only; every loop bounded in count and time.
 */
import { parseArgs, usageError } from './lib/cli-args.ts'
import { r1Hostile } from './chaos/r1-hostile.ts'
import { r2EngineFaults } from './chaos/r2-engine-faults.ts'
import { r3RunnerKill } from './chaos/r3-runner-kill.ts'
import { r4EdgeRestart } from './chaos/r4-edge-restart.ts'
import { r5CallbackDown } from './chaos/r5-callback-down.ts'
import { r6Credentials } from './chaos/r6-credentials.ts'
import { r7TunnelLoad } from './chaos/r7-tunnel-load.ts'
import type { Scenario, ScenarioRow } from './chaos/scenario.ts'

const SCENARIOS: Scenario[] = [r1Hostile, r2EngineFaults, r3RunnerKill, r4EdgeRestart, r5CallbackDown, r6Credentials, r7TunnelLoad]

const ARGS = {
  options: {
    only: { type: 'string' },
    scale: { type: 'string', default: '1' },
  },
} as const
const { values } = parseArgs(
  ARGS,
  `scenarios (--only takes their ids, comma-separated):\n${SCENARIOS.map((s) => `  ${s.id}  ${s.title}`).join('\n')}`,
)
const only = values.only ? new Set(values.only.split(',').map((id) => id.trim().toUpperCase())) : null
const unknownIds = [...(only ?? [])].filter((id) => !SCENARIOS.some((scenario) => scenario.id === id))
if (unknownIds.length > 0)
  usageError(ARGS, `--only: no scenario ${unknownIds.join(', ')} (known: ${SCENARIOS.map((s) => s.id).join(', ')})`)
const scale = Number(values.scale)
if (!(scale > 0 && scale <= 1)) usageError(ARGS, `--scale must be in (0, 1], got "${values.scale}"`)

let interrupted = false
process.once('SIGINT', () => {
  interrupted = true
  console.error('interrupted: finishing the current scenario’s cleanup, then exiting')
})

const rows: Record<string, ScenarioRow & { title: string; wall_s: number }> = {}
for (const scenario of SCENARIOS) {
  if (only && !only.has(scenario.id)) continue
  if (interrupted) break
  const started = Date.now()
  console.error(`== ${scenario.id} ${scenario.title}`)
  let row: ScenarioRow
  try {
    row = await scenario.run({ scale, log: (line) => console.error(`   ${line}`) })
  } catch (error) {
    row = {
      sent: 0,
      served: 0,
      captured: 0,
      lost: 0,
      errors: 1,
      edge_5xx: 0,
      notes: [`scenario failed: ${(error as Error).stack ?? error}`],
    }
  }
  rows[scenario.id] = { title: scenario.title, ...row, wall_s: Math.round((Date.now() - started) / 100) / 10 }
}

const header = ['id', 'sent', 'served', 'captured', 'lost', 'errors', 'edge_5xx', 'wall_s', 'scenario']
console.log(header.join('\t'))
for (const [id, row] of Object.entries(rows)) {
  console.log([id, row.sent, row.served, row.captured, row.lost, row.errors, row.edge_5xx, row.wall_s, row.title].join('\t'))
  for (const note of row.notes.slice(0, 20)) console.log(`  - ${note}`)
}
const failed = Object.values(rows).some((row) => row.lost > 0 || row.errors > 0 || row.edge_5xx > 0)
console.log(JSON.stringify(rows))
process.exit(failed ? 1 : 0)
